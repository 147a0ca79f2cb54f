package view

import (
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	ray "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/gantry-dev/gantry/jobkind"
)

// jobProgress is what the hub mirrored back of its job from the cluster it runs on: how far it got, as
// its kind reads its status, with the kind's own counts, and the conditions that hold; nil without a job.
func jobProgress(job client.Object) *JobProgress {
	if job == nil {
		return nil
	}
	k, ok := jobkind.ForObject(job)
	if !ok {
		return nil
	}
	return &JobProgress{Progress: progress(k.State(job)), Detail: statusDetail(job), Conditions: trueConditions(job)}
}

// progress says how far a job got. Its suspension is left out: the hub's object is held by Gantry (for
// some kinds by spec.suspend), so that says nothing of its run; a suspension on the worker comes back
// as a condition.
func progress(st jobkind.State) string {
	switch {
	case st.Finished && st.Succeeded:
		return ProgressSucceeded
	case st.Finished:
		return ProgressFailed
	case st.Started:
		return ProgressRunning
	}
	return ProgressNotStarted
}

// statusDetail is what a kind's status counts, for the kinds that count: empty for the others.
func statusDetail(obj client.Object) string {
	switch job := obj.(type) {
	case *batchv1.Job:
		st := job.Status
		ready := int32(0)
		if st.Ready != nil {
			ready = *st.Ready
		}
		return fmt.Sprintf("%d active (%d ready), %d succeeded, %d failed", st.Active, ready, st.Succeeded, st.Failed)
	case *jobset.JobSet:
		var parts []string
		for _, r := range job.Status.ReplicatedJobsStatus {
			parts = append(parts, fmt.Sprintf("%s %d/%d/%d", r.Name, r.Ready, r.Succeeded, r.Failed))
		}
		if len(parts) == 0 {
			return ""
		}
		return "Jobs ready/succeeded/failed per replicated job: " + strings.Join(parts, ", ")
	case *ray.RayJob:
		st := job.Status
		if st.JobDeploymentStatus == "" {
			return ""
		}
		detail := fmt.Sprintf("deployment %s, Ray job %s", st.JobDeploymentStatus, dashIfEmpty(string(st.JobStatus)))
		if st.Reason != "" || st.Message != "" {
			detail += fmt.Sprintf(" (%s)", strings.TrimSpace(string(st.Reason)+" "+st.Message))
		}
		return detail
	}
	return ""
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// trueConditions are the True conditions of obj's status.conditions, in their order. Every kind's
// conditions have the fields of Kubernetes' API conventions (batch Job's included), so they are read
// the same way for all.
func trueConditions(obj client.Object) []JobCondition {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil
	}
	list, _, _ := unstructured.NestedSlice(u, "status", "conditions")
	var out []JobCondition
	for _, item := range list {
		c, ok := item.(map[string]any)
		if !ok || c["status"] != "True" {
			continue
		}
		str := func(key string) string { s, _ := c[key].(string); return s }
		t, _ := time.Parse(time.RFC3339, str("lastTransitionTime"))
		out = append(out, JobCondition{Type: str("type"), Reason: str("reason"), Message: str("message"), Time: metav1.NewTime(t)})
	}
	return out
}

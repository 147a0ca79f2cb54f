package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// A Job whose pods no node can hold (16 GPUs a pod, 8 a node), with a deadline of its own, ends as
// Inadmissible once the deadline passes: its Workload says the deadline and what blocked it, the hub
// Job shows Failed with that reason (as kubectl get job tells), no copy of it is left on a worker, and
// over the whole history no worker ever had a Job or a pod of it.
func TestAJobPastItsAdmissionDeadlineEndsAsInadmissible(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "deadline")
	dumpOnFailure(t, ns)
	job := makeJob(ns, "too-big").gpus(16).obj()
	job.Annotations = map[string]string{gantry.AdmissionDeadlineAnnotation: "15s"}
	submitted := time.Now()
	submit(t, job)

	key := types.NamespacedName{Namespace: ns, Name: "job-too-big"}
	var finished *metav1.Condition
	eventually(t, "the Workload finished as Inadmissible", 2*time.Minute, poll, func() error {
		var wl gantry.Workload
		if err := tb.Hub.Client.Get(ctx, key, &wl); err != nil {
			return err
		}
		if finished = apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadFinished); finished == nil || finished.Status != metav1.ConditionTrue {
			return fmt.Errorf("not finished: %s", conditions(wl.Status.Conditions))
		}
		return nil
	})
	t.Logf("finished %s after the submission: %s: %s", since(submitted), finished.Reason, finished.Message)
	if finished.Reason != gantry.ReasonInadmissible || !strings.Contains(finished.Message, "admission deadline of 15s") {
		t.Fatalf("finished %s: %s; want %s with the deadline", finished.Reason, finished.Message, gantry.ReasonInadmissible)
	}
	// The deadline counts from the Workload's creationTimestamp, which has whole seconds.
	if elapsed := time.Since(submitted); elapsed < 14*time.Second {
		t.Errorf("finished %s after the submission, before its deadline", elapsed)
	}
	eventually(t, "the hub Job Failed", time.Minute, poll, func() error {
		var hub batchv1.Job
		if err := tb.Hub.Client.Get(ctx, client.ObjectKeyFromObject(job), &hub); err != nil {
			return err
		}
		for _, c := range hub.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason == gantry.ReasonInadmissible {
				return nil
			}
		}
		return fmt.Errorf("hub Job conditions %+v", hub.Status.Conditions)
	})
	eventually(t, "no copy left on a worker", time.Minute, poll, func() error {
		for _, w := range tb.Workers {
			if err := w.Client.Get(ctx, key, &gantry.Workload{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("a copy on %s: %v", w.Name, err)
			}
		}
		return nil
	})
	if err := audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if pods, jobs := audit.Pods(ns), auditJobs(t, ns).created; len(pods) > 0 || len(jobs) > 0 {
		t.Errorf("the workers had pods %v and Jobs %v of it", pods, jobs)
	}
}

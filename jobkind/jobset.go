package jobkind

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func init() { register(JobSet{}) }

// JobSet is jobset.x-k8s.io/v1alpha2 JobSet: one pod set per replicated job, all of them one gang on
// one worker, where the JobSet controller runs it.
type JobSet struct{}

// Name implements Kind.
func (JobSet) Name() gantry.JobKind { return gantry.JobKindJobSet }

// GroupVersionKind implements Kind.
func (JobSet) GroupVersionKind() schema.GroupVersionKind {
	return jobset.SchemeGroupVersion.WithKind("JobSet")
}

// Resource implements Kind.
func (JobSet) Resource() schema.GroupVersionResource {
	return jobset.SchemeGroupVersion.WithResource("jobsets")
}

// New implements Kind.
func (JobSet) New() client.Object { return &jobset.JobSet{} }

// NewList implements Kind.
func (JobSet) NewList() client.ObjectList { return &jobset.JobSetList{} }

// Held implements Kind: spec.managedBy names Gantry, so a JobSet controller on the hub leaves it alone.
func (k JobSet) Held(obj client.Object) (bool, string) {
	return heldByManagedBy(k, obj.(*jobset.JobSet).Spec.ManagedBy)
}

// PodSets implements Kind: a replicated job's pods are its replicas times the pods of its Job template;
// the Job template's annotations may choose the set's placement. JobSet creates the Jobs of a replicated
// job that dependsOn others only once those are Ready or Complete: such a set is deferred.
func (JobSet) PodSets(obj client.Object) ([]PodSet, error) {
	js := obj.(*jobset.JobSet)
	sets := make([]PodSet, 0, len(js.Spec.ReplicatedJobs))
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		sets = append(sets, PodSet{Name: rj.Name, Count: max(rj.Replicas, 1) * JobPods(&rj.Template.Spec),
			Template: &rj.Template.Spec.Template, Annotations: rj.Template.Annotations, Deferred: len(rj.DependsOn) > 0})
	}
	return sets, nil
}

// Remote implements Kind.
func (JobSet) Remote(hub client.Object, _ []gantry.PodSet, labels map[string]string, edit func(string, *corev1.PodTemplateSpec)) client.Object {
	h := hub.(*jobset.JobSet)
	js := &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: h.Name, Namespace: h.Namespace, Labels: merge(h.Labels, labels), Annotations: h.Annotations},
		Spec:       *h.Spec.DeepCopy(),
	}
	js.Spec.ManagedBy = nil
	js.Spec.Suspend = ptr.To(false)
	js.Spec.TTLSecondsAfterFinished = nil
	for i := range js.Spec.ReplicatedJobs {
		// The pods carry Gantry's labels, not the JobSet's Jobs: Gantry's Jobs on a worker are the ones it
		// creates itself.
		rj := &js.Spec.ReplicatedJobs[i]
		labelTemplate(&rj.Template.Spec.Template, rj.Name, labels)
		edit(rj.Name, &rj.Template.Spec.Template)
	}
	return js
}

// State implements Kind. A JobSet has no start time: it started once any of its Jobs counts a pod.
func (JobSet) State(obj client.Object) State {
	js := obj.(*jobset.JobSet)
	st := State{Suspended: ptr.Deref(js.Spec.Suspend, false)}
	for _, r := range js.Status.ReplicatedJobsStatus {
		st.Started = st.Started || r.Active+r.Ready+r.Succeeded+r.Failed > 0
	}
	switch {
	case apimeta.IsStatusConditionTrue(js.Status.Conditions, string(jobset.JobSetCompleted)):
		st.Started, st.Finished, st.Succeeded = true, true, true
	case apimeta.IsStatusConditionTrue(js.Status.Conditions, string(jobset.JobSetFailed)):
		st.Started, st.Finished = true, true
	}
	return st
}

// Progress implements Kind: each replicated job's finished Jobs, the true conditions and the terminal
// state.
func (JobSet) Progress(obj client.Object) string {
	st := obj.(*jobset.JobSet).Status
	var b strings.Builder
	for _, r := range st.ReplicatedJobsStatus {
		fmt.Fprintf(&b, "%s: %d succeeded, %d failed; ", r.Name, r.Succeeded, r.Failed)
	}
	return b.String() + trueConditions(st.Conditions) + " " + st.TerminalState
}

// CopyStatus implements Kind.
func (JobSet) CopyStatus(to, from client.Object) bool {
	return setStatus(&to.(*jobset.JobSet).Status, *from.(*jobset.JobSet).Status.DeepCopy())
}

// ClearStatus implements Kind.
func (JobSet) ClearStatus(obj client.Object) bool {
	return setStatus(&obj.(*jobset.JobSet).Status, jobset.JobSetStatus{})
}

// Fail implements Kind: the Failed condition and terminal state, as the JobSet controller writes them.
func (k JobSet) Fail(obj client.Object, reason, message string, now metav1.Time) bool {
	if k.State(obj).Finished {
		return false
	}
	st := &obj.(*jobset.JobSet).Status
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: string(jobset.JobSetFailed), Status: metav1.ConditionTrue,
		Reason: reason, Message: message, LastTransitionTime: now})
	st.TerminalState = string(jobset.JobSetFailed)
	return true
}

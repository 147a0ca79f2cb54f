package jobkind

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func init() { register(Job{}) }

// Job is batch/v1 Job: one pod set, "main".
type Job struct{}

// Labels the hub's Job controller puts on a Job's selector and pod template; they are tied to the hub
// Job's UID and must not reach the worker.
var jobControllerLabels = []string{
	"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name",
}

// Name implements Kind.
func (Job) Name() gantry.JobKind { return gantry.JobKindJob }

// GroupVersionKind implements Kind.
func (Job) GroupVersionKind() schema.GroupVersionKind {
	return batchv1.SchemeGroupVersion.WithKind("Job")
}

// Resource implements Kind.
func (Job) Resource() schema.GroupVersionResource {
	return batchv1.SchemeGroupVersion.WithResource("jobs")
}

// New implements Kind.
func (Job) New() client.Object { return &batchv1.Job{} }

// NewList implements Kind.
func (Job) NewList() client.ObjectList { return &batchv1.JobList{} }

// Held implements Kind: spec.managedBy names Gantry, so the hub's Job controller leaves it alone.
func (k Job) Held(obj client.Object) (bool, string) {
	return heldByManagedBy(k, obj.(*batchv1.Job).Spec.ManagedBy)
}

// PodSets implements Kind.
func (Job) PodSets(obj client.Object) ([]PodSet, error) {
	job := obj.(*batchv1.Job)
	return []PodSet{{Name: "main", Count: JobPods(&job.Spec), Template: &job.Spec.Template}}, nil
}

// JobPods is how many pods of a Job run at once: its parallelism, or fewer when fewer completions are
// asked for.
func JobPods(spec *batchv1.JobSpec) int32 {
	n := ptr.Deref(spec.Parallelism, 1)
	if spec.Completions != nil && *spec.Completions < n {
		n = *spec.Completions
	}
	return n
}

// Remote implements Kind. The worker's Job controller runs the Job with fresh selector labels.
func (Job) Remote(hub client.Object, _ []gantry.PodSet, labels map[string]string, edit func(string, *corev1.PodTemplateSpec)) client.Object {
	h := hub.(*batchv1.Job)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: h.Name, Namespace: h.Namespace, Labels: merge(h.Labels, labels), Annotations: h.Annotations},
		Spec:       *h.Spec.DeepCopy(),
	}
	remoteJobSpec(&job.Spec)
	labelTemplate(&job.Spec.Template, "main", labels)
	edit("main", &job.Spec.Template)
	return job
}

// remoteJobSpec makes a Job's spec one the worker's Job controller runs: no managedBy, not suspended,
// no TTL, and neither the selector nor the labels of the hub's Job controller.
func remoteJobSpec(spec *batchv1.JobSpec) {
	spec.ManagedBy = nil
	spec.Suspend = ptr.To(false)
	spec.TTLSecondsAfterFinished = nil
	spec.Selector, spec.ManualSelector = nil, nil
	for _, l := range jobControllerLabels {
		delete(spec.Template.Labels, l)
	}
}

// State implements Kind.
func (Job) State(obj client.Object) State {
	job := obj.(*batchv1.Job)
	st := State{Started: job.Status.StartTime != nil, Suspended: ptr.Deref(job.Spec.Suspend, false)}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			st.Started, st.Finished, st.Succeeded = true, true, true
		case batchv1.JobFailed:
			st.Started, st.Finished = true, true
		case batchv1.JobSuccessCriteriaMet, batchv1.JobFailureTarget:
			st.EndingSince = c.LastTransitionTime.Time
		}
	}
	if st.Finished {
		st.EndingSince = time.Time{}
	}
	return st
}

// Progress implements Kind: completions, failures and the true conditions.
func (Job) Progress(obj client.Object) string {
	st := obj.(*batchv1.Job).Status
	var conds []string
	for _, c := range st.Conditions {
		if c.Status == corev1.ConditionTrue {
			conds = append(conds, string(c.Type))
		}
	}
	return fmt.Sprintf("%d succeeded, %d failed %v", st.Succeeded, st.Failed, conds)
}

// CopyStatus implements Kind.
func (Job) CopyStatus(to, from client.Object) bool {
	return setStatus(&to.(*batchv1.Job).Status, *from.(*batchv1.Job).Status.DeepCopy())
}

// ClearStatus implements Kind.
func (Job) ClearStatus(obj client.Object) bool {
	return setStatus(&obj.(*batchv1.Job).Status, batchv1.JobStatus{})
}

// Fail implements Kind: Failed, with the conditions the API server requires of a finished Job.
func (k Job) Fail(obj client.Object, reason, message string, now metav1.Time) bool {
	if k.State(obj).Finished {
		return false
	}
	st := &obj.(*batchv1.Job).Status
	if st.StartTime == nil {
		st.StartTime = &now
	}
	st.Active, st.Ready, st.Terminating, st.UncountedTerminatedPods = 0, nil, nil, nil
	for _, t := range []batchv1.JobConditionType{batchv1.JobFailureTarget, batchv1.JobFailed} {
		st.Conditions = append(st.Conditions, batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue,
			Reason: reason, Message: message, LastProbeTime: now, LastTransitionTime: now})
	}
	return true
}

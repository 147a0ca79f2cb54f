package workersync

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
)

// Labels the hub's Job controller puts on a Job's selector and pod template; they are tied to the hub
// Job's UID and must not reach the worker.
var hubJobControllerLabels = []string{
	"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name",
}

// remoteLabels marks an object on a worker as Gantry's, created for the hub Workload in the given epoch.
func remoteLabels(wl *gantry.Workload, epoch int64) map[string]string {
	return map[string]string{
		gantry.WorkloadUIDLabel:   string(wl.UID),
		gantry.DispatchEpochLabel: strconv.FormatInt(epoch, 10),
	}
}

// NewCopy builds the copy of a hub Workload sent to a nominated cluster.
func NewCopy(wl *gantry.Workload) *gantry.Workload {
	return &gantry.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Name:      wl.Name,
			Namespace: wl.Namespace,
			Labels:    mergeLabels(remoteLabels(wl, wl.Status.DispatchEpoch), map[string]string{gantry.JobNameLabel: wl.Labels[gantry.JobNameLabel]}),
		},
		Spec: *wl.Spec.DeepCopy(),
	}
}

// NewRemoteJob builds the Job that runs on the winner from the hub Job. The worker's Job controller
// runs it (no managedBy, not suspended), with fresh selector labels; ttlSecondsAfterFinished is dropped
// so that a worker never deletes a finished Job before its status reached the hub.
func NewRemoteJob(hubJob *batchv1.Job, wl *gantry.Workload) *batchv1.Job {
	labels := remoteLabels(wl, wl.Status.DispatchEpoch)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:        hubJob.Name,
			Namespace:   hubJob.Namespace,
			Labels:      mergeLabels(hubJob.Labels, labels),
			Annotations: hubJob.Annotations,
		},
		Spec: *hubJob.Spec.DeepCopy(),
	}
	job.Spec.ManagedBy = nil
	job.Spec.Suspend = ptr.To(false)
	job.Spec.TTLSecondsAfterFinished = nil
	job.Spec.Selector = nil
	job.Spec.ManualSelector = nil
	tplLabels := mergeLabels(job.Spec.Template.Labels, labels)
	for _, l := range hubJobControllerLabels {
		delete(tplLabels, l)
	}
	job.Spec.Template.Labels = tplLabels
	pinToAdmission(&job.Spec.Template.Spec, wl)
	return job
}

// pinToAdmission holds the pods to the winning agent's choices, so that the scheduler picks among the
// nodes that the agent's fit chose among: the GPU product of the Job's pod set and the topology domain.
func pinToAdmission(pod *corev1.PodSpec, wl *gantry.Workload) {
	a := wl.Status.Admission
	if a == nil {
		return
	}
	sel := make(map[string]string, len(pod.NodeSelector)+2)
	for k, v := range pod.NodeSelector {
		sel[k] = v
	}
	for _, ps := range a.PodSets { // a Job has one pod set
		if ps.GPUProduct != "" {
			sel[gantry.GPUProductLabel] = ps.GPUProduct
		}
	}
	if wl.Spec.TopologyKey != "" && a.TopologyDomain != "" {
		sel[wl.Spec.TopologyKey] = a.TopologyDomain
	}
	if len(sel) > 0 {
		pod.NodeSelector = sel
	}
}

func mergeLabels(base, extra map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(extra))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// epochOf reads the dispatch epoch an object on a worker was created in; -1 when it has none.
func epochOf(labels map[string]string) int64 {
	e, err := strconv.ParseInt(labels[gantry.DispatchEpochLabel], 10, 64)
	if err != nil {
		return -1
	}
	return e
}

// jobFinished returns the Job's terminal condition type, if any.
func jobFinished(job *batchv1.Job) (batchv1.JobConditionType, bool) {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == "True" {
			return c.Type, true
		}
	}
	return "", false
}

// JobNameOf returns the name of the hub Job that owns the Workload; empty when none does.
func JobNameOf(wl *gantry.Workload) string {
	if ref := metav1.GetControllerOf(wl); ref != nil && ref.Kind == "Job" {
		return ref.Name
	}
	return ""
}

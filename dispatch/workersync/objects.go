package workersync

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

// remoteLabels marks an object on a worker as Gantry's, created for the hub Workload in the given epoch.
func remoteLabels(wl *gantry.Workload, epoch int64) map[string]string {
	return map[string]string{
		gantry.WorkloadUIDLabel:   string(wl.UID),
		gantry.DispatchEpochLabel: strconv.FormatInt(epoch, 10),
	}
}

// NewCopy builds the copy of a hub Workload sent to a nominated cluster; localQueue, when the cluster's
// jobs go through its Kueue, names the LocalQueue whose room the agent admits it by.
func NewCopy(wl *gantry.Workload, localQueue string) *gantry.Workload {
	cp := &gantry.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Name:      wl.Name,
			Namespace: wl.Namespace,
			Labels: mergeLabels(remoteLabels(wl, wl.Status.DispatchEpoch), map[string]string{gantry.JobNameLabel: wl.Labels[gantry.JobNameLabel],
				gantry.DispatchLabel: gantry.Dispatch(wl.UID, wl.Status.DispatchEpoch)}),
		},
		Spec: *wl.Spec.DeepCopy(),
	}
	if localQueue != "" {
		cp.Annotations = map[string]string{gantry.KueueLocalQueueAnnotation: localQueue}
	}
	return cp
}

// NewRemoteJob builds the job that runs on the winner from the hub's job, as its kind says, labelled as
// Gantry's for the Workload's current epoch and held to the winning agent's choices. Where the winner's
// jobs go through Kueue, the job (not its pods: Kueue would take pods so labelled as jobs of their own)
// goes into localQueue; Kueue's webhook suspends it until Kueue admits it.
func NewRemoteJob(hubJob client.Object, wl *gantry.Workload, localQueue string) client.Object {
	job := jobkind.Of(wl).Remote(hubJob, wl.Spec.PodSets, remoteLabels(wl, wl.Status.DispatchEpoch), func(podSet string, tpl *corev1.PodTemplateSpec) {
		pinToAdmission(&tpl.Spec, podSet, wl)
		joinGang(tpl, podSet, wl)
	})
	// The dispatch on the job alone: what the worker's controllers make from it does not carry it.
	job.SetLabels(mergeLabels(job.GetLabels(), map[string]string{gantry.DispatchLabel: gantry.Dispatch(wl.UID, wl.Status.DispatchEpoch)}))
	if localQueue != "" {
		job.SetLabels(mergeLabels(job.GetLabels(), map[string]string{gantry.KueueQueueNameLabel: localQueue}))
	}
	return job
}

// joinGang makes the pods of a pod set that is not deferred join the PodGroup the winning agent made
// for the gang, by spec.schedulingGroup and by the label gantry.dev/pod-group, which the worker's policy
// gantry-pod-group turns into spec.schedulingGroup where a kind's own API drops that field on the way
// to its pods (the CRDs of JobSet, KubeRay and the trainer prune what they do not know). A group the hub
// job named itself is dropped: no such group exists on the worker, and its pods would wait for it.
func joinGang(tpl *corev1.PodTemplateSpec, podSet string, wl *gantry.Workload) {
	delete(tpl.Labels, gantry.PodGroupLabel)
	tpl.Spec.SchedulingGroup = nil
	a := wl.Status.Admission
	if a == nil || a.PodGroup == "" {
		return
	}
	for _, ps := range wl.Spec.PodSets {
		if ps.Name == podSet && ps.Deferred {
			return // its pods come after the others started or finished: no quorum to wait for
		}
	}
	tpl.Labels = mergeLabels(tpl.Labels, map[string]string{gantry.PodGroupLabel: a.PodGroup})
	tpl.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(a.PodGroup)}
}

// pinToAdmission holds the pods of a pod set to the winning agent's choices, so that the scheduler picks
// among the nodes that the agent's fit chose among: the pod set's GPU product and the topology domain.
func pinToAdmission(pod *corev1.PodSpec, podSet string, wl *gantry.Workload) {
	a := wl.Status.Admission
	if a == nil {
		return
	}
	sel := make(map[string]string, len(pod.NodeSelector)+2)
	for k, v := range pod.NodeSelector {
		sel[k] = v
	}
	for _, ps := range a.PodSets {
		if ps.Name == podSet && ps.GPUProduct != "" {
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

// HubJobOf is job when it is the hub job the Workload stands for, the one its controller reference
// names by UID; nil for another job under the same name (resubmitted after the Workload's own was
// deleted), which this Workload must never mark, mirror to or build the winner's Job from.
func HubJobOf(wl *gantry.Workload, job client.Object) client.Object {
	ref := metav1.GetControllerOf(wl)
	if job == nil || ref == nil || ref.UID != job.GetUID() {
		return nil
	}
	return job
}

// JobNameOf returns the name of the hub job that owns the Workload; empty when none does.
func JobNameOf(wl *gantry.Workload) string {
	gvk := jobkind.Of(wl).GroupVersionKind()
	if ref := metav1.GetControllerOf(wl); ref != nil && ref.Kind == gvk.Kind && ref.APIVersion == gvk.GroupVersion().String() {
		return ref.Name
	}
	return ""
}

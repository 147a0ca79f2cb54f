package jobkind

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ray "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func init() { register(RayJob{}) }

// RayJob is ray.io/v1 RayJob: the Ray cluster it brings up (a head pod, each worker group's pods) and
// the pod that submits the job, all one gang on one worker, where KubeRay runs it.
type RayJob struct{}

// submitterPodSet names the pod set of the pod that submits the job (submission mode K8sJobMode).
const submitterPodSet = "submitter"

// Name implements Kind.
func (RayJob) Name() gantry.JobKind { return gantry.JobKindRayJob }

// GroupVersionKind implements Kind.
func (RayJob) GroupVersionKind() schema.GroupVersionKind { return ray.GroupVersion.WithKind("RayJob") }

// Resource implements Kind.
func (RayJob) Resource() schema.GroupVersionResource { return ray.GroupVersion.WithResource("rayjobs") }

// New implements Kind.
func (RayJob) New() client.Object { return &ray.RayJob{} }

// NewList implements Kind.
func (RayJob) NewList() client.ObjectList { return &ray.RayJobList{} }

// Held implements Kind. KubeRay's CRD lets spec.managedBy name only KubeRay or MultiKueue, so a RayJob
// is held by spec.suspend, which the hub's admission policies set at creation and keep set: a KubeRay
// operator on the hub leaves a suspended RayJob alone.
func (RayJob) Held(obj client.Object) (bool, string) {
	if rj := obj.(*ray.RayJob); !rj.Spec.Suspend {
		return false, fmt.Sprintf("RayJob has label %s but spec.suspend is false", gantry.QueueLabel)
	}
	return true, ""
}

// PodSets implements Kind: "head", one per worker group with pods (replicas, or minReplicas, times
// numOfHosts), and "submitter" when KubeRay submits the job from a pod of its own.
func (RayJob) PodSets(obj client.Object) ([]PodSet, error) {
	rj := obj.(*ray.RayJob)
	spec := rj.Spec.RayClusterSpec
	if spec == nil {
		return nil, fmt.Errorf("the RayJob has no rayClusterSpec: one that runs on an existing Ray cluster (spec.clusterSelector) is not dispatched")
	}
	sets := []PodSet{{Name: "head", Count: 1, Template: &spec.HeadGroupSpec.Template}}
	for i := range spec.WorkerGroupSpecs {
		g := &spec.WorkerGroupSpecs[i]
		pods := ptr.Deref(g.Replicas, ptr.Deref(g.MinReplicas, 0)) * max(g.NumOfHosts, 1)
		if pods > 0 && !ptr.Deref(g.Suspend, false) {
			sets = append(sets, PodSet{Name: g.GroupName, Count: pods, Template: &g.Template})
		}
	}
	if tpl := submitterTemplate(rj); tpl != nil {
		// KubeRay creates the submitter only once the Ray cluster is ready.
		sets = append(sets, PodSet{Name: submitterPodSet, Count: 1, Template: tpl, Deferred: true})
	}
	return sets, nil
}

// submitterTemplate is the pod template KubeRay submits the job from: the RayJob's own, or the one
// KubeRay makes when it gives none (the head's image, 500m CPU and 200Mi memory requested); nil when
// the job is not submitted from a pod (HTTP, interactive or sidecar modes).
func submitterTemplate(rj *ray.RayJob) *corev1.PodTemplateSpec {
	if mode := rj.Spec.SubmissionMode; mode != "" && mode != ray.K8sJobMode {
		return nil
	}
	if rj.Spec.SubmitterPodTemplate != nil {
		return rj.Spec.SubmitterPodTemplate
	}
	var image string
	if cs := rj.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers; len(cs) > 0 {
		image = cs[0].Image
	}
	return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
		Name: "ray-job-submitter", Image: image,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("200Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}}}}
}

// Remote implements Kind. The submitter's template is written out, so that its pod carries Gantry's
// labels too; the RayJob's deletion rules are dropped, so that KubeRay never deletes the RayJob before
// its end reached the hub (the Ray cluster still goes as shutdownAfterJobFinishes says).
func (RayJob) Remote(hub client.Object, _ []gantry.PodSet, labels map[string]string, edit func(string, *corev1.PodTemplateSpec)) client.Object {
	h := hub.(*ray.RayJob)
	rj := &ray.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: h.Name, Namespace: h.Namespace, Labels: merge(h.Labels, labels), Annotations: h.Annotations},
		Spec:       *h.Spec.DeepCopy(),
	}
	rj.Spec.Suspend, rj.Spec.DeletionStrategy = false, nil
	if tpl := submitterTemplate(rj); tpl != nil {
		rj.Spec.SubmitterPodTemplate = tpl.DeepCopy()
	}
	sets, _ := RayJob{}.PodSets(rj)
	for _, ps := range sets {
		labelTemplate(ps.Template, ps.Name, labels)
		edit(ps.Name, ps.Template)
	}
	return rj
}

// State implements Kind.
func (RayJob) State(obj client.Object) State {
	rj := obj.(*ray.RayJob)
	st := State{Suspended: rj.Spec.Suspend, Started: rj.Status.StartTime != nil}
	switch rj.Status.JobDeploymentStatus {
	case ray.JobDeploymentStatusComplete:
		st.Started, st.Finished, st.Succeeded = true, true, rj.Status.JobStatus == ray.JobStatusSucceeded
	case ray.JobDeploymentStatusFailed, ray.JobDeploymentStatusValidationFailed:
		st.Started, st.Finished = true, true
	}
	return st
}

// Progress implements Kind: the deployment's and the Ray job's status.
func (RayJob) Progress(obj client.Object) string {
	st := obj.(*ray.RayJob).Status
	return string(st.JobDeploymentStatus) + "/" + string(st.JobStatus)
}

// CopyStatus implements Kind.
func (RayJob) CopyStatus(to, from client.Object) bool {
	return setStatus(&to.(*ray.RayJob).Status, *from.(*ray.RayJob).Status.DeepCopy())
}

// ClearStatus implements Kind.
func (RayJob) ClearStatus(obj client.Object) bool {
	return setStatus(&obj.(*ray.RayJob).Status, ray.RayJobStatus{})
}

// Fail implements Kind: deployment status Failed with the reason and message, as KubeRay ends a RayJob.
func (k RayJob) Fail(obj client.Object, reason, message string, now metav1.Time) bool {
	if k.State(obj).Finished {
		return false
	}
	st := &obj.(*ray.RayJob).Status
	st.JobDeploymentStatus, st.Reason, st.Message = ray.JobDeploymentStatusFailed, ray.JobFailedReason(reason), message
	if st.StartTime == nil {
		st.StartTime = &now
	}
	st.EndTime = &now
	return true
}

// Package agenttest builds the objects agent tests need, so that a test reads as the scenario it checks:
//
//	agenttest.MakeNode("gpu-1").GPUs(8, "NVIDIA-A100").Obj()
//	agenttest.MakeCopy("train", "team-a").HubUID("u1").PodSet("main", 2, "nvidia.com/gpu", "4").Obj()
//	agenttest.MakePod("train-0", "team-a").Workload("u1").Node("gpu-1").Request("nvidia.com/gpu", "4").Obj()
package agenttest

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// NodeWrapper builds a Node: Ready, schedulable, with 110 pods allocatable unless changed.
type NodeWrapper struct{ corev1.Node }

// MakeNode starts a Ready, schedulable node.
func MakeNode(name string) *NodeWrapper {
	return &NodeWrapper{corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Allocatable: hubtest.Resources("pods", "110"),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}}
}

// Obj returns the node.
func (w *NodeWrapper) Obj() *corev1.Node { return &w.Node }

// Allocatable sets allocatable amounts (name, quantity pairs).
func (w *NodeWrapper) Allocatable(kv ...string) *NodeWrapper {
	for k, v := range hubtest.Resources(kv...) {
		w.Status.Allocatable[k] = v
	}
	return w
}

// GPUs gives the node n nvidia.com/gpu and labels it with the GPU product.
func (w *NodeWrapper) GPUs(n int, product string) *NodeWrapper {
	w.Status.Allocatable[gantryv1beta1.GPUResource] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	return w.Label(gantryv1beta1.GPUProductLabel, product)
}

// Label sets a label.
func (w *NodeWrapper) Label(k, v string) *NodeWrapper {
	w.Labels[k] = v
	return w
}

// NotReady sets the Ready condition to False.
func (w *NodeWrapper) NotReady() *NodeWrapper {
	w.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	return w
}

// Unschedulable cordons the node.
func (w *NodeWrapper) Unschedulable() *NodeWrapper {
	w.Spec.Unschedulable = true
	return w
}

// Cordoned cordons the node as kubectl cordon and Kubernetes' node lifecycle controller leave it:
// unschedulable, with the node.kubernetes.io/unschedulable:NoSchedule taint.
func (w *NodeWrapper) Cordoned() *NodeWrapper {
	return w.Unschedulable().Taint(corev1.TaintNodeUnschedulable, "", corev1.TaintEffectNoSchedule)
}

// Unreachable leaves the node as Kubernetes does one whose kubelet stopped reporting: Ready Unknown,
// with the node.kubernetes.io/unreachable NoSchedule and NoExecute taints.
func (w *NodeWrapper) Unreachable() *NodeWrapper {
	w.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
	return w.Taint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoSchedule).
		Taint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoExecute)
}

// Taint adds a taint.
func (w *NodeWrapper) Taint(key, value string, effect corev1.TaintEffect) *NodeWrapper {
	w.Spec.Taints = append(w.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return w
}

// CopyWrapper builds a Workload copy as the hub creates it in a worker: hubtest.WorkloadBuilder sets its
// metadata and spec, the methods here what is a copy's own (the hub's label, its deletion) and the
// condition its agent writes.
type CopyWrapper struct {
	hubtest.WorkloadBuilder[*CopyWrapper]
}

// MakeCopy starts a copy with object UID "copy-<name>", hub UID "hub-<name>", dispatch epoch 1, Queue
// "default" and no pod sets.
func MakeCopy(name, namespace string) *CopyWrapper {
	w := &CopyWrapper{}
	w.WorkloadBuilder = hubtest.NewWorkloadBuilder(w, name, namespace)
	return w.UID("copy-"+name).HubUID("hub-"+name).Label(gantryv1beta1.DispatchEpochLabel, "1").Queue("default")
}

// HubUID sets the gantry.dev/workload-uid label: the UID of the hub Workload it is a copy of.
func (w *CopyWrapper) HubUID(uid string) *CopyWrapper {
	return w.Label(gantryv1beta1.WorkloadUIDLabel, uid)
}

// Deleting marks the copy as being deleted, held by a finalizer of the test's: nothing of Gantry's holds
// a copy.
func (w *CopyWrapper) Deleting() *CopyWrapper {
	now := metav1.Now()
	w.DeletionTimestamp = &now
	return w.Finalizer("test.gantry.dev/hold")
}

// Condition sets the Admitted condition, the one its agent writes, changed at hubtest.T0.
func (w *CopyWrapper) Condition(status metav1.ConditionStatus, reason, message string) *CopyWrapper {
	w.Status.Conditions = []metav1.Condition{{
		Type:               gantryv1beta1.WorkloadAdmitted,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: w.ObjectMeta.Generation,
		LastTransitionTime: metav1.NewTime(hubtest.T0),
	}}
	return w
}

// Since sets when the Admitted condition last changed.
func (w *CopyWrapper) Since(t time.Time) *CopyWrapper {
	for i := range w.Status.Conditions {
		w.Status.Conditions[i].LastTransitionTime = metav1.NewTime(t)
	}
	return w
}

// Admitted sets Admitted=True with reason Fits.
func (w *CopyWrapper) Admitted() *CopyWrapper {
	return w.Condition(metav1.ConditionTrue, gantryv1beta1.ReasonFits, "admitted")
}

// PodWrapper builds a Pod with one container.
type PodWrapper struct{ corev1.Pod }

// MakePod starts a pending, unbound pod with one container and no requests.
func MakePod(name, namespace string) *PodWrapper {
	return &PodWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{}},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: new(bool),
			Containers:                   []corev1.Container{{Name: "main", Image: "busybox"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}}
}

// Obj returns the pod.
func (w *PodWrapper) Obj() *corev1.Pod { return &w.Pod }

// Workload labels the pod as a pod of the copy with hub UID uid.
func (w *PodWrapper) Workload(uid string) *PodWrapper {
	w.Labels[gantryv1beta1.WorkloadUIDLabel] = uid
	return w
}

// Node binds the pod to a node.
func (w *PodWrapper) Node(name string) *PodWrapper {
	w.Spec.NodeName = name
	return w
}

// Unschedulable marks the pod as one the scheduler could not place, with the scheduler's message.
func (w *PodWrapper) Unschedulable(message string) *PodWrapper {
	w.Status.Conditions = append(w.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: message})
	return w
}

// PodSet labels the pod as one of the named pod set.
func (w *PodWrapper) PodSet(name string) *PodWrapper {
	w.Labels[gantryv1beta1.PodSetLabel] = name
	return w
}

// Created sets the pod's creation time.
func (w *PodWrapper) Created(t time.Time) *PodWrapper {
	w.CreationTimestamp = metav1.NewTime(t)
	return w
}

// Phase sets status.phase.
func (w *PodWrapper) Phase(p corev1.PodPhase) *PodWrapper {
	w.Status.Phase = p
	return w
}

// Request sets requests of the first container (name, quantity pairs).
func (w *PodWrapper) Request(kv ...string) *PodWrapper {
	w.Spec.Containers[0].Resources.Requests = hubtest.Resources(kv...)
	return w
}

// Limit sets limits of the first container (name, quantity pairs). The API server wants extended
// resources such as nvidia.com/gpu in limits as well, equal to the requests.
func (w *PodWrapper) Limit(kv ...string) *PodWrapper {
	w.Spec.Containers[0].Resources.Limits = hubtest.Resources(kv...)
	return w
}

// Container adds a container requesting the given name, quantity pairs.
func (w *PodWrapper) Container(name string, kv ...string) *PodWrapper {
	w.Spec.Containers = append(w.Spec.Containers, corev1.Container{Name: name, Image: "busybox",
		Resources: corev1.ResourceRequirements{Requests: hubtest.Resources(kv...)}})
	return w
}

// InitContainer adds an init container requesting the given name, quantity pairs.
func (w *PodWrapper) InitContainer(name string, kv ...string) *PodWrapper {
	w.Spec.InitContainers = append(w.Spec.InitContainers, corev1.Container{Name: name, Image: "busybox",
		Resources: corev1.ResourceRequirements{Requests: hubtest.Resources(kv...)}})
	return w
}

// Overhead sets the pod overhead (name, quantity pairs).
func (w *PodWrapper) Overhead(kv ...string) *PodWrapper {
	w.Spec.Overhead = hubtest.Resources(kv...)
	return w
}

// JobWrapper builds a batch/v1 Job.
type JobWrapper struct{ batchv1.Job }

// MakeJob starts a Job with one container, not labelled by Gantry.
func MakeJob(name, namespace string) *JobWrapper {
	return &JobWrapper{batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{}},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}},
		},
	}}
}

// Obj returns the Job.
func (w *JobWrapper) Obj() *batchv1.Job { return &w.Job }

// Created sets the Job's creation time.
func (w *JobWrapper) Created(t time.Time) *JobWrapper {
	w.CreationTimestamp = metav1.NewTime(t)
	return w
}

// Workload labels the Job (and its pod template) as Gantry's, for the copy with hub UID uid.
func (w *JobWrapper) Workload(uid string) *JobWrapper {
	w.Labels[gantryv1beta1.WorkloadUIDLabel] = uid
	if w.Spec.Template.Labels == nil {
		w.Spec.Template.Labels = map[string]string{}
	}
	w.Spec.Template.Labels[gantryv1beta1.WorkloadUIDLabel] = uid
	return w
}

// Finished adds a True condition of type t (Complete or Failed).
func (w *JobWrapper) Finished(t batchv1.JobConditionType) *JobWrapper {
	w.Status.Conditions = append(w.Status.Conditions, batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue})
	return w
}

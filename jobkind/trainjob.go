package jobkind

import (
	"encoding/json"
	"fmt"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func init() { register(TrainJob{}) }

// TrainJob is trainer.kubeflow.org/v1alpha1 TrainJob. Its pods are described by the training runtime
// it names (a TrainingRuntime of its namespace or a ClusterTrainingRuntime), which the Kubeflow
// trainer turns, with the TrainJob's own settings, into a JobSet: one pod set per replicated job of
// the runtime's template, all one gang on one worker. The hub reads the runtime before it reads the
// pod sets (Referrer); the worker's trainer reads the worker's runtime of that name, which must
// describe the same pods.
type TrainJob struct {
	// runtime is the spec of the runtime the TrainJob names, as the hub read it; nil before.
	runtime *trainer.TrainingRuntimeSpec
}

// Names the trainer gives the parts of a runtime's template (trainer.kubeflow.org/trainjob-ancestor-step
// on a replicated job; the trainer's container and, in an MPI runtime, its nodes' job).
const (
	trainerAncestorLabel = "trainer.kubeflow.org/trainjob-ancestor-step"
	trainerAncestor      = "trainer"
	datasetInitializer   = "dataset-initializer"
	modelInitializer     = "model-initializer"
	trainerNode          = "node"
)

// Name implements Kind.
func (TrainJob) Name() gantry.JobKind { return gantry.JobKindTrainJob }

// GroupVersionKind implements Kind.
func (TrainJob) GroupVersionKind() schema.GroupVersionKind {
	return trainer.GroupVersion.WithKind(trainer.TrainJobKind)
}

// Resource implements Kind.
func (TrainJob) Resource() schema.GroupVersionResource {
	return trainer.GroupVersion.WithResource("trainjobs")
}

// New implements Kind.
func (TrainJob) New() client.Object { return &trainer.TrainJob{} }

// NewList implements Kind.
func (TrainJob) NewList() client.ObjectList { return &trainer.TrainJobList{} }

// RemakesChildrenWhileDeleted implements SuspendsFirst: the trainer applies a TrainJob's JobSet on
// every reconcile, also while the TrainJob is being deleted.
func (TrainJob) RemakesChildrenWhileDeleted() {}

// Held implements Kind. The trainer's CRD lets spec.managedBy name only the trainer or MultiKueue, so
// a TrainJob is held by spec.suspend, as a RayJob is.
func (TrainJob) Held(obj client.Object) (bool, string) {
	if !ptr.Deref(obj.(*trainer.TrainJob).Spec.Suspend, false) {
		return false, fmt.Sprintf("TrainJob has label %s but spec.suspend is not true", gantry.QueueLabel)
	}
	return true, ""
}

// Reference implements Referrer: the training runtime of spec.runtimeRef.
func (TrainJob) Reference(obj client.Object) (client.Object, error) {
	tj := obj.(*trainer.TrainJob)
	ref := tj.Spec.RuntimeRef
	if group := ptr.Deref(ref.APIGroup, trainer.GroupVersion.Group); group != trainer.GroupVersion.Group {
		return nil, fmt.Errorf("spec.runtimeRef names a runtime of API group %q; only %s runtimes are dispatched", group, trainer.GroupVersion.Group)
	}
	switch kind := ptr.Deref(ref.Kind, trainer.ClusterTrainingRuntimeKind); kind {
	case trainer.ClusterTrainingRuntimeKind:
		return &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: ref.Name}}, nil
	case trainer.TrainingRuntimeKind:
		return &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: ref.Name}}, nil
	default:
		return nil, fmt.Errorf("spec.runtimeRef names a %q; only %s and %s are runtimes", kind, trainer.ClusterTrainingRuntimeKind, trainer.TrainingRuntimeKind)
	}
}

// WithReference implements Referrer.
func (TrainJob) WithReference(ref client.Object) Kind {
	switch rt := ref.(type) {
	case *trainer.ClusterTrainingRuntime:
		return TrainJob{runtime: &rt.Spec}
	case *trainer.TrainingRuntime:
		return TrainJob{runtime: &rt.Spec}
	}
	return TrainJob{}
}

// PodSets implements Kind: one per replicated job of the JobSet the trainer makes of the runtime.
func (k TrainJob) PodSets(obj client.Object) ([]PodSet, error) {
	if k.runtime == nil {
		return nil, fmt.Errorf("the pods of a TrainJob are described by its training runtime, which was not read")
	}
	spec, err := trainerJobSetSpec(obj.(*trainer.TrainJob), k.runtime)
	if err != nil {
		return nil, err
	}
	return JobSet{}.PodSets(&jobset.JobSet{Spec: *spec})
}

// trainerJobSetSpec is the part of the JobSet the trainer (v2.1) makes of a TrainJob and its runtime
// that says what pods run: the runtime's template with the TrainJob's pod template overrides merged
// in, its trainer's nodes counted and given their resources, one replica of each job the trainer
// runs once.
func trainerJobSetSpec(tj *trainer.TrainJob, rt *trainer.TrainingRuntimeSpec) (*jobset.JobSetSpec, error) {
	spec := rt.Template.Spec.DeepCopy()
	if len(spec.ReplicatedJobs) == 0 {
		return nil, fmt.Errorf("its training runtime's template has no replicated jobs")
	}
	mpi := rt.MLPolicy != nil && rt.MLPolicy.MPI != nil
	launcherIsNode := mpi && ptr.Deref(rt.MLPolicy.MPI.RunLauncherAsNode, false)
	for i := range spec.ReplicatedJobs {
		rj := &spec.ReplicatedJobs[i]
		if err := mergeOverrides(rj, tj.Spec.PodTemplateOverrides); err != nil {
			return nil, err
		}
		ancestor := rj.Template.Labels[trainerAncestorLabel]
		pods := ptr.Deref(rj.Template.Spec.Parallelism, 1)
		if ancestor == trainerAncestor && rt.MLPolicy != nil {
			pods = ptr.Deref(rt.MLPolicy.NumNodes, 1)
		}
		if n := trainerNumNodes(tj); n != nil {
			switch {
			case mpi && rj.Name == trainerNode && launcherIsNode:
				pods = max(*n-1, 1)
			case mpi && rj.Name == trainerNode, !mpi && ancestor == trainerAncestor:
				pods = *n
			}
		}
		rj.Template.Spec.Parallelism, rj.Template.Spec.Completions = ptr.To(pods), ptr.To(pods)
		switch ancestor {
		case trainerAncestor, datasetInitializer, modelInitializer:
			rj.Replicas = 1
		}
		if ancestor == trainerAncestor || launcherIsNode && rj.Name == trainerNode {
			setNodeResources(&rj.Template.Spec.Template.Spec, tj.Spec.Trainer)
		}
	}
	return spec, nil
}

func trainerNumNodes(tj *trainer.TrainJob) *int32 {
	if tj.Spec.Trainer == nil {
		return nil
	}
	return tj.Spec.Trainer.NumNodes
}

// setNodeResources gives the trainer's container the TrainJob's resourcesPerNode, in place of the
// runtime's.
func setNodeResources(pod *corev1.PodSpec, t *trainer.Trainer) {
	if t == nil || t.ResourcesPerNode == nil || (t.ResourcesPerNode.Limits == nil && t.ResourcesPerNode.Requests == nil) {
		return
	}
	for i := range pod.Containers {
		if pod.Containers[i].Name == trainerNode {
			pod.Containers[i].Resources = corev1.ResourceRequirements{
				Limits: t.ResourcesPerNode.Limits.DeepCopy(), Requests: t.ResourcesPerNode.Requests.DeepCopy()}
		}
	}
}

// mergeOverrides merges the overrides that target the replicated job into its pod template, in order,
// as strategic merge patches, as the trainer does.
func mergeOverrides(rj *jobset.ReplicatedJob, overrides []trainer.PodTemplateOverride) error {
	for _, o := range overrides {
		if !targets(o, rj.Name) {
			continue
		}
		patch := map[string]any{}
		if o.Metadata != nil {
			// Only what the override sets: a null in a merge patch would delete the template's own.
			meta := map[string]any{}
			if o.Metadata.Labels != nil {
				meta["labels"] = o.Metadata.Labels
			}
			if o.Metadata.Annotations != nil {
				meta["annotations"] = o.Metadata.Annotations
			}
			patch["metadata"] = meta
		}
		if o.Spec != nil {
			patch["spec"] = o.Spec
		}
		source, err := json.Marshal(rj.Template.Spec.Template)
		if err != nil {
			return err
		}
		p, err := json.Marshal(patch)
		if err != nil {
			return err
		}
		merged, err := strategicpatch.StrategicMergePatch(source, p, corev1.PodTemplateSpec{})
		if err != nil {
			return fmt.Errorf("spec.podTemplateOverrides for %s: %w", rj.Name, err)
		}
		var tpl corev1.PodTemplateSpec
		if err := json.Unmarshal(merged, &tpl); err != nil {
			return fmt.Errorf("spec.podTemplateOverrides for %s: %w", rj.Name, err)
		}
		rj.Template.Spec.Template = tpl
	}
	return nil
}

func targets(o trainer.PodTemplateOverride, job string) bool {
	for _, t := range o.TargetJobs {
		if t.Name == job {
			return true
		}
	}
	return false
}

// Remote implements Kind. A TrainJob has no pod templates of its own: Gantry's labels and the pins of
// each pod set reach its pods through one more pod template override per pod set, merged last.
func (TrainJob) Remote(hub client.Object, podSets []gantry.PodSet, labels map[string]string, edit func(string, *corev1.PodTemplateSpec)) client.Object {
	h := hub.(*trainer.TrainJob)
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: h.Name, Namespace: h.Namespace, Labels: merge(h.Labels, labels), Annotations: h.Annotations},
		Spec:       *h.Spec.DeepCopy(),
	}
	tj.Spec.Suspend = ptr.To(false)
	for _, ps := range podSets {
		tpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: ps.NodeSelector}}
		labelTemplate(&tpl, ps.Name, labels)
		edit(ps.Name, &tpl)
		tj.Spec.PodTemplateOverrides = append(tj.Spec.PodTemplateOverrides, trainer.PodTemplateOverride{
			TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: ps.Name}},
			Metadata:   &metav1.ObjectMeta{Labels: tpl.Labels},
			Spec:       &trainer.PodTemplateSpecOverride{NodeSelector: tpl.Spec.NodeSelector},
		})
	}
	return tj
}

// State implements Kind: it started once any of its jobs counts a pod.
func (TrainJob) State(obj client.Object) State {
	tj := obj.(*trainer.TrainJob)
	st := State{Suspended: ptr.Deref(tj.Spec.Suspend, false)}
	for _, j := range tj.Status.JobsStatus {
		st.Started = st.Started || ptr.Deref(j.Active, 0)+ptr.Deref(j.Ready, 0)+ptr.Deref(j.Succeeded, 0)+ptr.Deref(j.Failed, 0) > 0
	}
	switch {
	case apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete):
		st.Started, st.Finished, st.Succeeded = true, true, true
	case apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed):
		st.Started, st.Finished = true, true
	}
	return st
}

// Progress implements Kind: each job's finished pods and the true conditions.
func (TrainJob) Progress(obj client.Object) string {
	st := obj.(*trainer.TrainJob).Status
	var b strings.Builder
	for _, j := range st.JobsStatus {
		fmt.Fprintf(&b, "%s: %d succeeded, %d failed; ", j.Name, ptr.Deref(j.Succeeded, 0), ptr.Deref(j.Failed, 0))
	}
	return b.String() + trueConditions(st.Conditions)
}

// CopyStatus implements Kind.
func (TrainJob) CopyStatus(to, from client.Object) bool {
	return setStatus(&to.(*trainer.TrainJob).Status, *from.(*trainer.TrainJob).Status.DeepCopy())
}

// ClearStatus implements Kind.
func (TrainJob) ClearStatus(obj client.Object) bool {
	return setStatus(&obj.(*trainer.TrainJob).Status, trainer.TrainJobStatus{})
}

// Fail implements Kind: the Failed condition, as the trainer ends a TrainJob.
func (k TrainJob) Fail(obj client.Object, reason, message string, now metav1.Time) bool {
	if k.State(obj).Finished {
		return false
	}
	st := &obj.(*trainer.TrainJob).Status
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue,
		Reason: reason, Message: message, LastTransitionTime: now})
	return true
}

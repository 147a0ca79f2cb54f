package jobkind

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// trainerJob is a replicated job of a runtime's template: the trainer's step, its pods' container named
// container, requesting gpus.
func trainerJob(name, ancestor, container, gpus string) jobset.ReplicatedJob {
	rj := jobset.ReplicatedJob{Name: name, Replicas: 1, Template: batchv1.JobTemplateSpec{
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "vision"}},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "train"}, Containers: []corev1.Container{{
				Name: container, Image: "trainer:v1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{gantry.GPUResource: resource.MustParse(gpus)}}}}}}}}}
	if ancestor != "" {
		rj.Template.Labels = map[string]string{trainerAncestorLabel: ancestor}
	}
	return rj
}

func torchRuntime() *trainer.TrainingRuntimeSpec {
	return &trainer.TrainingRuntimeSpec{
		MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](2), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
		Template: trainer.JobSetTemplateSpec{Spec: jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{
			trainerJob("dataset-initializer", datasetInitializer, "dataset-initializer", "0"),
			trainerJob("node", trainerAncestor, "node", "4"),
		}}}}
}

func mpiRuntime(launcherIsNode bool) *trainer.TrainingRuntimeSpec {
	return &trainer.TrainingRuntimeSpec{
		MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{
			MPI: &trainer.MPIMLPolicySource{RunLauncherAsNode: ptr.To(launcherIsNode)}}},
		Template: trainer.JobSetTemplateSpec{Spec: jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{
			trainerJob("launcher", trainerAncestor, "node", "1"),
			trainerJob("node", "", "node", "1"),
		}}}}
}

func fineTune() *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "fine-tune", Namespace: "team-a", Labels: map[string]string{gantry.QueueLabel: "gpu"}},
		Spec:       trainer.TrainJobSpec{Suspend: ptr.To(true), RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}},
	}
}

// The pods of a TrainJob are those of the JobSet the trainer makes of it and its runtime: the
// runtime's jobs, its trainer's nodes counted by the TrainJob (or the runtime), the TrainJob's
// resources per node, its overrides merged into the templates.
func TestTrainJobPodSets(t *testing.T) {
	type set struct {
		Name  string
		Count int32
		GPUs  int64
		Pool  string
	}
	cases := map[string]struct {
		runtime *trainer.TrainingRuntimeSpec
		edit    func(*trainer.TrainJob)
		want    []set
	}{
		"the runtime's count": {runtime: torchRuntime(), edit: func(*trainer.TrainJob) {},
			want: []set{{"dataset-initializer", 1, 0, "train"}, {"node", 2, 4, "train"}}},
		"the TrainJob's nodes and resources": {runtime: torchRuntime(), edit: func(tj *trainer.TrainJob) {
			tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](8), ResourcesPerNode: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{gantry.GPUResource: resource.MustParse("8")}}}
		}, want: []set{{"dataset-initializer", 1, 0, "train"}, {"node", 8, 8, "train"}}},
		"overrides merged in order": {runtime: torchRuntime(), edit: func(tj *trainer.TrainJob) {
			tj.Spec.PodTemplateOverrides = []trainer.PodTemplateOverride{
				{TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}}, Spec: &trainer.PodTemplateSpecOverride{NodeSelector: map[string]string{"pool": "h100"}}},
				{TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}}, Metadata: &metav1.ObjectMeta{Annotations: map[string]string{"a": "b"}}},
			}
		}, want: []set{{"dataset-initializer", 1, 0, "train"}, {"node", 2, 4, "h100"}}},
		"MPI: nodes besides the launcher": {runtime: mpiRuntime(true), edit: func(tj *trainer.TrainJob) {
			tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](4), ResourcesPerNode: &corev1.ResourceRequirements{
				Limits: corev1.ResourceList{gantry.GPUResource: resource.MustParse("2")}}}
		}, want: []set{{"launcher", 1, 2, "train"}, {"node", 3, 2, "train"}}},
		"MPI: a launcher apart": {runtime: mpiRuntime(false), edit: func(tj *trainer.TrainJob) {
			tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](4)}
		}, want: []set{{"launcher", 1, 1, "train"}, {"node", 4, 1, "train"}}},
	}
	for name, tc := range cases {
		tj := fineTune()
		tc.edit(tj)
		sets, err := TrainJob{runtime: tc.runtime}.PodSets(tj)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []set
		for _, ps := range sets {
			spec := requestsDefaulted(&ps.Template.Spec)
			gpus := spec.Containers[0].Resources.Requests[gantry.GPUResource]
			got = append(got, set{ps.Name, ps.Count, gpus.Value(), ps.Template.Spec.NodeSelector["pool"]})
			if ps.Template.Labels["team"] != "vision" {
				t.Errorf("%s: %s lost its template's labels: %v", name, ps.Name, ps.Template.Labels)
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: pod sets (-want +got):\n%s", name, diff)
		}
	}
	if _, err := (TrainJob{}).PodSets(fineTune()); err == nil {
		t.Error("pod sets without the runtime")
	}
	if _, err := (TrainJob{runtime: &trainer.TrainingRuntimeSpec{}}).PodSets(fineTune()); err == nil {
		t.Error("a runtime without jobs gave pod sets")
	}
}

// The runtime a TrainJob names: a ClusterTrainingRuntime by default, or a TrainingRuntime of its
// namespace; any other reference is an error.
func TestTrainJobReference(t *testing.T) {
	tj := fineTune()
	ref, err := TrainJob{}.Reference(tj)
	if _, ok := ref.(*trainer.ClusterTrainingRuntime); !ok || err != nil || ref.GetName() != "torch-distributed" {
		t.Errorf("default: %T %v %v", ref, ref, err)
	}
	tj.Spec.RuntimeRef.Kind = ptr.To(trainer.TrainingRuntimeKind)
	ref, err = TrainJob{}.Reference(tj)
	if _, ok := ref.(*trainer.TrainingRuntime); !ok || err != nil || ref.GetNamespace() != "team-a" {
		t.Errorf("namespaced: %T %v %v", ref, ref, err)
	}
	tj.Spec.RuntimeRef.Kind = ptr.To("ConfigMap")
	if _, err := (TrainJob{}).Reference(tj); err == nil {
		t.Error("a ConfigMap was a runtime")
	}
	tj.Spec.RuntimeRef.Kind, tj.Spec.RuntimeRef.APIGroup = nil, ptr.To("example.com")
	if _, err := (TrainJob{}).Reference(tj); err == nil {
		t.Error("a runtime of another group was accepted")
	}
	wl, err := NewWorkload(TrainJob{}.WithReference(&trainer.TrainingRuntime{Spec: *torchRuntime()}), fineTune(), 0)
	if err != nil || wl.Name != "trainjob-fine-tune" || wl.Spec.JobKind != gantry.JobKindTrainJob || len(wl.Spec.PodSets) != 2 {
		t.Errorf("workload %+v: %v", wl, err)
	}
}

// On the worker the trainer runs it, not suspended; each pod set gets Gantry's labels and pins through
// one more override, after the TrainJob's own.
func TestTrainJobRemote(t *testing.T) {
	hub := fineTune()
	own := trainer.PodTemplateOverride{TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
		Spec: &trainer.PodTemplateSpecOverride{NodeSelector: map[string]string{"pool": "h100"}}}
	hub.Spec.PodTemplateOverrides = []trainer.PodTemplateOverride{own}
	labels := map[string]string{gantry.WorkloadUIDLabel: "wl-uid"}
	podSets := []gantry.PodSet{{Name: "dataset-initializer"}, {Name: "node", NodeSelector: map[string]string{"pool": "h100"}}}
	tj := TrainJob{}.Remote(hub, podSets, labels, func(podSet string, tpl *corev1.PodTemplateSpec) {
		if podSet == "node" {
			tpl.Spec.NodeSelector = map[string]string{"pool": "h100", gantry.GPUProductLabel: "H100"}
		}
	}).(*trainer.TrainJob)
	if ptr.Deref(tj.Spec.Suspend, true) || tj.Labels[gantry.WorkloadUIDLabel] != "wl-uid" || tj.Labels[gantry.QueueLabel] != "gpu" {
		t.Errorf("suspend %v labels %v", tj.Spec.Suspend, tj.Labels)
	}
	want := []trainer.PodTemplateOverride{own,
		{TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "dataset-initializer"}},
			Metadata: &metav1.ObjectMeta{Labels: map[string]string{gantry.WorkloadUIDLabel: "wl-uid", gantry.PodSetLabel: "dataset-initializer"}},
			Spec:     &trainer.PodTemplateSpecOverride{}},
		{TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
			Metadata: &metav1.ObjectMeta{Labels: map[string]string{gantry.WorkloadUIDLabel: "wl-uid", gantry.PodSetLabel: "node"}},
			Spec:     &trainer.PodTemplateSpecOverride{NodeSelector: map[string]string{"pool": "h100", gantry.GPUProductLabel: "H100"}}},
	}
	if diff := cmp.Diff(want, tj.Spec.PodTemplateOverrides); diff != "" {
		t.Errorf("overrides (-want +got):\n%s", diff)
	}
	if !ptr.Deref(hub.Spec.Suspend, false) || len(hub.Spec.PodTemplateOverrides) != 1 {
		t.Error("the hub's TrainJob was modified")
	}
	// What the worker's trainer makes of it: the pods carry the labels and the pin.
	sets, err := TrainJob{runtime: torchRuntime()}.PodSets(tj)
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range sets {
		if ps.Template.Labels[gantry.PodSetLabel] != ps.Name || ps.Template.Labels["team"] != "vision" {
			t.Errorf("%s: labels %v", ps.Name, ps.Template.Labels)
		}
	}
	if sel := sets[1].Template.Spec.NodeSelector; sel[gantry.GPUProductLabel] != "H100" || sel["pool"] != "h100" {
		t.Errorf("node's selector %v", sel)
	}
}

func TestTrainJobState(t *testing.T) {
	now := metav1.Now()
	cond := func(typ string) []metav1.Condition {
		return []metav1.Condition{{Type: typ, Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: now}}
	}
	cases := map[string]struct {
		status trainer.TrainJobStatus
		want   State
	}{
		"new":       {want: State{}},
		"running":   {status: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{{Name: "node", Active: ptr.To[int32](2)}}}, want: State{Started: true}},
		"succeeded": {status: trainer.TrainJobStatus{Conditions: cond(trainer.TrainJobComplete)}, want: State{Started: true, Finished: true, Succeeded: true}},
		"failed":    {status: trainer.TrainJobStatus{Conditions: cond(trainer.TrainJobFailed)}, want: State{Started: true, Finished: true}},
	}
	for name, tc := range cases {
		if got := (TrainJob{}).State(&trainer.TrainJob{Status: tc.status}); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
	tj := fineTune()
	if held, _ := (TrainJob{}).Held(tj); !held || !(TrainJob{}).State(tj).Suspended {
		t.Error("a suspended TrainJob is not held")
	}
	if held, why := (TrainJob{}).Held(&trainer.TrainJob{}); held || why == "" {
		t.Error("a TrainJob without spec.suspend is held")
	}
	if !(TrainJob{}).Fail(tj, gantry.ReasonRemoteJobLost, "gone", now) || !(TrainJob{}).State(tj).Finished || (TrainJob{}).Fail(tj, "x", "y", now) {
		t.Errorf("fail: %+v", tj.Status)
	}
	if !(TrainJob{}).ClearStatus(tj) || (TrainJob{}).ClearStatus(tj) {
		t.Error("clear")
	}
}

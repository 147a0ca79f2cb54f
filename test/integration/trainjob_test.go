package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// torchRuntime is a ClusterTrainingRuntime of one node by default, each node asking for 2 GPUs.
func torchRuntime(name string) *trainer.ClusterTrainingRuntime {
	node := corev1.Container{Name: "node", Image: "registry.example/torch:2",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{gantry.GPUResource: resource.MustParse("2")}}}
	return &trainer.ClusterTrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
			Template: trainer.JobSetTemplateSpec{Spec: jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{{
				Name: "node", Replicas: 1,
				Template: batchv1.JobTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
					Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{node}}}}},
			}}}},
		},
	}
}

// A TrainJob submitted to the hub is kept there, becomes one Workload whose pods are read from its
// runtime on the hub (the TrainJob's three nodes of 2 GPUs), runs on the one worker that serves
// TrainJobs, with Gantry's labels on its pods through an override, and its status comes back.
func TestATrainJobRunsOnOneWorkerAndItsStatusComesBack(t *testing.T) {
	ctx := context.Background()
	startHub(t)
	newGlobalQueue(t, "trainjobs", map[string]int64{"worker-1": 16, "worker-2": 16})
	ns := newNamespace(t, "trainjobs")
	dumpOnFailure(t, ns)
	for _, c := range []client.Client{hubEnv.client, workers[jobSetWorker].client} {
		rt := torchRuntime("torch-distributed")
		if err := c.Create(ctx, rt); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(ctx, rt) })
	}
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "fine-tune", Namespace: ns, Labels: map[string]string{gantry.QueueLabel: "q"}},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](3)}},
	}
	if err := hubEnv.client.Create(ctx, tj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, tj) })
	if !ptr.Deref(tj.Spec.Suspend, false) {
		t.Fatalf("the hub's policy did not hold the TrainJob: suspend %v", tj.Spec.Suspend)
	}
	unsuspended := tj.DeepCopy()
	unsuspended.Spec.Suspend = ptr.To(false)
	if err := hubEnv.client.Update(ctx, unsuspended); err == nil || !strings.Contains(err.Error(), "a queued TrainJob stays suspended on the hub") {
		t.Fatalf("unsuspending the hub's TrainJob: %v, want it refused", err)
	}
	var wl gantry.Workload
	eventually(t, "the TrainJob's Workload", func() error {
		return hubEnv.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "trainjob-fine-tune"}, &wl)
	})
	if len(wl.Spec.PodSets) != 1 || wl.Spec.PodSets[0].Name != "node" || wl.Spec.PodSets[0].Count != 3 ||
		!wl.Spec.PodSets[0].Requests[gantry.GPUResource].Equal(resource.MustParse("2")) {
		t.Fatalf("pod sets %+v", wl.Spec.PodSets)
	}

	c := workers[jobSetWorker].client
	var remote trainer.TrainJob
	eventually(t, "the TrainJob on "+jobSetWorker+" only", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(tj), &remote); err != nil {
			return err
		}
		if where, err := holders(tj); err != nil || !slices.Equal(where, []string{jobSetWorker}) {
			return fmt.Errorf("on %v (%v)", where, err)
		}
		return nil
	})
	overrides := remote.Spec.PodTemplateOverrides
	if ptr.Deref(remote.Spec.Suspend, true) || len(overrides) != 1 || overrides[0].TargetJobs[0].Name != "node" ||
		overrides[0].Metadata.Labels[gantry.WorkloadUIDLabel] != string(wl.UID) || overrides[0].Metadata.Labels[gantry.PodSetLabel] != "node" {
		t.Fatalf("not the trainer's to run with Gantry's labels on its pods: suspend %v overrides %+v", remote.Spec.Suspend, overrides)
	}

	eventually(t, "the trainer's end of the TrainJob on "+jobSetWorker, func() error {
		var got trainer.TrainJob
		if err := c.Get(ctx, client.ObjectKeyFromObject(tj), &got); err != nil {
			return err
		}
		got.Status = trainer.TrainJobStatus{
			Conditions: []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "JobsCompleted",
				Message: "jobs completed", LastTransitionTime: metav1.Now()}},
			JobsStatus: []trainer.JobStatus{{Name: "node", Succeeded: ptr.To[int32](3), Active: ptr.To[int32](0), Ready: ptr.To[int32](0),
				Failed: ptr.To[int32](0), Suspended: ptr.To[int32](0)}},
		}
		return c.Status().Update(ctx, &got)
	})
	eventually(t, "the hub TrainJob Complete", func() error {
		var hub trainer.TrainJob
		if err := hubEnv.client.Get(ctx, client.ObjectKeyFromObject(tj), &hub); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(hub.Status.Conditions, trainer.TrainJobComplete) {
			return fmt.Errorf("status %+v", hub.Status)
		}
		return nil
	})
	specChangeRefused(t, tj, func(j *trainer.TrainJob) { j.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](8)} })
	workloadFinishes(t, ns, wl.Name, gantry.ReasonJobSucceeded)
}

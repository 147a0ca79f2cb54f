package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ray "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func gpuRayJob(ns, name string) *ray.RayJob {
	pod := func(gpus int64) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray", Image: "registry.example/ray:2",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{gantry.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)},
				Limits:   corev1.ResourceList{gantry.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}
	}
	return &ray.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{gantry.QueueLabel: "q"}},
		Spec: ray.RayJobSpec{Entrypoint: "python tune.py", ShutdownAfterJobFinishes: true,
			RayClusterSpec: &ray.RayClusterSpec{
				HeadGroupSpec:    ray.HeadGroupSpec{Template: pod(0), RayStartParams: map[string]string{}},
				WorkerGroupSpecs: []ray.WorkerGroupSpec{{GroupName: "gpu", Replicas: ptr.To[int32](2), MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](2), Template: pod(4), RayStartParams: map[string]string{}}},
			}}}
}

// A RayJob submitted to the hub is kept there, becomes one Workload (head, workers, submitter), runs
// on the one worker that serves RayJobs, and its status, as KubeRay writes it there, comes back.
func TestARayJobRunsOnOneWorkerAndItsStatusComesBack(t *testing.T) {
	ctx := context.Background()
	startHub(t)
	newGlobalQueue(t, "rayjobs", map[string]int64{"worker-1": 16, "worker-2": 16})
	ns := newNamespace(t, "rayjobs")
	dumpOnFailure(t, ns)
	rj := gpuRayJob(ns, "tune")
	if err := hubEnv.client.Create(ctx, rj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, rj) })
	if rj.Spec.ManagedBy != nil || !rj.Spec.Suspend {
		t.Fatalf("the hub's policy did not hold the RayJob: managedBy %v suspend %v", rj.Spec.ManagedBy, rj.Spec.Suspend)
	}
	unsuspended := rj.DeepCopy()
	unsuspended.Spec.Suspend = false
	if err := hubEnv.client.Update(ctx, unsuspended); err == nil || !strings.Contains(err.Error(), "a queued RayJob stays suspended on the hub") {
		t.Fatalf("unsuspending the hub's RayJob: %v, want it refused", err)
	}
	// A waiting RayJob has no status: what Gantry fixes once a job ran is not judged on it, and its own
	// labels stay the user's.
	labelled := rj.DeepCopy()
	labelled.Labels["team"] = "vision"
	if err := hubEnv.client.Update(ctx, labelled); err != nil {
		t.Fatalf("labelling the hub's RayJob while it waits: %v", err)
	}
	var wl gantry.Workload
	eventually(t, "the RayJob's Workload", func() error {
		return hubEnv.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "rayjob-tune"}, &wl)
	})
	var sets []string
	for _, ps := range wl.Spec.PodSets {
		sets = append(sets, fmt.Sprintf("%s:%d", ps.Name, ps.Count))
	}
	if !slices.Equal(sets, []string{"head:1", "gpu:2", "submitter:1"}) {
		t.Fatalf("pod sets %v", sets)
	}
	c := workers[jobSetWorker].client
	eventually(t, "the RayJob on "+jobSetWorker+" only", func() error {
		var got ray.RayJob
		if err := c.Get(ctx, client.ObjectKeyFromObject(rj), &got); err != nil {
			return err
		}
		if got.Spec.Suspend || got.Spec.SubmitterPodTemplate == nil {
			return fmt.Errorf("not KubeRay's to run: %+v", got.Spec)
		}
		if where, err := holders(rj); err != nil || !slices.Equal(where, []string{jobSetWorker}) {
			return fmt.Errorf("on %v (%v)", where, err)
		}
		return nil
	})
	eventually(t, "KubeRay's end of the RayJob on "+jobSetWorker, func() error {
		var got ray.RayJob
		if err := c.Get(ctx, client.ObjectKeyFromObject(rj), &got); err != nil {
			return err
		}
		now := metav1.Now()
		got.Status = ray.RayJobStatus{JobId: "tune-1", JobStatus: ray.JobStatusSucceeded, JobDeploymentStatus: ray.JobDeploymentStatusComplete,
			StartTime: &now, EndTime: &now}
		return c.Status().Update(ctx, &got)
	})
	eventually(t, "the hub RayJob Complete", func() error {
		var hub ray.RayJob
		if err := hubEnv.client.Get(ctx, client.ObjectKeyFromObject(rj), &hub); err != nil {
			return err
		}
		if hub.Status.JobDeploymentStatus != ray.JobDeploymentStatusComplete || hub.Status.JobStatus != ray.JobStatusSucceeded {
			return fmt.Errorf("status %+v", hub.Status)
		}
		return nil
	})
	specChangeRefused(t, rj, func(j *ray.RayJob) { j.Spec.Entrypoint = "python tune.py --trials 100" })
	workloadFinishes(t, ns, wl.Name, gantry.ReasonJobSucceeded)
}

package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// jobSetWorker is the worker that serves JobSets in this suite; the other has no JobSet CRD.
const jobSetWorker = "worker-1"

func gpuJobSet(ns, name string) *jobset.JobSet {
	rj := func(name string, replicas, pods int32, gpus int64) jobset.ReplicatedJob {
		return jobset.ReplicatedJob{Name: name, Replicas: replicas, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Parallelism: ptr.To(pods), Completions: ptr.To(pods),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "registry.example/train:1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{gantry.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)},
					Limits:   corev1.ResourceList{gantry.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}},
		}}}
	}
	return &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{gantry.QueueLabel: "q"}},
		// 1 + 2x2 pods, 1 + 4x3 = 13 GPUs: one gang on one worker (16 GPUs on two nodes).
		Spec: jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{rj("driver", 1, 1, 1), rj("workers", 2, 2, 3)}},
	}
}

// A JobSet submitted to the hub is kept there (managedBy, suspended), becomes one Workload of a pod set
// per replicated job, runs on the one worker that serves JobSets, its status comes back to the hub
// JobSet, and deleting it removes it from the worker.
func TestAJobSetRunsOnOneWorkerAndItsStatusComesBack(t *testing.T) {
	ctx := context.Background()
	startHub(t)
	newGlobalQueue(t, "jobsets", map[string]int64{"worker-1": 16, "worker-2": 16})
	ns := newNamespace(t, "jobsets")
	dumpOnFailure(t, ns)
	js := gpuJobSet(ns, "train")
	if err := hubEnv.client.Create(ctx, js); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, js) })
	if ptr.Deref(js.Spec.ManagedBy, "") != gantry.JobManagedBy || !ptr.Deref(js.Spec.Suspend, false) {
		t.Fatalf("the hub's policy did not keep the JobSet to Gantry: managedBy %v suspend %v", js.Spec.ManagedBy, js.Spec.Suspend)
	}
	var wl gantry.Workload
	eventually(t, "the JobSet's Workload", func() error {
		return hubEnv.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "jobset-train"}, &wl)
	})
	if wl.Spec.JobKind != gantry.JobKindJobSet || len(wl.Spec.PodSets) != 2 || wl.Spec.PodSets[1].Count != 4 {
		t.Fatalf("workload spec %+v", wl.Spec)
	}
	eventually(t, "the JobSet on "+jobSetWorker+" only", func() error {
		where, err := holders(js)
		if err != nil || !slices.Equal(where, []string{jobSetWorker}) {
			return fmt.Errorf("on %v, %v", where, err)
		}
		return nil
	})
	var remote jobset.JobSet
	if err := workers[jobSetWorker].client.Get(ctx, client.ObjectKeyFromObject(js), &remote); err != nil {
		t.Fatal(err)
	}
	if remote.Spec.ManagedBy != nil || ptr.Deref(remote.Spec.Suspend, true) || remote.Labels[gantry.WorkloadUIDLabel] == "" {
		t.Fatalf("the worker's JobSet is not the JobSet controller's to run: %+v %v", remote.Spec, remote.Labels)
	}
	// The other worker's agent refused it at once, for want of the JobSet API.
	eventually(t, "worker-2's answer", func() error {
		if err := hubEnv.client.Get(ctx, client.ObjectKeyFromObject(&wl), &wl); err != nil {
			return err
		}
		var cp gantry.Workload
		err := workers["worker-2"].client.Get(ctx, client.ObjectKeyFromObject(&wl), &cp)
		if apierrors.IsNotFound(err) && wl.Status.Winner() == jobSetWorker {
			return nil // never nominated there, or withdrawn after worker-1 won
		}
		if c := apimeta.FindStatusCondition(cp.Status.Conditions, gantry.WorkloadAdmitted); c != nil && c.Reason == gantry.ReasonKindNotServed {
			return nil
		}
		return fmt.Errorf("worker-2's copy %v (%v)", cp.Status.Conditions, err)
	})

	completeRemoteJobSet(t, jobSetWorker, js)
	eventually(t, "the hub JobSet Completed", func() error {
		var hub jobset.JobSet
		if err := hubEnv.client.Get(ctx, client.ObjectKeyFromObject(js), &hub); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(hub.Status.Conditions, string(jobset.JobSetCompleted)) || hub.Status.TerminalState != string(jobset.JobSetCompleted) {
			return fmt.Errorf("status %+v", hub.Status)
		}
		return nil
	})
	specChangeRefused(t, js, func(j *jobset.JobSet) { j.Spec.ReplicatedJobs[0].Replicas = 5 })
	workloadFinishes(t, ns, wl.Name, gantry.ReasonJobSucceeded)

	if err := hubEnv.client.Delete(ctx, js, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	workloadGone(t, ns, wl.Name)
	eventually(t, "the worker's JobSet removed", func() error {
		var got jobset.JobSet
		err := workers[jobSetWorker].client.Get(ctx, client.ObjectKeyFromObject(js), &got)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case got.DeletionTimestamp != nil && len(got.Finalizers) > 0:
			// No garbage collector runs here: the test says its Jobs are gone.
			got.Finalizers = nil
			_ = workers[jobSetWorker].client.Update(ctx, &got)
		}
		return fmt.Errorf("still there (deleting: %v)", got.DeletionTimestamp != nil)
	})
}

// completeRemoteJobSet plays the worker's JobSet controller: its Jobs ran and the JobSet completed.
func completeRemoteJobSet(t *testing.T, cluster string, js *jobset.JobSet) {
	t.Helper()
	c := workers[cluster].client
	eventually(t, "completing JobSet "+js.Name+" on "+cluster, func() error {
		var got jobset.JobSet
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(js), &got); err != nil {
			return err
		}
		got.Status.ReplicatedJobsStatus = []jobset.ReplicatedJobStatus{{Name: "driver", Succeeded: 1}, {Name: "workers", Succeeded: 2}}
		got.Status.TerminalState = string(jobset.JobSetCompleted)
		apimeta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: string(jobset.JobSetCompleted),
			Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "jobset completed successfully"})
		return c.Status().Update(context.Background(), &got)
	})
}

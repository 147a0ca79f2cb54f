package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

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

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/jobkind"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// testbedRuntime is the ClusterTrainingRuntime hack/dev-up.sh installs on the hub and on each worker
// (hack/testbed/trainer-runtime.yaml): one replicated job "node", whose pods the TrainJob's numNodes counts.
const testbedRuntime = "torch-distributed"

// A TrainJob submitted to the hub runs on one worker under the real Kubeflow trainer, to completion: the
// hub counts its pods from the runtime (one pod set "node" of two pods with a GPU each), the trainer on
// the winner makes it a JobSet, which the JobSet controller runs on kwok nodes, and the trainer's
// Complete condition comes back to the hub's TrainJob; its Workload finishes Succeeded. Deleting the
// hub's TrainJob removes the TrainJob, its JobSet, Jobs and pods from the worker. Over the whole history
// (the workers' etcd), the TrainJob and its JobSet, their Jobs and their pods existed on the winner only.
func TestATrainJobRunsOnOneWorkerUnderTheTrainer(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "trainjob-hub")
	dumpOnFailure(t, ns)
	hub := trainerClient(t, tb.Hub)
	history := watchObjects(t, ns, "trainer.kubeflow.org", "jobset.x-k8s.io")
	tj := makeTrainJob(ns, "finetune", 2)
	submitted := time.Now()
	if err := hub.Create(ctx, tj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), tj) })
	if !ptr.Deref(tj.Spec.Suspend, false) {
		t.Fatalf("the hub's policy did not hold the TrainJob: suspend %v", tj.Spec.Suspend)
	}

	wl := trainJobFinishes(t, hub, tj)
	winner := wl.Status.Winner()
	t.Logf("the hub's TrainJob Complete and its Workload finished on %s %s after the submission", winner, since(submitted))
	if got := wl.Spec.PodSets; len(got) != 1 || got[0].Name != "node" || got[0].Count != 2 {
		t.Errorf("the Workload's pod sets %+v, want one pod set node of 2 pods", got)
	}
	worker := trainerClient(t, tb.Worker(winner))
	trainerRanIt(t, worker, tj)
	gangJoined(t, ns)

	deleted := time.Now()
	if err := hub.Delete(ctx, tj); err != nil {
		t.Fatal(err)
	}
	trainerObjectsGone(t, worker, tj)
	t.Logf("the TrainJob, its JobSet, Jobs and pods gone from %s %s after the hub's TrainJob was deleted", winner, since(deleted))
	eventually(t, "the hub's TrainJob and Workload gone", time.Minute, poll, func() error {
		if err := tb.Hub.Client.Get(ctx, client.ObjectKeyFromObject(wl), &gantry.Workload{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Workload is still there: %v", err)
		}
		if err := hub.Get(ctx, client.ObjectKeyFromObject(tj), &trainer.TrainJob{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the TrainJob is still there: %v", err)
		}
		return nil
	})

	trainJobOnWinnerOnly(t, history, ns, winner, tj.Name)
}

// A TrainJob deleted on the hub while its pods run goes from its worker with its JobSet, Jobs and pods,
// and no pod of it starts again there while it goes: the trainer makes a TrainJob's JobSet anew
// whenever it finds none, also while the TrainJob is being deleted, so pods deleted first would be
// replaced by new ones unless the TrainJob is suspended first. Over the whole history (the workers'
// etcd) the TrainJob was created once, everything of it on the winner only, and its two pods were the
// only ones.
func TestATrainJobDeletedWhileItRunsDoesNotStartAgain(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "trainjob-running")
	dumpOnFailure(t, ns)
	hub := trainerClient(t, tb.Hub)
	history := watchObjects(t, ns, "trainer.kubeflow.org", "jobset.x-k8s.io")
	tj := makeTrainJob(ns, "long", 2)
	tj.Spec.PodTemplateOverrides = []trainer.PodTemplateOverride{{
		TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
		Metadata: &metav1.ObjectMeta{Annotations: map[string]string{
			"pod-complete.stage.kwok.x-k8s.io/delay": "10m", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "10m"}},
	}}
	if err := hub.Create(ctx, tj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), tj) })

	winner := trainJobRunning(t, tj)
	worker := trainerClient(t, tb.Worker(winner))
	deleted := time.Now()
	if err := hub.Delete(ctx, tj); err != nil {
		t.Fatal(err)
	}
	trainerObjectsGone(t, worker, tj)
	t.Logf("the running TrainJob, its JobSet, Jobs and pods gone from %s %s after the hub's TrainJob was deleted", winner, since(deleted))
	trainJobRanOnceOn(t, history, ns, winner, tj.Name)
}

// trainJobRanOnceOn checks the whole history of the namespace on the workers, for a TrainJob taken away
// while it ran: the TrainJob was created once, on the winner; what the trainer made of it (its JobSet,
// Jobs, and those it made anew while the TrainJob went, suspended) only there; and its two pods were the
// only pods of the namespace, on the winner, none started in their place.
func trainJobRanOnceOn(t *testing.T, history *groupObjects, ns, winner, name string) {
	t.Helper()
	created := history.created(t)
	if clusters := created["trainjobs/"+name]; !slices.Equal(clusters, []string{winner}) {
		t.Errorf("TrainJob %s created on %v, want once on %s", name, clusters, winner)
	}
	for obj, clusters := range created {
		if slices.ContainsFunc(clusters, func(c string) bool { return c != winner }) {
			t.Errorf("%s created on %v, want on %s only", obj, clusters, winner)
		}
	}
	for job, clusters := range auditJobs(t, ns).created {
		if slices.ContainsFunc(clusters, func(c string) bool { return c != winner }) {
			t.Errorf("Job %s created on %v, want on %s only", job, clusters, winner)
		}
	}
	twoPodsRanOn(t, ns, winner)
}

// twoPodsRanOn checks the ledger's promises over the namespace and that its only pods were two of pod
// set "node", on the winner.
func twoPodsRanOn(t *testing.T, ns, winner string) {
	t.Helper()
	checkOneRun(t, ns)
	pods := map[string]bool{}
	for _, p := range audit.Pods(ns) {
		if p.Cluster != winner || p.PodSet != "node" {
			t.Errorf("pod %s of pod set %q on %s", p.Name, p.PodSet, p.Cluster)
		}
		pods[p.Name] = true
	}
	if len(pods) != 2 {
		t.Errorf("the ledger recorded pods %v, want 2", slices.Sorted(maps.Keys(pods)))
	}
}

// trainJobRunning waits until the TrainJob's Workload has a winner and both of its pods run there; it
// returns the winner.
func trainJobRunning(t *testing.T, tj *trainer.TrainJob) string {
	t.Helper()
	ctx := context.Background()
	key := types.NamespacedName{Namespace: tj.Namespace, Name: jobkind.WorkloadName(jobkind.TrainJob{}, tj.Name)}
	var winner string
	eventually(t, "the TrainJob's pods running on its winner", 3*time.Minute, poll, func() error {
		var wl gantry.Workload
		if err := tb.Hub.Client.Get(ctx, key, &wl); err != nil {
			return err
		}
		if winner = wl.Status.Winner(); winner == "" {
			return fmt.Errorf("no winner yet: %s", conditions(wl.Status.Conditions))
		}
		var pods corev1.PodList
		if err := tb.Worker(winner).Client.List(ctx, &pods, client.InNamespace(tj.Namespace),
			client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": tj.Name}); err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running != 2 {
			return fmt.Errorf("%d of %d pods running on %s", running, len(pods.Items), winner)
		}
		return nil
	})
	return winner
}

// makeTrainJob builds a TrainJob of the testbed's runtime for the test Queue: nodes pods with one GPU each.
func makeTrainJob(ns, name string, nodes int32) *trainer.TrainJob {
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi"),
		gantry.GPUResource: resource.MustParse("1"),
	}
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{gantry.QueueLabel: queueName}},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: testbedRuntime},
			Trainer: &trainer.Trainer{
				NumNodes:         ptr.To(nodes),
				ResourcesPerNode: &corev1.ResourceRequirements{Requests: res, Limits: res},
			},
		},
	}
}

// trainerClient is a client of the cluster that knows the trainer's and JobSet's kinds besides the suite's.
func trainerClient(t *testing.T, c *testbed.Cluster) client.Client {
	t.Helper()
	scheme, err := testbed.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(trainer.AddToScheme(scheme), jobset.AddToScheme(scheme)); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("a client for %s: %v", c.Name, err)
	}
	return cl
}

// trainJobFinishes waits until the hub's TrainJob has the trainer's Complete condition, still suspended
// (the hub's policy's to keep), and its Workload finished Succeeded on a winner; it returns the Workload.
func trainJobFinishes(t *testing.T, hub client.Client, tj *trainer.TrainJob) *gantry.Workload {
	t.Helper()
	ctx := context.Background()
	eventually(t, "the hub's TrainJob Complete", 3*time.Minute, poll, func() error {
		var got trainer.TrainJob
		if err := hub.Get(ctx, client.ObjectKeyFromObject(tj), &got); err != nil {
			return err
		}
		if !ptr.Deref(got.Spec.Suspend, false) {
			t.Fatalf("the hub's TrainJob is no longer suspended")
		}
		if !apimeta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobComplete) {
			return fmt.Errorf("status %s", conditions(got.Status.Conditions))
		}
		return nil
	})
	var wl gantry.Workload
	key := types.NamespacedName{Namespace: tj.Namespace, Name: jobkind.WorkloadName(jobkind.TrainJob{}, tj.Name)}
	eventually(t, "the TrainJob's Workload finished", time.Minute, poll, func() error {
		if err := tb.Hub.Client.Get(ctx, key, &wl); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadFinished); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("not finished: %s", conditions(wl.Status.Conditions))
		}
		return nil
	})
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadFinished); c.Reason != gantry.ReasonJobSucceeded || wl.Status.Winner() == "" {
		t.Fatalf("the Workload finished %s (%s) on %q", c.Reason, c.Message, wl.Status.Winner())
	}
	return &wl
}

// trainerRanIt checks what the trainer made on the winner: a JobSet of the TrainJob's name, controlled
// by it, Completed, whose pods (two, of pod set "node", each asking for a GPU) completed on kwok nodes.
func trainerRanIt(t *testing.T, worker client.Client, tj *trainer.TrainJob) {
	t.Helper()
	ctx := context.Background()
	var remote trainer.TrainJob
	if err := worker.Get(ctx, client.ObjectKeyFromObject(tj), &remote); err != nil {
		t.Fatalf("the winner's TrainJob: %v", err)
	}
	var js jobset.JobSet
	if err := worker.Get(ctx, client.ObjectKeyFromObject(tj), &js); err != nil {
		t.Fatalf("the trainer's JobSet: %v", err)
	}
	if !metav1.IsControlledBy(&js, &remote) || !apimeta.IsStatusConditionTrue(js.Status.Conditions, string(jobset.JobSetCompleted)) {
		t.Fatalf("JobSet %s: owners %v, conditions %s", js.Name, js.OwnerReferences, conditions(js.Status.Conditions))
	}
	var pods corev1.PodList
	if err := worker.List(ctx, &pods, client.InNamespace(tj.Namespace), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": js.Name}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("%d pods of the JobSet, want 2", len(pods.Items))
	}
	for _, p := range pods.Items {
		gpus := p.Spec.Containers[0].Resources.Requests[gantry.GPUResource]
		if p.Labels[gantry.PodSetLabel] != "node" || p.Status.Phase != corev1.PodSucceeded || gpus.Value() != 1 || p.Spec.NodeName == "" {
			t.Errorf("pod %s: pod set %q, %s on %q, %s GPUs", p.Name, p.Labels[gantry.PodSetLabel], p.Status.Phase, p.Spec.NodeName, gpus.String())
		}
	}
}

// trainerObjectsGone waits until the TrainJob, its JobSet, Jobs and pods are gone from the worker.
func trainerObjectsGone(t *testing.T, worker client.Client, tj *trainer.TrainJob) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKeyFromObject(tj)
	eventually(t, "the trainer's objects gone from the worker", 2*time.Minute, poll, func() error {
		for _, obj := range []client.Object{&trainer.TrainJob{}, &jobset.JobSet{}} {
			if err := worker.Get(ctx, key, obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s still there: %v", obj, key.Name, err)
			}
		}
		var jobs batchv1.JobList
		var pods corev1.PodList
		if err := errors.Join(worker.List(ctx, &jobs, client.InNamespace(tj.Namespace)), worker.List(ctx, &pods, client.InNamespace(tj.Namespace))); err != nil {
			return err
		}
		if len(jobs.Items)+len(pods.Items) > 0 {
			return fmt.Errorf("%d Jobs and %d pods left", len(jobs.Items), len(pods.Items))
		}
		return nil
	})
}

// trainJobOnWinnerOnly checks the whole history of the namespace on the workers: the TrainJob and its
// JobSet were created once, on the winner only, and nothing else of those groups was; every pod of
// Gantry's (pod set "node") and every Job lived on the winner only; and the ledger's promises hold.
func trainJobOnWinnerOnly(t *testing.T, history *groupObjects, ns, winner, name string) {
	t.Helper()
	history.createdOnlyOn(t, winner, "trainjobs/"+name, "jobsets/"+name)
	twoPodsRanOn(t, ns, winner)
	jobsOnlyOn(t, ns, winner)
}

// A TrainJob whose runtime is on the hub but on no worker is refused by each worker's trainer (its
// validating webhook, which answers 403): the hub takes it back each time (RemoteJobRefused, with the
// trainer's words), leaves a worker out once it refused it MaxEvictionsPerCluster times,
// and the Workload then waits saying why; no worker's etcd ever stored the TrainJob.
func TestATrainJobWhoseRuntimeNoWorkerHasIsRefusedAndSaysWhy(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "trainjob-refused")
	dumpOnFailure(t, ns)
	hub := trainerClient(t, tb.Hub)
	history := watchObjects(t, ns, "trainer.kubeflow.org")
	var shared trainer.ClusterTrainingRuntime
	if err := hub.Get(ctx, types.NamespacedName{Name: testbedRuntime}, &shared); err != nil {
		t.Fatal(err)
	}
	hubOnly := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "hub-only", Namespace: ns}, Spec: shared.Spec}
	if err := hub.Create(ctx, hubOnly); err != nil {
		t.Fatal(err)
	}
	tj := makeTrainJob(ns, "nowhere", 1)
	tj.Spec.RuntimeRef = trainer.RuntimeRef{Name: hubOnly.Name, APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.TrainingRuntimeKind)}
	if err := hub.Create(ctx, tj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), tj) })

	key := types.NamespacedName{Namespace: ns, Name: jobkind.WorkloadName(jobkind.TrainJob{}, tj.Name)}
	var wl gantry.Workload
	eventually(t, fmt.Sprintf("each worker to refuse it %d times", dispatch.MaxEvictionsPerCluster), 4*time.Minute, poll, func() error {
		if err := tb.Hub.Client.Get(ctx, key, &wl); err != nil {
			return err
		}
		perCluster := map[string]int{}
		for _, e := range wl.Status.Evictions {
			if e.Reason != gantry.ReasonRemoteJobRefused || !strings.Contains(e.Message, "specified trainingRuntime must be created before the TrainJob is created") {
				t.Fatalf("eviction %+v", e)
			}
			perCluster[e.Cluster]++
		}
		for _, w := range tb.Workers {
			if perCluster[w.Name] < dispatch.MaxEvictionsPerCluster {
				return fmt.Errorf("refusals per cluster %v", perCluster)
			}
		}
		return nil
	})
	eventually(t, "the Workload waiting, saying why", time.Minute, poll, func() error {
		if err := tb.Hub.Client.Get(ctx, key, &wl); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending)
		if c == nil || c.Reason != gantry.ReasonNoClusterCanHold || !strings.Contains(c.Message, "(last: RemoteJobRefused)") || wl.Status.Winner() != "" {
			return fmt.Errorf("winner %q, pending %+v", wl.Status.Winner(), c)
		}
		return nil
	})
	t.Logf("%d refusals, then: %s", len(wl.Status.Evictions), apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending).Message)
	if made := history.created(t); len(made) > 0 {
		t.Errorf("the workers' etcd stored %v", made)
	}
}

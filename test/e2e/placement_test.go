package e2e

import (
	"context"
	"fmt"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

const (
	a100 = "NVIDIA-A100-SXM4-80GB"
	h100 = "NVIDIA-H100-80GB-HBM3"
)

// TestFragmentedWorkerDoesNotGetAWholeNodePod leaves 4 GPUs free on each of worker-1's nodes (16 in
// all, but no whole node) and submits one pod of 8 GPUs: only a worker with a whole free node may run it.
func TestFragmentedWorkerDoesNotGetAWholeNodePod(t *testing.T) {
	ns := newNamespace(t, "e2e-fragmented")
	dumpOnFailure(t, ns)
	w1 := tb.Worker("worker-1")
	for _, node := range gpuNodes(t, w1) {
		occupy(t, w1, node, 4)
	}
	waitForReportedGPUs(t, "worker-1", a100, func(g gantry.GPUProductCapacity) error {
		if g.Free != 16 || g.LargestFreeOnNode != 4 {
			return fmt.Errorf("free %d, largest on one node %d; want 16 and 4", g.Free, g.LargestFreeOnNode)
		}
		if n := shapePods(g, 8); n != 0 {
			return fmt.Errorf("%d 8-GPU pods fit, want 0", n)
		}
		if n := shapePods(g, 4); n != 4 {
			return fmt.Errorf("%d 4-GPU pods fit, want 4", n)
		}
		return nil
	})

	job := makeJob(ns, "whole-node").gpus(8).runsFor(runTime).obj()
	submit(t, job)
	allComplete(t, []*batchv1.Job{job}, 2*time.Minute)

	wl := hubWorkload(t, job)
	if wl.Status.ClusterName != "worker-2" {
		t.Errorf("hub workload records winner %q, want worker-2 (worker-1 has no whole free node)", wl.Status.ClusterName)
	}
	// The hub read worker-1's capacity and sent it no copy to withdraw later.
	if !slices.Equal(wl.Status.NominatedClusters, []string{"worker-2"}) {
		t.Errorf("nominated %v, want only worker-2", wl.Status.NominatedClusters)
	}
	if created := auditJobs(t, ns).created[job.Name]; len(created) != 1 || created[0] != "worker-2" {
		t.Errorf("job created on %v, want exactly once on worker-2", created)
	}
}

// TestGPUProductPreference fills every H100 node of worker-2. A job that accepts only H100 waits for it,
// never running on the A100 worker; a job that accepts "H100, else A100" runs on A100 at once, held there
// to A100 nodes. When the H100 nodes free up, the H100-only job runs on worker-2.
func TestGPUProductPreference(t *testing.T) {
	ns := newNamespace(t, "e2e-products")
	dumpOnFailure(t, ns)
	w2 := tb.Worker("worker-2")
	var blockers []*corev1.Pod
	for _, node := range gpuNodes(t, w2) {
		blockers = append(blockers, occupy(t, w2, node, 8))
	}
	waitForReportedGPUs(t, "worker-2", h100, func(g gantry.GPUProductCapacity) error {
		if g.Free != 0 {
			return fmt.Errorf("free %d, want 0", g.Free)
		}
		return nil
	})

	h100Only := makeJob(ns, "h100-only").gpus(8).runsFor(runTime).gpuProducts(h100).obj()
	fallback := makeJob(ns, "h100-else-a100").gpus(8).runsFor(runTime).gpuProducts(h100, a100).obj()
	submit(t, h100Only)
	submit(t, fallback)

	allComplete(t, []*batchv1.Job{fallback}, 2*time.Minute)
	wl := hubWorkload(t, fallback)
	if wl.Status.ClusterName != "worker-1" {
		t.Errorf("fallback job ran on %q, want worker-1 (the H100 worker is full)", wl.Status.ClusterName)
	}
	if !slices.Equal(wl.Status.NominatedClusters, []string{"worker-1"}) {
		t.Errorf("fallback job nominated to %v, want only worker-1 (no H100 free)", wl.Status.NominatedClusters)
	}
	if a := wl.Status.Admission; a == nil || len(a.PodSets) != 1 || a.PodSets[0].GPUProduct != a100 {
		t.Errorf("fallback job's admission %+v, want GPU product %s", a, a100)
	}
	var remote batchv1.Job
	if err := tb.Worker("worker-1").Client.Get(context.Background(), client.ObjectKeyFromObject(fallback), &remote); err != nil {
		t.Fatal(err)
	}
	if got := remote.Spec.Template.Spec.NodeSelector[gantry.GPUProductLabel]; got != a100 {
		t.Errorf("the Job on worker-1 selects GPU product %q, want %s", got, a100)
	}

	// The H100-only job waits, saying why, and has no Job anywhere.
	eventually(t, "h100-only waiting for capacity", time.Minute, poll, func() error {
		wl := hubWorkload(t, h100Only)
		c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != gantry.ReasonWaitingForCapacity {
			return fmt.Errorf("pending condition %+v, want True/%s", c, gantry.ReasonWaitingForCapacity)
		}
		return nil
	})
	if created := auditJobs(t, ns).created[h100Only.Name]; len(created) != 0 {
		t.Fatalf("h100-only job created on %v while no H100 was free", created)
	}

	for _, p := range blockers {
		release(t, w2, p)
	}
	allComplete(t, []*batchv1.Job{h100Only}, 2*time.Minute)
	a := auditJobs(t, ns)
	if created := a.created[h100Only.Name]; len(created) != 1 || created[0] != "worker-2" {
		t.Errorf("h100-only job created on %v, want exactly once on worker-2", created)
	}
	if created := a.created[fallback.Name]; len(created) != 1 || created[0] != "worker-1" {
		t.Errorf("fallback job created on %v, want exactly once on worker-1", created)
	}
}

// gpuNodes lists the cluster's GPU nodes.
func gpuNodes(t *testing.T, c *testbed.Cluster) []string {
	t.Helper()
	var nodes corev1.NodeList
	if err := c.Client.List(context.Background(), &nodes, client.HasLabels{gantry.GPUProductLabel}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	if len(names) == 0 {
		t.Fatalf("no GPU nodes on %s", c.Name)
	}
	return names
}

// occupyNamespace holds, on each worker, the pods that tests start outside Gantry to take GPUs.
const occupyNamespace = "e2e-occupy"

// occupy starts a pod outside Gantry that holds gpus GPUs of node until the test ends: it is bound to
// the node directly and, without a runtime annotation, runs until deleted.
func occupy(t *testing.T, c *testbed.Cluster, node string, gpus int64) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: occupyNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hold-%s-%d", node, gpus), Namespace: occupyNamespace},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{Name: "hold", Image: "registry.example/hold:1", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{gantry.GPUResource: q}, Limits: corev1.ResourceList{gantry.GPUResource: q}}}},
		},
	}
	if err := c.Client.Create(ctx, pod); err != nil {
		t.Fatalf("occupying %d GPUs of %s on %s: %v", gpus, node, c.Name, err)
	}
	t.Cleanup(func() { release(t, c, pod) })
	return pod
}

// release deletes a pod started by occupy and waits until it is gone, so the GPUs are free again.
func release(t *testing.T, c *testbed.Cluster, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	if err := c.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("releasing %s on %s: %v", pod.Name, c.Name, err)
		return
	}
	eventually(t, "pod "+pod.Name+" gone from "+c.Name, time.Minute, 200*time.Millisecond, func() error {
		var p corev1.Pod
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

// waitForReportedGPUs waits until the hub's WorkerCluster shows the product's capacity as check wants.
func waitForReportedGPUs(t *testing.T, cluster, product string, check func(gantry.GPUProductCapacity) error) {
	t.Helper()
	eventually(t, cluster+"'s "+product+" capacity on the hub", time.Minute, poll, func() error {
		var wc gantry.WorkerCluster
		if err := tb.Hub.Client.Get(context.Background(), types.NamespacedName{Name: cluster}, &wc); err != nil {
			return err
		}
		if wc.Status.Capacity == nil {
			return fmt.Errorf("no capacity reported")
		}
		for _, g := range wc.Status.Capacity.GPUProducts {
			if g.Product == product {
				return check(g)
			}
		}
		return fmt.Errorf("product not reported")
	})
}

// shapePods is how many pods of gpus GPUs the capacity says fit now; -1 when the shape is not reported.
func shapePods(g gantry.GPUProductCapacity, gpus int64) int32 {
	for _, s := range g.Shapes {
		if s.GPUs == gpus {
			return s.Pods
		}
	}
	return -1
}

// TestUnplaceableJobIsEvictedAndDispatchedAgain submits a gang of four pods that each take host port
// 9000, on workers of four nodes each, where a pod from outside Gantry holds that port on one node. The
// agent counts one pod a node but does not see other pods' host ports, and admits it; the scheduler
// places all but one pod, or, on the worker that serves PodGroups, none (the gang does not fit whole, and
// the scheduler says so on its PodGroup). After the agents' placement timeout the hub must delete the Job there, and
// only then create it again in a new epoch: at no time does the Job exist on two workers.
func TestUnplaceableJobIsEvictedAndDispatchedAgain(t *testing.T) {
	ns := newNamespace(t, "e2e-evict")
	dumpOnFailure(t, ns)
	for _, w := range tb.Workers {
		holdHostPort(t, w, 9000)
	}
	job := makeJob(ns, "spread").pods(4).runsFor("10m").stopsWithin(2).obj()
	job.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9000, HostPort: 9000}}
	submit(t, job)

	wl := &gantry.Workload{}
	key := types.NamespacedName{Namespace: ns, Name: "job-" + job.Name}
	eventually(t, "an eviction recorded on the hub", testbed.PlacementTimeout+2*time.Minute, poll, func() error {
		if err := tb.Hub.Client.Get(context.Background(), key, wl); err != nil {
			return err
		}
		if len(wl.Status.Evictions) == 0 {
			return fmt.Errorf("no eviction yet; winner %q, epoch %d", wl.Status.ClusterName, wl.Status.DispatchEpoch)
		}
		return nil
	})
	ev := wl.Status.Evictions[0]
	want := []string{"1 of 4 pods not placed"}
	if ev.Cluster == gangWorker {
		want = []string{"4 of 4 pods not placed", "; PodGroup "}
	}
	for _, w := range want {
		if ev.Reason != gantry.ReasonPlacementTimeout || !strings.Contains(ev.Message, w) {
			t.Errorf("eviction %+v, want PlacementTimeout saying %q", ev, w)
		}
	}
	t.Logf("evicted from %s: %s", ev.Cluster, ev.Message)

	// Dispatched again in a later epoch, and the Job exists there.
	eventually(t, "the job dispatched again", 2*time.Minute, poll, func() error {
		wl = hubWorkload(t, job)
		if wl.Status.ClusterName == "" || wl.Status.DispatchEpoch <= ev.Epoch {
			return fmt.Errorf("winner %q, epoch %d", wl.Status.ClusterName, wl.Status.DispatchEpoch)
		}
		var j batchv1.Job
		return tb.Worker(wl.Status.ClusterName).Client.Get(context.Background(), client.ObjectKeyFromObject(job), &j)
	})

	// The audit: the first Job was deleted before the second was created, wherever that was, and no
	// pod of it ran in two places.
	checkOneRun(t, ns)
	live := map[string]bool{}
	for _, r := range audit.Records(ns) {
		if r.Name != job.Name {
			continue
		}
		if r.Created {
			for other := range live {
				t.Errorf("job created on %s while it still existed on %s", r.Cluster, other)
			}
			live[r.Cluster] = true
		} else {
			delete(live, r.Cluster)
		}
	}

	// Stop the cycle: every worker evicts it in turn until none is tried any more.
	if err := tb.Hub.Client.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "job spread gone from every worker", time.Minute, poll, func() error {
		for _, w := range tb.Workers {
			if err := workerJobGone(w, job); err != nil {
				return err
			}
		}
		return nil
	})
}

// holdHostPort runs a pod from outside Gantry on one node of the worker that takes the host port, for
// the rest of the test.
func holdHostPort(t *testing.T, w *testbed.Cluster, port int32) {
	t.Helper()
	var nodes corev1.NodeList
	if err := w.Client.List(context.Background(), &nodes); err != nil || len(nodes.Items) == 0 {
		t.Fatalf("listing the nodes of %s: %d, %v", w.Name, len(nodes.Items), err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("holds-port-%d", port), Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{NodeName: nodes.Items[0].Name, Containers: []corev1.Container{{Name: "c", Image: "registry.example/server:1",
			Ports: []corev1.ContainerPort{{ContainerPort: port, HostPort: port}}}}}}
	if err := w.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = w.Client.Delete(context.Background(), pod, client.GracePeriodSeconds(0))
	})
}

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/kueue"
	"github.com/gantry-dev/gantry/jobkind"
)

// A WorkerCluster that says its worker runs Kueue gets its jobs in the LocalQueue it names for their
// namespace (the job carries Kueue's queue label, its pods do not: Kueue would take such pods for jobs
// of their own), and its agent admits them only within what the ClusterQueue behind that LocalQueue
// has left, counting what it admitted that Kueue has not counted yet. The worker has Kueue's API (its
// CRDs, from the module) but no Kueue controller: nothing else holds quota, and the jobs run as any.
func TestAJobForAKueueWorkerGoesIntoItsLocalQueueWithinItsRoom(t *testing.T) {
	startHub(t)
	ctx := context.Background()
	w := workers[jobSetWorker]
	installKueueAPI(t, w)
	eventually(t, "the WorkerClusters saying which workers serve Kueue", func() error {
		for _, n := range names {
			var wc gantry.WorkerCluster
			if err := hubEnv.client.Get(ctx, types.NamespacedName{Name: n}, &wc); err != nil {
				return err
			}
			want := map[bool]string{true: gantry.ReasonKueueServed, false: gantry.ReasonNoKueueAPI}[n == w.name]
			if c := apimeta.FindStatusCondition(wc.Status.Conditions, gantry.ClusterKueue); c == nil || c.Reason != want {
				return fmt.Errorf("%s Kueue condition %+v, want %s", n, c, want)
			}
		}
		return nil
	})
	newGlobalQueue(t, "kueue", map[string]int64{jobSetWorker: 16})
	ns := newNamespace(t, "kueue")
	dumpOnFailure(t, ns)
	kueueQueue(t, w, ns, "team-a", 8)
	wc := &gantry.WorkerCluster{}
	wc.Name = jobSetWorker
	updateSpec(t, wc, func(wc *gantry.WorkerCluster) {
		wc.Spec.Kueue = &gantry.WorkerKueue{LocalQueue: "gantry", Namespaces: []gantry.NamespaceLocalQueue{{Namespace: ns, LocalQueue: "team-a"}}}
	})
	t.Cleanup(func() { updateSpec(t, wc, func(wc *gantry.WorkerCluster) { wc.Spec.Kueue = nil }) })

	first := gpuJob(ns, "first", 1, 8)
	submit(t, first)
	if on := runsOn(t, first); on != jobSetWorker {
		t.Fatalf("runs on %s, want %s", on, jobSetWorker)
	}
	var remote batchv1.Job
	if err := w.client.Get(ctx, client.ObjectKeyFromObject(first), &remote); err != nil {
		t.Fatal(err)
	}
	if got := remote.Labels[gantry.KueueQueueNameLabel]; got != "team-a" {
		t.Errorf("the worker's Job is in LocalQueue %q, want the namespace's team-a", got)
	}
	if got, ok := remote.Spec.Template.Labels[gantry.KueueQueueNameLabel]; ok {
		t.Errorf("the Job's pods carry Kueue's queue label %q", got)
	}

	// The nodes and the GlobalQueue hold a second one; the ClusterQueue does not.
	second := gpuJob(ns, "second", 1, 8)
	submit(t, second)
	cond := copyWaits(t, w, second, gantry.ReasonKueueQueueFull)
	if want := "Kueue's ClusterQueue " + ns + " has 0 nvidia.com/gpu of flavor gantry-test left"; !strings.Contains(cond.Message, want) {
		t.Errorf("the copy waits with %q, want %q", cond.Message, want)
	}
	if cp := copyOn(t, w, second); cp.Annotations[gantry.KueueLocalQueueAnnotation] != "team-a" {
		t.Errorf("the copy names LocalQueue %q, want team-a", cp.Annotations[gantry.KueueLocalQueueAnnotation])
	}
	completeRemote(t, jobSetWorker, first)
	hubJobComplete(t, first)
	if on := runsOn(t, second); on != jobSetWorker {
		t.Fatalf("runs on %s, want %s", on, jobSetWorker)
	}
	completeRemote(t, jobSetWorker, second)
	hubJobComplete(t, second)
}

// installKueueAPI installs Kueue's CRDs (hack/install-tools.sh copies them from the Kueue module next
// to the API servers) on the worker, whose agent is running: it takes Kueue's API up once every kind it
// reads is served, with no restart (the test then waits for the worker's Kueue condition).
func installKueueAPI(t *testing.T, w *cluster) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kueue", "crd", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Kueue CRDs in KUBEBUILDER_ASSETS/kueue/crd (%v): run with KUBEBUILDER_ASSETS=$(hack/install-tools.sh --envtest | tail -n 1)", err)
	}
	for _, p := range paths {
		if err := applyFile(context.Background(), w.client, p); err != nil {
			t.Fatal(err)
		}
	}
}

// kueueQueue makes, on the worker, a ClusterQueue named after the namespace with gpus of the flavor
// gantry-test, and LocalQueue lq of the namespace into it; both go when the test ends.
func kueueQueue(t *testing.T, w *cluster, ns, lq string, gpus int64) {
	t.Helper()
	ctx := context.Background()
	if err := w.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rf := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "gantry-test"}}
	if err := w.client.Create(ctx, rf); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: kueue.ClusterQueueSpec{ResourceGroups: []kueue.ResourceGroup{{
		CoveredResources: []corev1.ResourceName{gantry.GPUResource},
		Flavors: []kueue.FlavorQuotas{{Name: "gantry-test", Resources: []kueue.ResourceQuota{
			{Name: gantry.GPUResource, NominalQuota: *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}}}
	q := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: lq, Namespace: ns}, Spec: kueue.LocalQueueSpec{ClusterQueue: ns}}
	for _, obj := range []client.Object{cq, q} {
		if err := w.client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.client.Delete(context.Background(), obj) })
	}
}

func copyOn(t *testing.T, w *cluster, job *batchv1.Job) *gantry.Workload {
	t.Helper()
	var cp gantry.Workload
	if err := w.client.Get(context.Background(), types.NamespacedName{Namespace: job.Namespace, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}, &cp); err != nil {
		t.Fatal(err)
	}
	return &cp
}

// copyWaits waits until the job's copy on the worker is not admitted, for that reason.
func copyWaits(t *testing.T, w *cluster, job *batchv1.Job, reason string) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	eventually(t, "the copy of "+job.Name+" on "+w.name+" waiting with "+reason, func() error {
		var cp gantry.Workload
		if err := w.client.Get(context.Background(), types.NamespacedName{Namespace: job.Namespace, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}, &cp); err != nil {
			return err
		}
		cond = apimeta.FindStatusCondition(cp.Status.Conditions, gantry.WorkloadAdmitted)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != reason {
			return fmt.Errorf("admitted condition %+v", cond)
		}
		return nil
	})
	return cond
}

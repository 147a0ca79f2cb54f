// Package agent runs the Gantry agent in-process against a real kube-apiserver (envtest) with no
// scheduler and no Job controller: the test creates nodes, pods and Jobs itself and watches the agent
// admit copies and publish its CapacityReport.
package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gantry-dev/gantry/agent/agenttest"
	"github.com/gantry-dev/gantry/agent/controller"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
)

const (
	clusterName = "worker-a"
	namespace   = "team-a"
	product     = "NVIDIA-A100-SXM4-80GB"
	waitTimeout = 30 * time.Second
)

// waitFor polls check until it returns nil, and fails the test with check's last error once timeout
// passed.
func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %s: %v", what, waitTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestMain(m *testing.M) {
	level := zapcore.ErrorLevel
	if os.Getenv("GANTRY_TEST_VERBOSE") != "" {
		level = zapcore.DebugLevel
	}
	ctrllog.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(level)))
	os.Exit(m.Run())
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// startAgent starts an API server, installs the CRDs and runs the agent against it until the test ends.
func startAgent(t *testing.T) client.Client {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: run with KUBEBUILDER_ASSETS=$(hack/install-tools.sh | tail -n1) or make test-integration")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot(), "deploy", "crd")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // Start can fail after its processes came up (installing CRDs)
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping the API server: %v", err)
		}
	})

	scheme := kruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := gantryv1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}

	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 scheme,
		Cache:                  controller.CacheOptions(clusterName),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := controller.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder(controller.ControllerName), clock.RealClock{},
		controller.Options{ClusterName: clusterName})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	return c
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// createNode creates a node and then sets its status (allocatable, Ready), which create ignores. The API
// server taints a new node not-ready until the node lifecycle controller, which does not run here, sees
// it Ready; the test plays that controller and removes the taint.
func createNode(t *testing.T, c client.Client, node *corev1.Node) {
	t.Helper()
	ctx := context.Background()
	status, taints := node.Status, node.Spec.Taints
	create(t, c, node)
	node.Spec.Taints = taints
	if err := c.Update(ctx, node); err != nil {
		t.Fatalf("removing the not-ready taint of node %s: %v", node.Name, err)
	}
	node.Status = status
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatalf("setting the status of node %s: %v", node.Name, err)
	}
}

// admitted returns the Admitted condition of copy name, or an error if it has none.
func admitted(c client.Client, name string) (*metav1.Condition, error) {
	var w gantryv1beta1.Workload
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &w); err != nil {
		return nil, err
	}
	cond := meta.FindStatusCondition(w.Status.Conditions, gantryv1beta1.WorkloadAdmitted)
	if cond == nil {
		return nil, fmt.Errorf("copy %s has no Admitted condition yet", name)
	}
	return cond, nil
}

// expectAdmitted waits until copy name shows Admitted with status and reason, and a message.
func expectAdmitted(t *testing.T, c client.Client, name string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var got *metav1.Condition
	waitFor(t, fmt.Sprintf("copy %s Admitted=%s (%s)", name, status, reason), func() error {
		cond, err := admitted(c, name)
		if err != nil {
			return err
		}
		if cond.Status != status || cond.Reason != reason || cond.Message == "" {
			return fmt.Errorf("condition is %s/%s: %q", cond.Status, cond.Reason, cond.Message)
		}
		got = cond
		return nil
	})
	return got
}

// expectGPUs waits until the CapacityReport shows the product's GPUs with the given free GPUs on each
// of the two nodes: in all, the most on one node, and how many 1, 2, 4 and 8-GPU pods fit; and the GPUs
// the admitted copies ask for.
func expectGPUs(t *testing.T, c client.Client, nodeFree1, nodeFree2, admitted int64) {
	t.Helper()
	free, largest := nodeFree1+nodeFree2, max(nodeFree1, nodeFree2)
	var shapes []gantryv1beta1.GPUShapeCount
	for _, k := range []int64{1, 2, 4, 8} {
		shapes = append(shapes, gantryv1beta1.GPUShapeCount{GPUs: k, Pods: int32(nodeFree1/k + nodeFree2/k)})
	}
	want := []gantryv1beta1.GPUProductCapacity{{Product: product, Nodes: 2, Allocatable: 16, Free: free,
		LargestFreeOnNode: largest, LargestAllocatableOnNode: 8, Shapes: shapes}}
	waitFor(t, fmt.Sprintf("CapacityReport with %d GPUs free (%d on one node)", free, largest), func() error {
		var rep gantryv1beta1.CapacityReport
		if err := c.Get(context.Background(), client.ObjectKey{Name: clusterName}, &rep); err != nil {
			return err
		}
		if rep.Status.ClusterName != clusterName || rep.Status.HeartbeatTime.IsZero() {
			return fmt.Errorf("status names cluster %q with heartbeat %s", rep.Status.ClusterName, rep.Status.HeartbeatTime)
		}
		if rep.Status.Capacity.Nodes != 2 || rep.Status.Capacity.ReadyNodes != 2 {
			return fmt.Errorf("%d nodes, %d ready; want 2 and 2", rep.Status.Capacity.Nodes, rep.Status.Capacity.ReadyNodes)
		}
		if diff := cmp.Diff(want, rep.Status.Capacity.GPUProducts); diff != "" {
			return errors.New("GPU products (-want +got):\n" + diff)
		}
		i := slices.IndexFunc(rep.Status.Capacity.Resources, func(r gantryv1beta1.ResourceCapacity) bool { return r.Name == gantryv1beta1.GPUResource })
		if i < 0 || rep.Status.Capacity.Resources[i].Admitted == nil || rep.Status.Capacity.Resources[i].Admitted.Value() != admitted {
			return fmt.Errorf("resources %+v: want %s with %d admitted", rep.Status.Capacity.Resources, gantryv1beta1.GPUResource, admitted)
		}
		return nil
	})
}

func TestAgent(t *testing.T) {
	c := startAgent(t)
	ctx := context.Background()
	for _, n := range []string{"gpu-1", "gpu-2"} {
		createNode(t, c, agenttest.MakeNode(n).Allocatable("cpu", "64", "memory", "512Gi").GPUs(8, product).Obj())
	}
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})

	// The report appears with the whole cluster free, nothing admitted.
	expectGPUs(t, c, 8, 8, 0)

	// A copy that fits is admitted, and its reservation, and what it asks for, show in the report.
	create(t, c, agenttest.MakeCopy("big", namespace).PodSet("main", 2, "nvidia.com/gpu", "6").Obj())
	cond := expectAdmitted(t, c, "big", metav1.ConditionTrue, gantryv1beta1.ReasonFits)
	t.Logf("big: %s", cond.Message)
	expectGPUs(t, c, 2, 2, 12)

	// A second copy no longer fits beside the first one's reservation.
	create(t, c, agenttest.MakeCopy("small", namespace).PodSet("main", 1, "nvidia.com/gpu", "4").Obj())
	cond = expectAdmitted(t, c, "small", metav1.ConditionFalse, gantryv1beta1.ReasonInsufficientResources)
	t.Logf("small: %s", cond.Message)

	// A pod bigger than every node never fits.
	create(t, c, agenttest.MakeCopy("huge", namespace).PodSet("main", 1, "nvidia.com/gpu", "16").Obj())
	cond = expectAdmitted(t, c, "huge", metav1.ConditionFalse, gantryv1beta1.ReasonNeverFits)
	t.Logf("huge: %s", cond.Message)

	// A Job that Gantry did not create holds the copy's name: the copy is rejected, the Job left alone.
	foreign := agenttest.MakeJob("taken", namespace).Obj()
	create(t, c, foreign)
	create(t, c, agenttest.MakeCopy("taken", namespace).PodSet("main", 1, "cpu", "1").Obj())
	cond = expectAdmitted(t, c, "taken", metav1.ConditionFalse, gantryv1beta1.ReasonJobNameConflict)
	t.Logf("taken: %s", cond.Message)

	// A pod of the admitted copy binds: it is usage now, and no longer reserved; free capacity is the same.
	pod := agenttest.MakePod("big-0", namespace).Workload("hub-big").Node("gpu-1").
		Request("nvidia.com/gpu", "6").Limit("nvidia.com/gpu", "6").Obj()
	create(t, c, pod)
	pod.Status.Phase = corev1.PodRunning
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	expectGPUs(t, c, 2, 2, 12)

	// Deleting the admitted copy releases what it still held: the waiting copy is admitted. The pod that
	// already runs keeps its GPUs.
	if cond, err := admitted(c, "big"); err != nil || cond.Status != metav1.ConditionTrue {
		t.Fatalf("copy big before deletion: %+v, %v; want still admitted", cond, err)
	}
	if err := c.Delete(ctx, agenttest.MakeCopy("big", namespace).Obj()); err != nil {
		t.Fatal(err)
	}
	expectAdmitted(t, c, "small", metav1.ConditionTrue, gantryv1beta1.ReasonFits)
	expectGPUs(t, c, 4, 2, 4)

	// The pod goes away: its GPUs are free again.
	if err := c.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	expectGPUs(t, c, 8, 4, 4)

	// Permanent rejections stay, and the foreign Job was never touched.
	for name, reason := range map[string]string{"huge": gantryv1beta1.ReasonNeverFits, "taken": gantryv1beta1.ReasonJobNameConflict} {
		if cond, err := admitted(c, name); err != nil || cond.Status != metav1.ConditionFalse || cond.Reason != reason {
			t.Errorf("copy %s: %+v, %v; want Admitted=False %s", name, cond, err, reason)
		}
	}
	var job = foreign.DeepCopy()
	if err := c.Get(ctx, client.ObjectKeyFromObject(foreign), job); err != nil {
		t.Fatal(err)
	}
	if job.ResourceVersion != foreign.ResourceVersion || job.Labels[gantryv1beta1.WorkloadUIDLabel] != "" {
		t.Errorf("the foreign Job changed: resourceVersion %s -> %s, labels %v", foreign.ResourceVersion, job.ResourceVersion, job.Labels)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "big"}, &gantryv1beta1.Workload{}); !apierrors.IsNotFound(err) {
		t.Errorf("copy big: %v, want it gone", err)
	}
}

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
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub"
	"github.com/gantry-dev/gantry/internal/helmchart"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// oldestWorker names the worker that runs the oldest Kubernetes release a worker may run.
const oldestWorker = "worker-oldest"

// A worker on the oldest Kubernetes the chart supports for workers (an API server of that release, built
// by hack/install-tools.sh from hack/tools/kube-oldest): the worker side of the chart installs there, the
// hub connects to it, its agent reports (without gangs: no PodGroup API), and a job runs there.
func TestAWorkerOnTheOldestSupportedKubernetesRunsJobs(t *testing.T) {
	ctx := context.Background()
	w := startOldestWorker(t)
	version, err := serverVersion(w)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("worker %s runs Kubernetes %s", w.name, version)
	if want := strings.TrimSuffix(helmchart.OldestWorkerKubeVersion, ".0"); !strings.HasPrefix(version, want+".") {
		t.Errorf("the worker runs %s, want a release of %s, the oldest the chart supports for workers", version, want)
	}
	ch, err := helmchart.Load(filepath.Join(repoRoot(), "deploy", "charts", "gantry"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := helmchart.RenderFor(ch, helmchart.Namespace, map[string]any{"role": "agent", "agent": map[string]any{"clusterName": w.name}}, version)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := helmchart.Objects(docs)
	if err != nil {
		t.Fatal(err)
	}
	dryRunAll(t, w, objs)

	stopAgent := func() {}
	t.Cleanup(func() { stopAgent() }) // after the worker is unregistered
	if err := register(ctx, w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unregister(t, w.name) })
	if stopAgent, err = startAgent(ctx, w); err != nil {
		t.Fatal(err)
	}
	startHubWith(t, hub.Options{}, append(names, w.name)...)
	agentReportsWithoutGangs(t, w.name)

	newGlobalQueue(t, "oldest", map[string]int64{w.name: 16})
	ns := newNamespace(t, "oldest")
	job := gpuJob(ns, "on-oldest", 2, 4)
	submit(t, job)
	eventually(t, "the job created on "+w.name, func() error {
		return w.client.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
	})
	completeRemote(t, w.name, job)
	hubJobComplete(t, job)
}

// startOldestWorker starts an API server of the oldest supported release with Gantry's CRDs, and
// makes it known to the suite's helpers as a worker for the test.
func startOldestWorker(t *testing.T) *cluster {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-apiserver-v*"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("KUBEBUILDER_ASSETS holds %v, want one kube-apiserver-vX.Y.Z: run with KUBEBUILDER_ASSETS=$(hack/install-tools.sh --envtest | tail -n 1)", paths)
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(repoRoot(), "deploy", "crd")}, ErrorIfCRDPathMissing: true}
	env.ControlPlane.GetAPIServer().Path = paths[0]
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("starting %s: %v", filepath.Base(paths[0]), err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	w := &cluster{name: oldestWorker, env: env, cfg: cfg, client: c}
	workers[w.name] = w
	t.Cleanup(func() {
		delete(workers, w.name)
		_ = env.Stop()
	})
	return w
}

func serverVersion(w *cluster) (string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(w.cfg)
	if err != nil {
		return "", err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return "", err
	}
	return v.GitVersion, nil
}

// agentReportsWithoutGangs waits until the hub shows the worker connected, its agent ready and its
// scheduler binding gangs one pod at a time.
func agentReportsWithoutGangs(t *testing.T, name string) {
	t.Helper()
	eventually(t, name+" connected, its agent ready, no gangs", func() error {
		var wc v1beta1.WorkerCluster
		if err := hubEnv.client.Get(context.Background(), types.NamespacedName{Name: name}, &wc); err != nil {
			return err
		}
		for typ, want := range map[string]metav1.ConditionStatus{v1beta1.ClusterConnected: metav1.ConditionTrue,
			v1beta1.ClusterAgentReady: metav1.ConditionTrue, v1beta1.ClusterGangScheduling: metav1.ConditionFalse} {
			if c := apimeta.FindStatusCondition(wc.Status.Conditions, typ); c == nil || c.Status != want {
				return fmt.Errorf("%s: %+v, want %s", typ, c, want)
			}
		}
		return nil
	})
}

// unregister removes a worker the test registered from the hub.
func unregister(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	_ = hubEnv.client.Delete(ctx, hubtest.MakeWorkerCluster(name).Obj())
	_ = hubEnv.client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: hubNamespace}})
}

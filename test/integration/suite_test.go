// Package integration runs the hub and the agents in-process against real API servers: one hub and two
// workers, each an etcd plus kube-apiserver started by envtest. No scheduler or Job controller runs on
// the workers, so tests play the worker's Job controller where they need a Job to progress.
package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ocm "open-cluster-management.io/api/cluster/v1beta1"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentcontroller "github.com/gantry-dev/gantry/agent/controller"
	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub"
	"github.com/gantry-dev/gantry/hub/jobs"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/internal/hubtest"
	"github.com/gantry-dev/gantry/internal/kueue"
	"github.com/gantry-dev/gantry/internal/manifest"
	"github.com/gantry-dev/gantry/internal/workerconfig"
	"github.com/gantry-dev/gantry/jobkind"
	"github.com/gantry-dev/gantry/test/testcluster"
)

const hubNamespace = "gantry-system"

var (
	scheme  = kruntime.NewScheme()
	hubEnv  *cluster
	workers = map[string]*cluster{}
	names   = []string{"worker-1", "worker-2"}
)

type cluster struct {
	name   string
	env    *envtest.Environment
	cfg    *rest.Config
	client client.Client
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func TestMain(m *testing.M) {
	if os.Getenv(credentialPluginEnv) != "" {
		os.Exit(actAsCredentialPlugin(os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Println("integration tests need KUBEBUILDER_ASSETS (run them with make test-integration)")
		os.Exit(1)
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapLevel())))
	must(clientgoscheme.AddToScheme(scheme))
	must(gantry.AddToScheme(scheme))
	must(inventory.AddToScheme(scheme))
	must(jobkind.AddToScheme(scheme))
	must(kueue.AddToScheme(scheme))
	must(ocm.Install(scheme))
	must(apiextensionsv1.AddToScheme(scheme))

	all := append([]string{"hub"}, names...)
	started := make([]*cluster, len(all))
	var wg sync.WaitGroup
	errs := make([]error, len(all))
	for i, n := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started[i], errs[i] = startCluster(n)
		}()
	}
	wg.Wait()
	code := 1
	defer func() {
		for _, c := range started {
			if c != nil {
				_ = c.env.Stop()
			}
		}
		os.Exit(code)
	}()
	for _, err := range errs {
		if err != nil {
			fmt.Println("starting API servers:", err)
			return
		}
	}
	hubEnv = started[0]
	for i, n := range names {
		workers[n] = started[i+1]
	}
	if err := setUp(); err != nil {
		fmt.Println("setting up clusters:", err)
		return
	}
	code = m.Run()
}

func zapLevel() zapcore.Level {
	if os.Getenv("GANTRY_TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// moduleDir is where the Go module of that path is, in the module cache.
func moduleDir(path string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", path).Output()
	if err != nil {
		return "", fmt.Errorf("finding the module %s: %w", path, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// jobSetCRDs is the directory of the JobSet CRD in its Go module.
func jobSetCRDs() (string, error) {
	dir, err := moduleDir("sigs.k8s.io/jobset")
	return filepath.Join(dir, "config", "components", "crd", "bases"), err
}

// startCluster starts one API server with Gantry's CRDs, OCM's Placement CRDs on the hub, and the
// JobSet, KubeRay and Kubeflow trainer CRDs on the hub and on jobSetWorker (the other worker has none, as a cluster
// without them would), which also serves the PodGroup API.
func startCluster(name string) (*cluster, error) {
	crds := []string{filepath.Join(repoRoot(), "deploy", "crd")}
	if name == "hub" {
		dir, err := moduleDir("open-cluster-management.io/api")
		if err != nil {
			return nil, err
		}
		crds = append(crds, filepath.Join(dir, "cluster", "v1beta1")) // Placements and PlacementDecisions
	}
	if name == "hub" || name == jobSetWorker {
		dir, err := jobSetCRDs()
		if err != nil {
			return nil, err
		}
		rayDir, err := moduleDir("github.com/ray-project/kuberay/ray-operator")
		if err != nil {
			return nil, err
		}
		trainerDir, err := moduleDir("github.com/kubeflow/trainer/v2")
		if err != nil {
			return nil, err
		}
		crds = append(crds, dir, filepath.Join(rayDir, "config", "crd", "bases"), filepath.Join(trainerDir, "manifests", "base", "crds"))
	}
	env := &envtest.Environment{CRDDirectoryPaths: crds, ErrorIfCRDPathMissing: true}
	if name == jobSetWorker {
		// A worker whose scheduler can bind gangs: it serves the PodGroup API.
		api := env.ControlPlane.GetAPIServer().Configure()
		api.Append("runtime-config", "scheduling.k8s.io/v1beta1=true")
		api.Append("feature-gates", "GenericWorkload=true")
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // Start can fail after its processes came up (installing CRDs)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &cluster{name: name, env: env, cfg: cfg, client: c}, nil
}

// setUp installs the hub's admission policy, registers both workers, gives each worker GPU nodes and
// starts an agent on each.
func setUp() error {
	ctx := context.Background()
	if err := applyFile(ctx, hubEnv.client, filepath.Join(repoRoot(), "deploy", "hub", "job-admission-policy.yaml")); err != nil {
		return err
	}
	if err := hubEnv.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNamespace}}); err != nil {
		return err
	}
	if err := waitForJobPolicy(ctx); err != nil {
		return err
	}
	for _, n := range names {
		if err := register(ctx, workers[n]); err != nil {
			return err
		}
		stop, err := startAgent(context.Background(), workers[n])
		if err != nil {
			return err
		}
		agentStops[n] = stop
	}
	return nil
}

// register makes w a worker of the hub (a kubeconfig Secret and a WorkerCluster) with two GPU nodes.
func register(ctx context.Context, w *cluster) error {
	kc, err := testcluster.Kubeconfig(w.cfg)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.name + "-kubeconfig", Namespace: hubNamespace},
		Data: map[string][]byte{workerconfig.SecretKey: kc}}
	if err := hubEnv.client.Create(ctx, secret); err != nil {
		return err
	}
	if err := hubEnv.client.Create(ctx, hubtest.MakeWorkerCluster(w.name).KubeconfigSecret(secret.Name).Obj()); err != nil {
		return err
	}
	for i := 0; i < 2; i++ {
		if err := testcluster.CreateGPUNode(ctx, w.client, fmt.Sprintf("%s-gpu-%d", w.name, i), 8); err != nil {
			return err
		}
	}
	return nil
}

// waitForJobPolicy waits until the API server applies the admission policy it was just given, probing
// with dry-run creates.
func waitForJobPolicy(ctx context.Context) error {
	probe := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "policy-probe", Namespace: hubNamespace, Labels: map[string]string{gantry.QueueLabel: "probe"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "i"}},
		}}},
	}
	for i := 0; i < 200; i++ {
		p := probe.DeepCopy()
		if err := hubEnv.client.Create(ctx, p, client.DryRunAll); err != nil {
			return err
		}
		if ptr.Deref(p.Spec.ManagedBy, "") == gantry.JobManagedBy {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the job admission policy did not take effect")
}

// agentRediscovery is how often the suite's agents look for APIs their worker did not serve yet: a
// test that installs one waits this long, not DefaultRediscoveryInterval.
const agentRediscovery = 2 * time.Second

// startAgent runs an agent on w until ctx ends.
func startAgent(ctx context.Context, w *cluster) (stop func(), err error) {
	mgr, err := ctrl.NewManager(w.cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: agentcontroller.CacheOptions(w.name),
	})
	if err != nil {
		return nil, err
	}
	r, err := agentcontroller.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("gantry-agent"), clock.RealClock{}, agentcontroller.Options{ClusterName: w.name, RediscoveryInterval: agentRediscovery})
	if err != nil {
		return nil, err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Println("agent stopped:", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// agentStops stop the agents setUp started, by worker.
var agentStops = map[string]func(){}

// runningHubs counts the hubs started and not yet stopped, so that a test's cleanup knows whether one
// is there to finish what it deleted.
var runningHubs atomic.Int32

// runningHub is a hub started by a test.
type runningHub struct {
	hub    *hub.Hub
	cancel context.CancelFunc
	done   chan struct{}
}

// startHub starts a hub in-process and waits until it is connected to both workers; the test stops it
// at cleanup, or earlier with stop.
func startHub(t *testing.T) *runningHub {
	t.Helper()
	return startHubWith(t, hub.Options{}, names...)
}

// startHubWith starts a hub with the options (namespace and connection options filled in) and waits
// until it is connected to the named workers.
func startHubWith(t *testing.T, opts hub.Options, connected ...string) *runningHub {
	t.Helper()
	if opts.Templates == nil {
		opts.Templates = jobs.NewTemplates(jobs.TemplatesKept)
	}
	mgr, err := ctrl.NewManager(hubEnv.cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		// As gantry-hub caches Jobs: without their pod templates, of which it keeps the newest.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{&batchv1.Job{}: {Transform: opts.Templates.Trim}}},
		// Tests start a hub many times in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	opts.Namespace, opts.Remote = hubNamespace, remote.Options{QPS: 500, Burst: 1000, AllowLoopback: true}
	h, err := hub.Setup(mgr, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rh := &runningHub{hub: h, cancel: cancel, done: make(chan struct{})}
	runningHubs.Add(1)
	go func() {
		defer close(rh.done)
		defer runningHubs.Add(-1)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("hub stopped: %v", err)
		}
		h.Connections.DisconnectAll()
	}()
	t.Cleanup(rh.stop)
	eventually(t, fmt.Sprintf("hub connected to %v", connected), func() error {
		for _, n := range connected {
			if !h.Connections.IsConnected(n) {
				return fmt.Errorf("%s not connected", n)
			}
		}
		return nil
	})
	return rh
}

func (h *runningHub) stop() {
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
	}
}

// applyFile creates every object of a multi-document YAML file.
func applyFile(ctx context.Context, c client.Client, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	objs, err := manifest.Decode(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, u := range objs {
		if err := c.Create(ctx, u); err != nil {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

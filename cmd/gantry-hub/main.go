// Command gantry-hub runs the hub: it queues Jobs submitted to the hub cluster and dispatches each to
// exactly one worker cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ocm "open-cluster-management.io/api/cluster/v1beta1"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub"
	"github.com/gantry-dev/gantry/hub/endpoint"
	"github.com/gantry-dev/gantry/hub/jobs"
	"github.com/gantry-dev/gantry/hub/metrics"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/internal/leadership"
	"github.com/gantry-dev/gantry/internal/memlimit"
	"github.com/gantry-dev/gantry/internal/metricsendpoint"
	"github.com/gantry-dev/gantry/internal/version"
	"github.com/gantry-dev/gantry/jobkind"
)

func main() {
	var (
		kubeconfig     string
		namespace      string
		metricsFlags   metricsendpoint.Flags
		perQueue       bool
		probeAddr      string
		pprofAddr      string
		leaderElect    bool
		qps            float64
		burst          int
		remoteQPS      float64
		remoteBurst    int
		allowInsecure  bool
		allowLoopback  bool
		workloadWorker int
		showVersion    bool
		providerFile   string
		endpointOpts   endpoint.Options
		election       = leadership.DefaultTiming
	)
	// An own flag set: controller-runtime registers --kubeconfig on the global one.
	fs := flag.NewFlagSet("gantry-hub", flag.ExitOnError)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig of the hub cluster; in-cluster configuration when empty.")
	fs.StringVar(&namespace, "namespace", "gantry-system", "Namespace of the workers' kubeconfig Secrets and of the leader election lease.")
	metricsFlags.Bind(fs)
	fs.BoolVar(&perQueue, "metrics-per-queue", false, "Also export each namespace's Queues (gantry_hub_queue_workloads): a series per Queue, for tenants' dashboards.")
	fs.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	fs.StringVar(&pprofAddr, "pprof-bind-address", "", "Address of the Go profiling endpoints (/debug/pprof); empty disables them.")
	fs.BoolVar(&leaderElect, "leader-elect", true, "Elect a leader with a Lease in --namespace, so that only one hub replica dispatches and writes to workers at a time.")
	fs.Float64Var(&qps, "kube-api-qps", 500, "Queries per second to the hub's API server.")
	fs.IntVar(&burst, "kube-api-burst", 1000, "Burst of queries to the hub's API server.")
	fs.Float64Var(&remoteQPS, "worker-api-qps", 500, "Queries per second to each worker's API server.")
	fs.IntVar(&remoteBurst, "worker-api-burst", 1000, "Burst of queries to each worker's API server.")
	fs.BoolVar(&allowInsecure, "allow-insecure-kubeconfigs", false, "Accept worker kubeconfigs that read local files, run exec or auth-provider plugins, skip TLS verification, use http, basic auth, a proxy or impersonation.")
	fs.BoolVar(&allowLoopback, "allow-loopback-workers", false, "Accept workers whose API server is on a loopback address (127.0.0.0/8, ::1, localhost), as local testbeds have.")
	fs.IntVar(&workloadWorker, "workload-workers", 32, "Workloads synced with workers in parallel.")
	fs.StringVar(&providerFile, "clusterprofile-provider-file", "", "JSON file of the access providers (name and credential plugin) through which the hub reaches "+
		"WorkerClusters registered with a ClusterProfile; empty: such WorkerClusters are not connected.")
	fs.BoolVar(&showVersion, "version", false, "Print the version and commit and exit.")
	election.BindFlags(fs)
	bindEndpointFlags(fs, &endpointOpts)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if showVersion {
		fmt.Println(version.String("gantry-hub"))
		return
	}
	if err := endpointOpts.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "gantry-hub:", err)
		os.Exit(2)
	}
	providers := loadProviders(providerFile)
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	memlimit.Setup(log)
	crmetrics.Registry.MustRegister(version.BuildInfo("gantry-hub"))

	hubVersion, _ := version.Get()
	if err := run(kubeconfig, namespace, metricsFlags.Options(), probeAddr, pprofAddr, leaderElect, election, qps, burst, endpointOpts,
		hub.Options{
			Namespace:       namespace,
			Version:         hubVersion,
			MetricsPerQueue: perQueue,
			WorkloadWorkers: workloadWorker,
			Providers:       providers,
			Remote: remote.Options{AllowInsecureKubeconfigs: allowInsecure, AllowLoopback: allowLoopback,
				QPS: float32(remoteQPS), Burst: remoteBurst},
			Templates: jobs.NewTemplates(jobs.TemplatesKept),
		}); err != nil {
		log.Error(err, "Hub stopped")
		os.Exit(1)
	}
}

// loadProviders reads --clusterprofile-provider-file, if given; a file that cannot be used ends the hub.
func loadProviders(file string) *remote.Providers {
	if file == "" {
		return nil
	}
	providers, err := remote.LoadProviders(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gantry-hub: --clusterprofile-provider-file:", err)
		os.Exit(2)
	}
	return providers
}

func run(kubeconfig, namespace string, metricsOpts metricsserver.Options, probeAddr, pprofAddr string, leaderElect bool, timing leadership.Timing,
	qps float64, burst int, endpointOpts endpoint.Options, opts hub.Options) error {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	// The hub's own API server is in its cluster: no gzip, which costs CPU at both ends. Connections to
	// workers, which may cross slower links, keep it.
	cfg.DisableCompression = true
	// Inside the Guard (wrapped below), so that only the writes sent are counted.
	cfg = remote.CountWrites(cfg, metrics.TargetHub, "")
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gantry.AddToScheme, jobkind.AddToScheme,
		inventory.AddToScheme, ocm.Install} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	unguarded := cfg
	var election *leadership.Election
	if leaderElect {
		// A replica that lost the lease while paused writes nothing when it wakes, to the hub or a worker.
		if election, err = leadership.NewElection(cfg, namespace, "gantry-hub", timing); err != nil {
			return err
		}
		ctrl.Log.WithName("setup").Info("Leader election", "identity", election.Identity)
		cfg, opts.Remote.GuardWrites = election.Config, election.Guard.Wrap
	}
	byObject, err := namespacedKinds(cfg, scheme, namespace, opts.Templates)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, election.Apply(ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsOpts,
		HealthProbeBindAddress: probeAddr,
		PprofBindAddress:       pprofAddr,
		Cache: cache.Options{
			ByObject:         byObject,
			DefaultTransform: cache.TransformStripManagedFields(),
		},
	}))
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	h, err := hub.Setup(mgr, opts)
	if err != nil {
		return err
	}
	defer h.Connections.DisconnectAll()
	if err := addEndpoint(mgr, unguarded, endpointOpts, h); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("caches", cachesSynced(mgr.GetCache())); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// cachesSynced is ready once every informer of the cache has synced: a replica starting over a deep
// queue is not ready before it holds it.
func cachesSynced(c cache.Cache) healthz.Checker {
	var synced atomic.Bool
	return func(req *http.Request) error {
		if synced.Load() {
			return nil
		}
		ctx, cancel := context.WithTimeout(req.Context(), 50*time.Millisecond)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("caches not synced yet")
		}
		synced.Store(true)
		return nil
	}
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

// namespacedKinds restricts the cache to the hub's own namespace for what it may read only there:
// Secrets, and ClusterProfiles and PlacementDecisions where the hub serves them (a cache cannot be set
// up for a kind the API server does not serve, and the hub runs without them).
func namespacedKinds(cfg *rest.Config, scheme *runtime.Scheme, namespace string, templates *jobs.Templates) (map[client.Object]cache.ByObject, error) {
	own := cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}}}
	// Queued Jobs are most of what the hub holds: the cache keeps them without their pod templates,
	// which templates keeps of the newest jobs only.
	out := map[client.Object]cache.ByObject{&corev1.Secret{}: own, &batchv1.Job{}: {Transform: templates.Trim}}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	for obj, gvk := range map[client.Object]schema.GroupVersionKind{
		&inventory.ClusterProfile{}: inventory.GroupVersion.WithKind("ClusterProfile"),
		&ocm.PlacementDecision{}:    schema.GroupVersion(ocm.GroupVersion).WithKind("PlacementDecision"),
	} {
		ok, err := hub.Serves(scheme, mapper, gvk)
		if err != nil {
			return nil, err
		}
		if ok {
			out[obj] = own
		}
	}
	return out, nil
}

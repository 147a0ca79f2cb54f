// Command gantry-agent runs in each worker cluster: it admits the Workload copies the Gantry hub
// dispatches to the cluster and publishes the cluster's CapacityReport. See package
// github.com/gantry-dev/gantry/agent/controller.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gantry-dev/gantry/agent/controller"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/kueue"
	"github.com/gantry-dev/gantry/internal/leadership"
	"github.com/gantry-dev/gantry/internal/memlimit"
	"github.com/gantry-dev/gantry/internal/metricsendpoint"
	"github.com/gantry-dev/gantry/internal/version"
	"github.com/gantry-dev/gantry/jobkind"
)

// leaderElectionID names the Lease the agent's replicas compete for in --namespace.
const leaderElectionID = "gantry-agent.gantry.dev"

type options struct {
	kubeconfig   string
	namespace    string
	clusterName  string
	metrics      metricsendpoint.Flags
	probeAddr    string
	pprofAddr    string
	leaderElect  bool
	election     leadership.Timing
	kubeAPIQPS   float64
	kubeAPIBurst int
	reservation  time.Duration
	starvation   time.Duration
	placement    time.Duration
	passGap      time.Duration
	zap          zap.Options
	version      bool
}

func parseFlags(args []string) (*options, error) {
	o := &options{election: leadership.DefaultTiming}
	fs := flag.NewFlagSet("gantry-agent", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "",
		"Kubeconfig of the worker cluster the agent runs in. When absent, the in-cluster configuration is used.")
	fs.StringVar(&o.namespace, "namespace", "gantry-system",
		"Namespace of the agent's leader-election Lease.")
	fs.StringVar(&o.clusterName, "cluster-name", "",
		"Name of this cluster as registered on the hub (its WorkerCluster). Names the CapacityReport. Required.")
	o.metrics.Bind(fs)
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "",
		"Address of the Go profiling endpoints (/debug/pprof); empty disables them.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081",
		"Address the /healthz and /readyz endpoints bind to.")
	fs.BoolVar(&o.leaderElect, "leader-elect", true,
		"Elect a leader among the agent's replicas with a Lease in --namespace, so that only one admits at a time.")
	o.election.BindFlags(fs)
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", 200,
		"Queries per second to the cluster's API server. Admission writes must not wait on the client's rate limit.")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 400,
		"Burst of queries to the cluster's API server.")
	fs.DurationVar(&o.reservation, "reservation-ttl", controller.DefaultReservationTTL,
		"How long an admitted copy holds its room while the hub creates no Job for it; 0 holds it until the hub withdraws the copy.")
	fs.DurationVar(&o.starvation, "starvation-timeout", controller.DefaultStarvationTimeout,
		"How long a job that does not fit may be passed by later, smaller ones before the nodes it could use are held for it; 0 never holds them.")
	fs.DurationVar(&o.placement, "placement-timeout", controller.DefaultPlacementTimeout,
		"How long after its Job was created an admitted job may still have pods not on nodes before the agent gives it up and the hub dispatches it again; 0 waits for ever.")
	fs.DurationVar(&o.passGap, "pass-gap", controller.DefaultPassGap,
		"Least time between admission passes beyond four in a row: a burst's changes are taken in passes that each act on many; a job's own few changes wait for none. 0 for no gap.")
	fs.BoolVar(&o.version, "version", false,
		"Print the version and commit and exit.")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.version {
		return o, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if o.clusterName == "" {
		return nil, errors.New("--cluster-name is required: the name this cluster is registered under on the hub")
	}
	if errs := validation.IsDNS1123Subdomain(o.clusterName); len(errs) > 0 {
		return nil, fmt.Errorf("--cluster-name %q is not a valid object name: %s", o.clusterName, strings.Join(errs, "; "))
	}
	if o.leaderElect && o.namespace == "" {
		return nil, errors.New("--namespace must not be empty when --leader-elect is set")
	}
	if o.kubeAPIQPS <= 0 || o.kubeAPIBurst <= 0 {
		return nil, errors.New("--kube-api-qps and --kube-api-burst must be positive")
	}
	return o, nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig given and not running in a cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

func run(o *options) error {
	logger := zap.New(zap.UseFlagOptions(&o.zap))
	ctrllog.SetLogger(logger)
	klog.SetLogger(logger)
	setupLog := logger.WithName("setup")
	memlimit.Setup(setupLog)
	crmetrics.Registry.MustRegister(version.BuildInfo("gantry-agent"))

	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS = float32(o.kubeAPIQPS)
	cfg.Burst = o.kubeAPIBurst
	cfg.UserAgent = "gantry-agent"
	// The agent talks to its own cluster's API server: gzip would cost CPU at both ends for no slow link
	// (it was 8% of the agent's CPU in a burst, decompressing watch streams).
	cfg.DisableCompression = true

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gantryv1beta1.AddToScheme, jobkind.AddToScheme, kueue.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}

	var election *leadership.Election
	if o.leaderElect {
		// A replica that lost the lease while paused admits nothing when it wakes.
		if election, err = leadership.NewElection(cfg, o.namespace, leaderElectionID, o.election); err != nil {
			return err
		}
		setupLog.Info("Leader election", "identity", election.Identity)
		cfg = election.Config
	}
	mgr, err := manager.New(cfg, election.Apply(manager.Options{
		Scheme:                 scheme,
		Cache:                  controller.CacheOptions(o.clusterName),
		Metrics:                o.metrics.Options(),
		HealthProbeBindAddress: o.probeAddr,
		PprofBindAddress:       o.pprofAddr,
	}))
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}

	agentVersion, _ := version.Get()
	r, err := controller.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder(controller.ControllerName), clock.RealClock{},
		controller.Options{ClusterName: o.clusterName, Version: agentVersion, ReservationTTL: o.reservation, StarvationTimeout: o.starvation, PlacementTimeout: o.placement,
			PassGap: passGapOption(o.passGap)})
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the agent controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("informer caches are not synced")
		}
		return nil
	}); err != nil {
		return err
	}

	setupLog.Info("Starting gantry-agent", "cluster", o.clusterName, "leaderElect", o.leaderElect, "namespace", o.namespace)
	if err := mgr.Start(signals.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err == nil && o.version {
		fmt.Println(version.String("gantry-agent"))
		return
	}
	if err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gantry-agent: %v\n", err)
		os.Exit(1)
	}
}

// passGapOption turns the flag's 0 (no gap) into the Options' negative; Options take 0 for the default.
func passGapOption(gap time.Duration) time.Duration {
	if gap == 0 {
		return -1
	}
	return gap
}

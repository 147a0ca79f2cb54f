// Package hub wires the hub's controllers: Jobs become Workloads, the dispatcher decides where they go,
// the workload controller carries the decisions out on the workers, and the workercluster controller
// keeps the workers connected.
package hub

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ocm "open-cluster-management.io/api/cluster/v1beta1"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/dispatcher"
	"github.com/gantry-dev/gantry/hub/jobs"
	"github.com/gantry-dev/gantry/hub/metrics"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/hub/usage"
	"github.com/gantry-dev/gantry/hub/workercluster"
	"github.com/gantry-dev/gantry/hub/workerclusterset"
	"github.com/gantry-dev/gantry/hub/workload"
	"github.com/gantry-dev/gantry/jobkind"
)

// Options configure the hub.
type Options struct {
	// Namespace holds the workers' kubeconfig Secrets.
	Namespace string
	// Version is the hub's version, which each agent's is checked against (the version-skew policy).
	Version string
	// MetricsPerQueue also exports each namespace's Queues (--metrics-per-queue).
	MetricsPerQueue bool
	// Remote tunes connections to workers.
	Remote remote.Options
	// Providers are the access providers of ClusterProfiles (--clusterprofile-provider-file); nil when
	// the hub has none.
	Providers *remote.Providers
	// WorkloadWorkers and JobWorkers are the controllers' parallel reconciles.
	WorkloadWorkers int
	JobWorkers      int
	Clock           clock.WithTicker
	// Templates are the pod templates the cache's transform of Jobs kept (Templates.Trim); nil: every
	// job's pods are read from the API server.
	Templates *jobs.Templates
}

// Hub is the wired hub; Connections is exposed for tests and for shutdown.
type Hub struct {
	Connections *remote.Manager
	Dispatcher  *dispatcher.Dispatcher
	// Access makes the workers' client configs; the endpoint's connections use it too.
	Access *remote.Access

	client         client.Client
	workloadEvents chan event.GenericEvent
	reportEvents   chan event.GenericEvent
}

// Setup registers every hub controller with the manager.
func Setup(mgr ctrl.Manager, opts Options) (*Hub, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.WorkloadWorkers < 1 {
		opts.WorkloadWorkers = 32
	}
	if opts.JobWorkers < 1 {
		opts.JobWorkers = 16
	}
	if opts.Remote.Clock == nil {
		opts.Remote.Clock = opts.Clock
	}
	timeline := metrics.NewTimeline()
	h := &Hub{
		Connections:    remote.NewManager(mgr.GetScheme(), opts.Remote),
		client:         mgr.GetClient(),
		workloadEvents: make(chan event.GenericEvent, 4096),
		reportEvents:   make(chan event.GenericEvent, 256),
	}
	h.Dispatcher = &dispatcher.Dispatcher{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Workers:   h.Connections,
		Recorder:  mgr.GetEventRecorder("gantry-dispatcher"),
		Clock:     opts.Clock,
		Timeline:  timeline,
	}
	h.Connections.SetHandler(h)
	recorder := mgr.GetEventRecorder("gantry-hub")

	if err := setupJobs(mgr, recorder, opts.JobWorkers, opts.Templates); err != nil {
		return nil, err
	}
	leases := &remote.LeaseRenewer{Workers: h.Connections, Failovers: failovers{mgr.GetClient()}, Clock: opts.Clock}
	if err := mgr.Add(leases); err != nil {
		return nil, err
	}
	if err := (&workload.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Templates: opts.Templates, Workers: h.Connections, Leases: leases,
		Recorder: recorder, Remote: h.workloadEvents, Clock: opts.Clock, Timeline: timeline,
	}).SetupWithManager(mgr, opts.WorkloadWorkers); err != nil {
		return nil, fmt.Errorf("setting up the workload controller: %w", err)
	}
	watchProfiles, err := servesClusterProfiles(mgr)
	if err != nil {
		return nil, err
	}
	h.Access = &remote.Access{
		Hub: mgr.GetClient(), Profiles: mgr.GetClient(), Namespace: opts.Namespace, Providers: opts.Providers, HubHost: mgr.GetConfig().Host,
		Policy: opts.Remote.Policy(),
	}
	if !watchProfiles {
		// Read when asked, so that a WorkerCluster says what is missing, and a CRD installed later works.
		h.Access.Profiles = mgr.GetAPIReader()
	}
	if err := (&workercluster.Reconciler{
		Client: mgr.GetClient(), Access: h.Access, Connections: h.Connections,
		Clock: opts.Clock, Reports: h.reportEvents, WatchProfiles: watchProfiles, HubVersion: opts.Version,
	}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the workercluster controller: %w", err)
	}
	if err := h.setupSets(mgr, opts, watchProfiles); err != nil {
		return nil, err
	}
	if err := (&usage.Reconciler{Client: mgr.GetClient(), Clock: opts.Clock}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the usage controller: %w", err)
	}
	if err := mgr.Add(h.Dispatcher); err != nil {
		return nil, err
	}
	if err := h.registerMetrics(mgr, leases, opts.Clock, opts.MetricsPerQueue); err != nil {
		return nil, err
	}
	if err := h.watch(mgr); err != nil {
		return nil, err
	}
	return h, nil
}

// watch asks for a dispatch pass on any change the dispatcher decides over, feeding it the Workloads'
// changes, and requeues the Workloads
// of a cluster fenced or unfenced.
func (h *Hub) watch(mgr ctrl.Manager) error {
	// Any change the dispatcher decides over asks for a pass; the queues' statuses it writes itself do not.
	trigger := toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { h.Dispatcher.Trigger() },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(client.Object)
			n, ok2 := newObj.(client.Object)
			if !ok1 || !ok2 || dispatcher.ChangesAPass(o, n) {
				h.Dispatcher.Trigger()
			}
		},
		DeleteFunc: func(any) { h.Dispatcher.Trigger() },
	}
	wlInformer, err := mgr.GetCache().GetInformer(context.Background(), &gantry.Workload{})
	if err != nil {
		return fmt.Errorf("watching Workloads: %w", err)
	}
	if err := h.Dispatcher.Follow(wlInformer); err != nil {
		return err
	}
	for _, obj := range []client.Object{&gantry.GlobalQueue{}, &gantry.Queue{}, &gantry.Cohort{}, &gantry.WorkerCluster{}, &corev1.Namespace{}} {
		inf, err := mgr.GetCache().GetInformer(context.Background(), obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(trigger); err != nil {
			return err
		}
	}
	// A cluster fenced or unfenced changes what its Workloads may do.
	wcInformer, err := mgr.GetCache().GetInformer(context.Background(), &gantry.WorkerCluster{})
	if err != nil {
		return fmt.Errorf("watching WorkerClusters: %w", err)
	}
	if _, err := wcInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
		o, ok1 := oldObj.(*gantry.WorkerCluster)
		n, ok2 := newObj.(*gantry.WorkerCluster)
		if ok1 && ok2 && o.Spec.Fenced != n.Spec.Fenced {
			go h.requeueWorkloadsOf(n.Name)
		}
	}}); err != nil {
		return err
	}
	return nil
}

// registerMetrics registers the Collector of the fleet's state, read from the hub's caches and the
// connections at scrape time.
func (h *Hub) registerMetrics(mgr ctrl.Manager, leases *remote.LeaseRenewer, clk clock.PassiveClock, perQueue bool) error {
	err := metrics.Register(crmetrics.Registry, metrics.NewCollector(metrics.Source{
		Reader: mgr.GetCache(), Leading: leading(mgr.Elected()), Clock: clk,
		Connected: h.Connections.IsConnected, LastContact: h.Connections.LastContact, LeaseRenewed: leases.RenewedAt,
		PerQueue: perQueue,
	}))
	if err != nil {
		return fmt.Errorf("registering the hub's metrics: %w", err)
	}
	return nil
}

// leading tells whether the channel of the manager's election is closed: this replica leads.
func leading(elected <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-elected:
			return true
		default:
			return false
		}
	}
}

// WorkerObjectChanged requeues the hub Workload of a changed copy or Job on a worker; a copy's change may
// be an admission, so it also asks for a dispatch pass.
func (h *Hub) WorkerObjectChanged(_ string, obj client.Object) {
	key := workload.KeyForWorkerObject(obj)
	h.workloadEvents <- event.GenericEvent{Object: objectWithKey(key)}
	if _, isCopy := obj.(*gantry.Workload); isCopy {
		h.Dispatcher.Trigger()
	}
}

// CapacityReportChanged requeues the WorkerCluster.
func (h *Hub) CapacityReportChanged(cluster string) {
	wc := &gantry.WorkerCluster{}
	wc.Name = cluster
	h.reportEvents <- event.GenericEvent{Object: wc}
}

// ConnectionChanged asks for a dispatch pass and requeues the Workloads that involve the cluster, so
// that copies and Jobs pending on it are created once it is back.
func (h *Hub) ConnectionChanged(cluster string) {
	h.Dispatcher.Trigger()
	go h.requeueWorkloadsOf(cluster)
}

// requeueWorkloadsOf requeues the Workloads whose winner or nomination is the cluster.
func (h *Hub) requeueWorkloadsOf(cluster string) {
	for _, req := range workload.RequestsForCluster(context.Background(), h.client, cluster) {
		h.workloadEvents <- event.GenericEvent{Object: objectWithKey(req.NamespacedName)}
	}
}

func objectWithKey(key types.NamespacedName) client.Object {
	wl := &gantry.Workload{}
	wl.Namespace, wl.Name = key.Namespace, key.Name
	return wl
}

// failovers reads each WorkerCluster's failover spec from the hub's cache.
type failovers struct{ c client.Client }

func (f failovers) Failover(cluster string) (gantry.Failover, bool) {
	var wc gantry.WorkerCluster
	if err := f.c.Get(context.Background(), types.NamespacedName{Name: cluster}, &wc); err != nil {
		return gantry.Failover{}, false
	}
	return wc.Spec.Failover, true
}

// setupSets registers the WorkerClusterSet controller; it watches ClusterProfiles and OCM's
// PlacementDecisions where the hub serves them, and reads them from the API server otherwise.
func (h *Hub) setupSets(mgr ctrl.Manager, opts Options, watchProfiles bool) error {
	watchDecisions, err := serves(mgr, schema.GroupVersion(ocm.GroupVersion).WithKind("PlacementDecision"))
	if err != nil {
		return err
	}
	r := &workerclusterset.Reconciler{Client: mgr.GetClient(), Profiles: h.Access.Profiles, Decisions: mgr.GetAPIReader(),
		WatchProfiles: watchProfiles, WatchDecisions: watchDecisions, Namespace: opts.Namespace, Clock: opts.Clock}
	if watchDecisions {
		r.Decisions = mgr.GetClient()
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the workerclusterset controller: %w", err)
	}
	return nil
}

// setupJobs registers a job controller for each kind of job the hub takes.
func setupJobs(mgr ctrl.Manager, recorder events.EventRecorder, workers int, templates *jobs.Templates) error {
	kinds, err := ServedKinds(mgr)
	if err != nil {
		return err
	}
	for _, k := range kinds {
		r := &jobs.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Templates: templates, Recorder: recorder, Kind: k}
		if err := r.SetupWithManager(mgr, workers); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", k.Name(), err)
		}
	}
	return nil
}

// ServedKinds are the kinds of jobs the hub takes: batch Jobs, and each other kind whose API the hub's
// API server serves and the hub's scheme knows. A kind installed later is taken after a restart.
func ServedKinds(mgr ctrl.Manager) ([]jobkind.Kind, error) {
	var out []jobkind.Kind
	for _, k := range jobkind.All() {
		ok, err := serves(mgr, k.GroupVersionKind())
		if err != nil {
			return nil, err
		}
		if ok || k.Name() == gantry.JobKindJob {
			out = append(out, k)
		}
	}
	return out, nil
}

// servesClusterProfiles says whether the hub's API server serves ClusterProfiles and the hub's scheme
// knows them. Without them the hub works as before and does not watch them.
func servesClusterProfiles(mgr ctrl.Manager) (bool, error) {
	return serves(mgr, inventory.GroupVersion.WithKind("ClusterProfile"))
}

// serves says whether the hub's API server serves the kind and the hub's scheme knows it.
func serves(mgr ctrl.Manager, gvk schema.GroupVersionKind) (bool, error) {
	return Serves(mgr.GetScheme(), mgr.GetRESTMapper(), gvk)
}

// Serves says whether the API server the mapper reads serves the kind and the scheme knows it: the one
// test of whether the hub takes a kind that may not be installed.
func Serves(scheme *runtime.Scheme, mapper apimeta.RESTMapper, gvk schema.GroupVersionKind) (bool, error) {
	if !scheme.Recognizes(gvk) {
		return false, nil
	}
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case err == nil:
		return true, nil
	case apimeta.IsNoMatchError(err):
		return false, nil
	}
	return false, fmt.Errorf("looking up the %s API: %w", gvk.Kind, err)
}

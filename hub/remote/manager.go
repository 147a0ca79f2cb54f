// Package remote holds the hub's connections to worker clusters. All of them are made, watched, health
// checked and dropped here, so the rest of the hub only asks for a connected cluster by name.
package remote

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/metrics"
	"github.com/gantry-dev/gantry/internal/workerconfig"
	"github.com/gantry-dev/gantry/jobkind"
)

// Options tune connections.
type Options struct {
	// AllowInsecureKubeconfigs lets kubeconfigs read local files, run exec plugins, skip TLS
	// verification and the rest of Policy.AllowInsecure.
	AllowInsecureKubeconfigs bool
	// AllowLoopback accepts workers whose API server is on a loopback address (127.0.0.0/8, ::1,
	// localhost), as local testbeds and tests have. Off, a kubeconfig cannot point the hub at services
	// on its own host.
	AllowLoopback bool
	// QPS and Burst of each worker client.
	QPS   float32
	Burst int
	// SyncTimeout bounds the wait for a new connection's caches.
	SyncTimeout time.Duration
	// GuardWrites, when set, wraps the config of every worker client, so that a hub replica that may
	// have lost its leader lease writes nothing to workers (leadership.Guard.Wrap).
	GuardWrites func(*rest.Config) *rest.Config
	// Clock stamps the last contact with each worker; nil is the real clock.
	Clock clock.PassiveClock
}

// Policy is the kubeconfig policy of the options.
func (o Options) Policy() workerconfig.Policy {
	return workerconfig.Policy{AllowInsecure: o.AllowInsecureKubeconfigs, AllowLoopback: o.AllowLoopback}
}

// Handler is told about changes on workers.
type Handler interface {
	// WorkerObjectChanged is called for every change of a copy or a Job that Gantry created on a worker.
	WorkerObjectChanged(cluster string, obj client.Object)
	// CapacityReportChanged is called when a worker's capacity report changes.
	CapacityReportChanged(cluster string)
	// ConnectionChanged is called when a cluster connects or disconnects.
	ConnectionChanged(cluster string)
}

// Cluster is a live connection to one worker.
type Cluster struct {
	Name string
	// Client reads copies, Gantry's Jobs and capacity reports from the connection's cache and writes
	// straight to the worker's API server.
	Client client.Client
	// Reader reads straight from the worker's API server.
	Reader client.Reader

	config    *rest.Config
	discovery discovery.DiscoveryInterface
	authz     authorizationv1client.AuthorizationV1Interface
	source    string // version of the Target it was made from
	cancel    context.CancelFunc
	// identity is the UID of the cluster's kube-system namespace, the same through every address and
	// credential; empty when the hub may not read it.
	identity types.UID
	// kinds are the kinds of jobs the worker serves, found on connecting.
	kinds map[gantry.JobKind]bool
	// copies and jobs are the stores of the cache's informers, read in place by HoldsCopy and HoldsJob;
	// nil when the cache's informer does not expose its store (both then answer true).
	copies toolscache.Store
	jobs   map[gantry.JobKind]toolscache.Store

	mu     sync.Mutex
	rights Rights // what the worker's authorizer said at the last review
	// grantedRules are the rules the last review listed; nil before one succeeded.
	grantedRules []rbacv1.PolicyRule
	reviewed     bool  // a review succeeded on this connection
	denied       error // the first 401 or 403 an informer met; the next check drops the connection
}

// Worker is one connected worker cluster as the hub's controllers reach it. *Cluster is the real one;
// remotetest.Worker is an in-memory one for unit tests.
type Worker interface {
	// Cached reads from the connection's cache. It holds Gantry's copies, the Jobs labelled as Gantry's
	// and the capacity reports; anything else reads as NotFound.
	Cached() client.Reader
	// Live reads straight from the worker's API server, any object the hub may read.
	Live() client.Reader
	// Writer writes to the worker's API server.
	Writer() client.Writer
	// Serves says whether the worker serves the kind of job: batch Jobs always, other kinds when their
	// API was found on connecting; Kinds lists them.
	Serves(kind gantry.JobKind) bool
	Kinds() []gantry.JobKind
	// CopyInPlace is the Workload copy under the key as the cache holds it, not copied: the caller must
	// not change it. Nil when the cache holds none. The dispatcher reads every nominated workload's
	// copies in every pass this way.
	CopyInPlace(key types.NamespacedName) *gantry.Workload
	// HoldsCopy and HoldsJob tell, without copying anything, whether the cache may hold the Workload
	// copy, or the job of the kind, under the key: false only when it surely does not. The hub looks for
	// a Workload's objects on the clusters it names and on those that hold some, not on every one.
	HoldsCopy(key types.NamespacedName) bool
	HoldsJob(kind gantry.JobKind, key types.NamespacedName) bool
}

// Cached implements Worker.
func (c *Cluster) Cached() client.Reader { return c.Client }

// Live implements Worker.
func (c *Cluster) Live() client.Reader { return c.Reader }

// Writer implements Worker.
func (c *Cluster) Writer() client.Writer { return c.Client }

// Serves implements Worker.
func (c *Cluster) Serves(kind gantry.JobKind) bool { return c.kinds[kind] }

// HoldsCopy implements Worker.
func (c *Cluster) HoldsCopy(key types.NamespacedName) bool { return holds(c.copies, key) }

// HoldsJob implements Worker.
func (c *Cluster) HoldsJob(kind gantry.JobKind, key types.NamespacedName) bool {
	if c.jobs == nil {
		return true // not watched through watch: nothing known
	}
	store, served := c.jobs[kind]
	return served && holds(store, key)
}

// CopyInPlace implements Worker.
func (c *Cluster) CopyInPlace(key types.NamespacedName) *gantry.Workload {
	if c.copies == nil {
		var cp gantry.Workload
		if c.Client.Get(context.Background(), key, &cp, client.UnsafeDisableDeepCopy) != nil {
			return nil
		}
		return &cp
	}
	obj, ok, err := c.copies.GetByKey(key.Namespace + "/" + key.Name)
	if !ok || err != nil {
		return nil
	}
	cp, _ := obj.(*gantry.Workload)
	return cp
}

// holds looks the key up in the store, as the cache's reader does, but copies nothing; a nil store
// may hold anything.
func holds(store toolscache.Store, key types.NamespacedName) bool {
	if store == nil {
		return true
	}
	_, ok, err := store.GetByKey(key.Namespace + "/" + key.Name)
	return ok || err != nil
}

// Kinds implements Worker.
func (c *Cluster) Kinds() []gantry.JobKind {
	var out []gantry.JobKind
	for _, k := range jobkind.All() {
		if c.kinds[k.Name()] {
			out = append(out, k.Name())
		}
	}
	return out
}

// Rights returns what the hub may do on the worker beyond deploy/worker/hub-access.yaml, as last
// reviewed (at connect, then at every health check).
func (c *Cluster) Rights() Rights {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rights
}

// review asks the worker again what the hub may do there. It fails when the worker refuses the hub's
// token, or the hub lacks a right of the allowlist. A review that could not be made keeps what the last
// one said, or, when none succeeded yet, says the rights are unknown.
func (c *Cluster) review(ctx context.Context) error {
	rights, granted, err := reviewRights(ctx, c.authz)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case apierrors.IsUnauthorized(err):
		return refusedToken()
	case err != nil && !c.reviewed:
		c.rights = Rights{Unknown: err.Error()}
		return nil
	case err != nil:
		return nil
	}
	c.rights, c.grantedRules, c.reviewed = rights, granted, true
	if len(rights.Missing) > 0 {
		return lacksRights(bounded(rights.Missing, maxListed))
	}
	return nil
}

// granted are the rules the last rights review listed.
func (c *Cluster) granted() []rbacv1.PolicyRule {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.grantedRules
}

// deny remembers the first time an informer was refused: a 401, or a 403 on its list or watch.
func (c *Cluster) deny(err error) {
	var denial error
	switch {
	case apierrors.IsUnauthorized(err):
		denial = refusedToken()
	case apierrors.IsForbidden(err):
		denial = lacksRights(err.Error())
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.denied == nil {
		c.denied = denial
	}
}

func (c *Cluster) deniedError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.denied
}

// errKindsChanged: the kinds of jobs the hub may run on the worker are no longer those its connection
// caches (a CRD installed or removed there, a rule granted or taken); the connection is made again.
var errKindsChanged = errors.New("the kinds of jobs the hub can run on the cluster changed")

// check health checks a live connection: no informer was refused, and the worker is ready, accepts the
// hub's token, lets the hub do what it needs and serves the kinds the connection caches. Its errors of
// access are the Unauthorized workerconfig.ConfigError.
func (c *Cluster) check(ctx context.Context) error {
	if err := c.deniedError(); err != nil {
		return err
	}
	if err := healthCheck(ctx, c); err != nil {
		return unauthorized(err)
	}
	if err := c.review(ctx); err != nil {
		return err
	}
	if kinds, err := servedKinds(ctx, c.discovery, c.authz, c.granted()); err == nil && !maps.Equal(kinds, c.kinds) {
		return errKindsChanged
	}
	return nil
}

// Manager keeps one connection per WorkerCluster.
type Manager struct {
	scheme  *runtime.Scheme
	opts    Options
	handler Handler

	mu       sync.RWMutex
	clusters map[string]*Cluster
	// contact is when each cluster was last reached: a connection made or a health check passed.
	contact map[string]time.Time
	// tried holds the clusters this process has tried to connect, whatever came of it.
	tried map[string]bool
}

// NewManager returns a manager without connections.
func NewManager(scheme *runtime.Scheme, opts Options) *Manager {
	if opts.SyncTimeout == 0 {
		opts.SyncTimeout = 30 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Manager{scheme: scheme, opts: opts, clusters: map[string]*Cluster{}, contact: map[string]time.Time{}, tried: map[string]bool{}}
}

// MarkTried records that this process tried to connect the cluster, whatever came of it.
func (m *Manager) MarkTried(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tried[name] = true
}

// Tried says whether this process has tried to connect the cluster: until then, that it is not
// connected says nothing about the cluster.
func (m *Manager) Tried(name string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.tried[name]
}

// LastContact is when the hub last reached the cluster: a connection made or a health check passed;
// zero when never. It outlives the connection, to say how long the cluster has been out of reach.
func (m *Manager) LastContact(name string) time.Time {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.contact[name]
}

func (m *Manager) contacted(name string) {
	now := m.opts.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.contact[name] = now
}

// SetHandler sets who hears about worker changes. Call it before the first Connect.
func (m *Manager) SetHandler(h Handler) { m.handler = h }

// Get returns the connected cluster of that name.
func (m *Manager) Get(name string) (*Cluster, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.clusters[name]
	return c, ok
}

// Worker returns the connected cluster of that name as a Worker.
func (m *Manager) Worker(name string) (Worker, bool) {
	c, ok := m.Get(name)
	if !ok {
		return nil, false
	}
	return c, true
}

// Connected lists the names of connected clusters.
func (m *Manager) Connected() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	names := make([]string, 0, len(m.clusters))
	for n := range m.clusters {
		names = append(names, n)
	}
	return names
}

// IsConnected says whether the named cluster has a live connection.
func (m *Manager) IsConnected(name string) bool {
	_, ok := m.Get(name)
	return ok
}

// Ensure makes sure the named cluster is connected through the target. A live connection made from
// the same target version is health checked and kept. A target whose server is the hub's own is refused
// before anything is dialed. A worker that refuses the hub's credentials, or does not grant the hub all
// of deploy/worker/hub-access.yaml, is not connected, or is dropped: a workerconfig.ConfigError with reason
// Unauthorized says which; a credential plugin that fails is one with reason CredentialPluginFailed.
func (m *Manager) Ensure(ctx context.Context, name string, target Target) error {
	return pluginFailure(m.ensure(ctx, name, target))
}

func (m *Manager) ensure(ctx context.Context, name string, target Target) error {
	if c, ok := m.Get(name); ok {
		if c.source == target.Version {
			err := c.check(ctx)
			if err == nil {
				m.contacted(name)
				return nil
			}
			var refused *workerconfig.ConfigError
			switch {
			case errors.Is(err, errKindsChanged):
				// Made again below, with a cache of what it serves now.
			case errors.As(err, &refused):
				m.Disconnect(name)
				return err
			default:
				m.Disconnect(name)
				return fmt.Errorf("health check of %s: %w", name, err)
			}
		}
		m.Disconnect(name)
	}
	if target.Hub.isHub(target.Config.Host, "") {
		return hubError(target.Config.Host)
	}
	c, err := m.connect(ctx, name, target)
	if err != nil {
		return err
	}
	m.mu.Lock()
	other, dup := m.registeredAs(name, c.identity)
	if !dup {
		m.clusters[name] = c
	}
	m.mu.Unlock()
	if dup {
		c.cancel()
		return duplicateError(other, c.identity)
	}
	m.contacted(name)
	if m.handler != nil {
		m.handler.ConnectionChanged(name)
		// The cache's first events arrived before the cluster counted as connected; replay them so that
		// everything on the cluster is looked at with the connection in place (orphans included).
		m.replay(ctx, c)
	}
	return nil
}

// pluginFailure gives the error of a request whose credential plugin failed its own reason. client-go
// says so only in the error's text.
func pluginFailure(err error) error {
	var ce *workerconfig.ConfigError
	if err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), "getting credentials: ") {
		return err
	}
	return &workerconfig.ConfigError{Reason: gantry.ReasonCredentialPluginFailed, Message: "the credential plugin gave the hub no credential: " + err.Error()}
}

func (m *Manager) replay(ctx context.Context, c *Cluster) {
	var copies gantry.WorkloadList
	if err := c.Client.List(ctx, &copies); err == nil {
		for i := range copies.Items {
			m.handler.WorkerObjectChanged(c.Name, &copies.Items[i])
		}
	}
	for _, k := range jobkind.All() {
		if !c.kinds[k.Name()] {
			continue
		}
		list := k.NewList()
		if err := c.Client.List(ctx, list); err != nil {
			continue
		}
		_ = apimeta.EachListItem(list, func(o runtime.Object) error {
			m.objectChanged(c.Name, o)
			return nil
		})
	}
}

// Disconnect drops the named cluster's connection, if any.
func (m *Manager) Disconnect(name string) {
	m.mu.Lock()
	c, ok := m.clusters[name]
	delete(m.clusters, name)
	m.mu.Unlock()
	if !ok {
		return
	}
	c.cancel()
	if m.handler != nil {
		m.handler.ConnectionChanged(name)
	}
}

// DisconnectAll drops every connection.
func (m *Manager) DisconnectAll() {
	for _, n := range m.Connected() {
		m.Disconnect(n)
	}
}

func (m *Manager) connect(ctx context.Context, name string, target Target) (*Cluster, error) {
	cfg := rest.CopyConfig(target.Config)
	cfg.QPS, cfg.Burst = m.opts.QPS, m.opts.Burst
	cfg.Timeout = 30 * time.Second
	workerconfig.GuardDial(cfg, m.opts.AllowLoopback)
	c, err := vet(ctx, name, cfg, target.Version, target.Hub)
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	other, dup := m.registeredAs(name, c.identity)
	m.mu.RUnlock()
	if dup { // before anything is cached
		return nil, duplicateError(other, c.identity)
	}
	// Counted inside the Guard: a write it refuses is never sent.
	cfg = CountWrites(cfg, metrics.TargetWorker, name)
	if m.opts.GuardWrites != nil {
		cfg = m.opts.GuardWrites(cfg)
	}
	owned, _ := labels.NewRequirement(gantry.WorkloadUIDLabel, selection.Exists, nil)
	ownedSelector := labels.NewSelector().Add(*owned)
	watchCfg := rest.CopyConfig(cfg)
	watchCfg.Timeout = 0 // watches are long-lived
	byObject := map[client.Object]cache.ByObject{
		&gantry.Workload{}:       {Label: ownedSelector},
		&gantry.CapacityReport{}: {},
	}
	for _, k := range jobkind.All() {
		if c.kinds[k.Name()] {
			byObject[k.New()] = cache.ByObject{Label: ownedSelector}
		}
	}
	ca, err := cache.New(watchCfg, cache.Options{
		Scheme:   m.scheme,
		ByObject: byObject,
		// A kind the worker does not serve is never watched by accident: reading it fails at once.
		ReaderFailOnMissingInformer: true,
		DefaultTransform:            cache.TransformStripManagedFields(),
		DefaultWatchErrorHandler: func(ctx context.Context, r *toolscache.Reflector, err error) {
			c.deny(err)
			toolscache.DefaultWatchErrorHandler(ctx, r, err)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating cache for %s: %w", name, err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: m.scheme, Cache: &client.CacheOptions{Reader: ca}})
	if err != nil {
		return nil, fmt.Errorf("creating client for %s: %w", name, err)
	}
	reader, err := client.New(cfg, client.Options{Scheme: m.scheme})
	if err != nil {
		return nil, fmt.Errorf("creating reader for %s: %w", name, err)
	}
	c.Client, c.Reader = cl, reader

	if err := m.watch(ctx, ca, c); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	log := ctrllog.FromContext(ctx).WithValues("cluster", name)
	go func() {
		if err := ca.Start(runCtx); err != nil {
			log.Error(err, "Cache of worker cluster stopped")
		}
	}()
	syncCtx, syncCancel := context.WithTimeout(ctx, m.opts.SyncTimeout)
	defer syncCancel()
	if !ca.WaitForCacheSync(syncCtx) {
		cancel()
		if err := c.deniedError(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("caches of %s did not sync within %s", name, m.opts.SyncTimeout)
	}
	log.Info("Connected to worker cluster", "host", cfg.Host)
	return c, nil
}

// vet makes sure, before anything is cached, that the worker is not the hub, serves Gantry's API, and
// accepts the hub's token and grants it what it needs. More rights than it needs are a warning, not a
// refusal (the LeastPrivilege condition).
func vet(ctx context.Context, name string, cfg *rest.Config, version string, hub HubIdentity) (*Cluster, error) {
	identity, err := identify(ctx, cfg, hub)
	if err != nil {
		return nil, unauthorized(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, &workerconfig.ConfigError{Reason: gantry.ReasonInvalidKubeconfig, Message: err.Error()}
	}
	authz, err := authorizationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, &workerconfig.ConfigError{Reason: gantry.ReasonInvalidKubeconfig, Message: err.Error()}
	}
	c := &Cluster{Name: name, config: cfg, discovery: dc, authz: authz, source: version, identity: identity}
	if err := checkAPIs(c); err != nil {
		return nil, unauthorized(err)
	}
	if err := c.review(ctx); err != nil {
		return nil, err
	}
	if c.kinds, err = servedKinds(ctx, c.discovery, c.authz, c.granted()); err != nil {
		return nil, unauthorized(err)
	}
	return c, nil
}

func (m *Manager) watch(ctx context.Context, ca cache.Cache, c *Cluster) error {
	cluster := c.Name
	objectHandler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.objectChanged(cluster, obj) },
		UpdateFunc: func(_, obj any) { m.objectChanged(cluster, obj) },
		DeleteFunc: func(obj any) { m.objectChanged(cluster, obj) },
	}
	var err error
	if c.copies, err = watchObjects(ctx, ca, &gantry.Workload{}, objectHandler); err != nil {
		return fmt.Errorf("watching Workload copies on %s: %w", cluster, err)
	}
	c.jobs = map[gantry.JobKind]toolscache.Store{}
	for _, k := range jobkind.All() {
		if !c.kinds[k.Name()] {
			continue
		}
		if c.jobs[k.Name()], err = watchObjects(ctx, ca, k.New(), objectHandler); err != nil {
			return fmt.Errorf("watching %s on %s: %w", k.Name(), cluster, err)
		}
	}
	inf, err := ca.GetInformer(ctx, &gantry.CapacityReport{})
	if err != nil {
		return fmt.Errorf("watching capacity reports on %s: %w", cluster, err)
	}
	report := func(any) {
		if m.handler != nil {
			m.handler.CapacityReportChanged(cluster)
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: report, UpdateFunc: func(_, o any) { report(o) }, DeleteFunc: report,
	})
	return err
}

// watchObjects adds the handler to the cache's informer of obj's kind and returns the informer's store,
// nil when the informer does not expose it.
func watchObjects(ctx context.Context, ca cache.Cache, obj client.Object, handler toolscache.ResourceEventHandler) (toolscache.Store, error) {
	inf, err := ca.GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(handler); err != nil {
		return nil, err
	}
	if shared, ok := inf.(toolscache.SharedIndexInformer); ok {
		return shared.GetStore(), nil
	}
	return nil, nil
}

func (m *Manager) objectChanged(cluster string, obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(client.Object)
	if !ok || m.handler == nil || metav1.GetControllerOf(o) != nil {
		// What Gantry creates on a worker has no owner: an object another controller made (a JobSet's
		// Jobs, KubeRay's submitter Job), even one carrying Gantry's labels, is that controller's.
		return
	}
	m.handler.WorkerObjectChanged(cluster, o)
}

// identify reads the worker's identity, the UID of its kube-system namespace, and refuses a worker
// that is the hub's own cluster under another address. A worker that does not let the hub read its
// kube-system namespace has no identity; it is told apart from the hub by its address alone, as Ensure
// did.
func identify(ctx context.Context, cfg *rest.Config, hub HubIdentity) (types.UID, error) {
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("creating a client for %s: %w", cfg.Host, err)
	}
	ns, err := core.Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading the cluster identity (namespace %s) of %s: %w", metav1.NamespaceSystem, cfg.Host, err)
	case hub.UID != "" && hub.isHub(cfg.Host, ns.UID):
		return "", hubError(cfg.Host)
	}
	return ns.UID, nil
}

// registeredAs returns the other connected WorkerCluster that reaches the cluster of that identity.
// Called with m.mu held.
func (m *Manager) registeredAs(name string, identity types.UID) (string, bool) {
	if identity == "" {
		return "", false
	}
	for other, c := range m.clusters {
		if other != name && c.identity == identity {
			return other, true
		}
	}
	return "", false
}

func duplicateError(other string, identity types.UID) error {
	return &workerconfig.ConfigError{Reason: gantry.ReasonDuplicateCluster, Message: fmt.Sprintf(
		"the cluster is already registered as WorkerCluster %s (kube-system namespace UID %s); one cluster may be registered once", other, identity)}
}

// checkAPIs makes sure the worker serves Gantry's API, so a missing CRD is reported as such instead of
// an informer failing forever.
func checkAPIs(c *Cluster) error {
	list, err := c.discovery.ServerResourcesForGroupVersion(gantry.GroupVersion.String())
	if err != nil {
		if isNotFound(err) {
			return &workerconfig.ConfigError{Reason: gantry.ReasonMissingAPI, Message: "the cluster does not serve " + gantry.GroupVersion.String() + ": install Gantry's CRDs there"}
		}
		if apierrors.IsForbidden(err) {
			return lacksRights("discovery of " + gantry.GroupVersion.String() + ": " + err.Error())
		}
		return fmt.Errorf("reaching %s: %w", c.config.Host, err)
	}
	need := map[string]bool{"workloads": false, "capacityreports": false}
	for _, r := range list.APIResources {
		if _, ok := need[r.Name]; ok {
			need[r.Name] = true
		}
	}
	for r, ok := range need {
		if !ok {
			return &workerconfig.ConfigError{Reason: gantry.ReasonMissingAPI, Message: "the cluster does not serve " + r + "." + gantry.GroupVersion.Group}
		}
	}
	return nil
}

func healthCheck(ctx context.Context, c *Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.discovery.RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
}

// servedKinds finds the kinds of jobs the hub runs on the worker: batch Jobs always, another kind when
// discovery lists it and the hub may watch, create and delete it there (a worker whose hub access
// predates the kind still runs batch Jobs).
func servedKinds(ctx context.Context, dc discovery.DiscoveryInterface, authz authorizationv1client.AuthorizationV1Interface,
	granted []rbacv1.PolicyRule) (map[gantry.JobKind]bool, error) {
	kinds := map[gantry.JobKind]bool{gantry.JobKindJob: true}
	for _, k := range jobkind.All() {
		gvk := k.GroupVersionKind()
		if kinds[k.Name()] {
			continue
		}
		list, err := dc.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
		switch {
		case isNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("discovering %s: %w", gvk.GroupVersion(), err)
		}
		for _, r := range list.APIResources {
			if r.Kind != gvk.Kind || strings.Contains(r.Name, "/") {
				continue
			}
			ok, err := mayRun(ctx, authz, granted, gvk.Group, r.Name)
			if err != nil {
				return nil, err
			}
			kinds[k.Name()] = ok
		}
	}
	return kinds, nil
}

// mayRun says whether the hub may watch, create and delete the resource on the worker: by the rules of
// the last rights review where they tell, so that a health check asks nothing more of a worker whose
// rules show them.
func mayRun(ctx context.Context, authz authorizationv1client.AuthorizationV1Interface, granted []rbacv1.PolicyRule, group, resource string) (bool, error) {
	for _, verb := range []string{"watch", "create", "delete"} {
		ok, err := access{group: group, resource: resource, verb: verb}.allowedBy(ctx, granted, authz)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gantry-dev/gantry/agent/admission"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/expectations"
	"github.com/gantry-dev/gantry/internal/kueue"
	"github.com/gantry-dev/gantry/internal/pace"
	"github.com/gantry-dev/gantry/jobkind"
)

// parallelWrites bounds the status writes of one pass in flight at once.
const parallelWrites = 16

// ControllerName names the agent's controller (logs, metrics, events).
const ControllerName = "gantry-agent"

// passRequest is the only key the agent's queue holds: every change asks for one more pass, and the
// queue folds the requests that arrive while a pass runs into one.
var passRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "admission-pass"}}

// Options configure the agent.
type Options struct {
	// ClusterName names the cluster's CapacityReport and is written into it. Required.
	ClusterName string
	// Version is the agent's version, written into the CapacityReport for the hub's version-skew check.
	Version string
	// HeartbeatInterval is how often the CapacityReport is rewritten when nothing changed.
	// Defaults to DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// ReservationTTL is how long an admitted copy holds its room while the hub creates no Job for it;
	// 0 holds it until the copy is withdrawn.
	ReservationTTL time.Duration
	// StarvationTimeout is how long a copy that does not fit may be passed by later, smaller ones before
	// the nodes it could use are held for it; 0 never holds them.
	StarvationTimeout time.Duration
	// PlacementTimeout is how long after its Job was created an admitted copy may still have pods not on
	// nodes before the agent gives it up and the hub dispatches it again; 0 waits for ever.
	PlacementTimeout time.Duration
	// RediscoveryInterval is how often the agent looks for the optional APIs its cluster does not serve
	// yet. Defaults to DefaultRediscoveryInterval.
	RediscoveryInterval time.Duration
	// PassGap is the least time between passes under the manager beyond passesInARow of them at once
	// (Reconcile called directly is never held back). Defaults to DefaultPassGap; negative for none.
	PassGap time.Duration
}

// DefaultPassGap takes a burst's changes in up to ten passes a second: a copy waits at most that long
// for its admission, and one on an agent that ran fewer than passesInARow passes in the last gaps none.
const DefaultPassGap = 100 * time.Millisecond

// passesInARow is how many passes may run at once before the gap spaces them: a job's own few changes
// (its copy, its pod bound, its pod ended) never wait.
const passesInARow = 4

// Passes beyond a burst take at most a quarter of a core, as the hub's dispatcher's do.
const (
	passDuty  = 0.25
	passBurst = 500 * time.Millisecond
)

// DefaultPlacementTimeout leaves the scheduler and the Job controller ample time, even on a busy cluster.
const DefaultPlacementTimeout = 5 * time.Minute

// DefaultStarvationTimeout lets small jobs pass a large one for a while, then drains its nodes for it.
const DefaultStarvationTimeout = 10 * time.Minute

// DefaultReservationTTL is far above the time the hub takes to create a winner's Job even under load, so
// that it only fires when the hub is gone or cut off.
const DefaultReservationTTL = 5 * time.Minute

// Reconciler runs the agent's passes. Create it with NewReconciler.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	clock    clock.Clock
	opts     Options

	// mu serialises passes; the single queue key already does, this keeps the memory below safe if a
	// pass is ever called directly.
	mu         sync.Mutex
	placements map[types.UID]admission.Placement
	placing    map[types.UID]time.Time // admitted copies whose pods were not all bound, with when admitted
	assumed    *expectations.Written[types.UID, metav1.Condition]
	lastReport *expectations.Written[string, gantryv1beta1.CapacityReportStatus]
	leaseSeen  LeaseSighting
	// kinds are the kinds of jobs the cluster serves (batch Jobs always; others once their API is found:
	// optionalAPIs).
	kinds map[gantryv1beta1.JobKind]bool
	// podGroups: the cluster serves the PodGroup API (GangScheduling).
	podGroups bool
	// kueue: the cluster serves Kueue's Workloads.
	kueue bool
}

// NewReconciler returns the agent's reconciler. c must read from a cache set up with CacheOptions (any
// client works for tests); recorder receives events about copies; clk stamps conditions and heartbeats.
func NewReconciler(c client.Client, recorder events.EventRecorder, clk clock.Clock, opts Options) (*Reconciler, error) {
	if opts.ClusterName == "" {
		return nil, errors.New("a cluster name is required")
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.RediscoveryInterval <= 0 {
		opts.RediscoveryInterval = DefaultRediscoveryInterval
	}
	if opts.PassGap == 0 {
		opts.PassGap = DefaultPassGap
	}
	return &Reconciler{
		client:     c,
		recorder:   recorder,
		clock:      clk,
		opts:       opts,
		placements: map[types.UID]admission.Placement{},
		assumed:    expectations.NewWritten[types.UID, metav1.Condition](),
		lastReport: expectations.NewWritten[string, gantryv1beta1.CapacityReportStatus](),
		kinds:      map[gantryv1beta1.JobKind]bool{gantryv1beta1.JobKindJob: true},
	}, nil
}

// SetupWithManager registers the agent's controller: it watches copies, Nodes, Pods, Jobs and the
// CapacityReport, and runs one pass on start.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	enqueue := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{passRequest}
	})
	b := builder.ControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(crcontroller.Options{
			MaxConcurrentReconciles: 1,
			// A process runs one agent, but tests run one per worker cluster in the same process.
			SkipNameValidation: ptr.To(true),
			// Errors retry soon; a pass is also queued by every change, so retries do not need to be long.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](50*time.Millisecond, 30*time.Second),
		}).
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(passRequest)
			return nil
		})).
		Watches(&gantryv1beta1.Workload{}, enqueue, builder.WithPredicates(copyChanged)).
		Watches(&corev1.Node{}, enqueue, builder.WithPredicates(nodeChanged)).
		Watches(&corev1.Pod{}, enqueue, builder.WithPredicates(podChanged)).
		Watches(&coordinationv1.Lease{}, enqueue).
		Watches(&schedulingv1.PriorityClass{}, enqueue, builder.WithPredicates(createdOrDeleted)).
		Watches(&nodev1.RuntimeClass{}, enqueue, builder.WithPredicates(createdOrDeleted)).
		Watches(&corev1.ResourceQuota{}, enqueue, builder.WithPredicates(quotaChanged)).
		Watches(&gantryv1beta1.CapacityReport{}, enqueue, builder.WithPredicates(reportChanged(r.opts.ClusterName)))
	d := &discovery{mgr: mgr, enqueue: enqueue, found: make(chan event.GenericEvent, 1), missing: optionalAPIs()}
	b = b.WatchesRawSource(source.Channel(d.found, enqueue))
	var err error
	if d.ctrl, err = b.Build(r.paced()); err != nil {
		return err
	}
	if err := d.takeUp(context.Background(), r); err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return d.rediscover(ctx, r) }))
}

// paced runs the passes the manager asks for as pace allows: one held back is asked for again when due,
// and the changes that come meanwhile are taken in it.
func (r *Reconciler) paced() reconcile.Reconciler {
	budget := pace.New(pace.Options{Duty: passDuty, Burst: passBurst, Gap: max(r.opts.PassGap, 0), InARow: passesInARow}, r.clock.Now())
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if wait := budget.Wait(r.clock.Now()); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		start := r.clock.Now()
		defer func() { budget.Spend(start, r.clock.Now()) }()
		return r.Reconcile(ctx, req)
	})
}

// serves says whether the cluster serves the kind, and the agent knows its type.
func serves(mgr manager.Manager, gvk schema.GroupVersionKind) bool {
	_, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	return err == nil && mgr.GetScheme().Recognizes(gvk)
}

// Reconcile runs one pass: read the caches, decide, write the copies' conditions, then the report.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.clock.Now()
	defer func() { passDuration.Observe(r.clock.Since(start).Seconds()) }()

	in, err := r.read(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	plan := Decide(in)
	writeErr := r.apply(ctx, plan)
	recordPlacements(plan.Placed, len(r.placing))
	next, reportErr := r.syncReport(ctx, CapacityFromSummary(plan.Snapshot.Summary(), plan.Admitted))
	if err := errors.Join(writeErr, reportErr); err != nil {
		return reconcile.Result{}, err
	}
	if plan.Wake > 0 && (next == 0 || plan.Wake < next) {
		next = plan.Wake
	}
	return reconcile.Result{RequeueAfter: next}, nil
}

// read collects a pass's input from the cache. Objects are not deep-copied: nothing here or in Decide
// modifies them.
func (r *Reconciler) read(ctx context.Context) (Input, error) {
	noCopy := client.UnsafeDisableDeepCopy
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes, noCopy); err != nil {
		return Input{}, fmt.Errorf("listing nodes: %w", err)
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, noCopy); err != nil {
		return Input{}, fmt.Errorf("listing pods: %w", err)
	}
	var copies gantryv1beta1.WorkloadList
	if err := r.client.List(ctx, &copies, client.HasLabels{gantryv1beta1.WorkloadUIDLabel}, noCopy); err != nil {
		return Input{}, fmt.Errorf("listing workload copies: %w", err)
	}
	hubLease, err := r.hubLease(ctx)
	if err != nil {
		return Input{}, err
	}
	priorityClasses, runtimeClasses, err := r.classes(ctx)
	if err != nil {
		return Input{}, err
	}
	var quotas corev1.ResourceQuotaList
	if err := r.client.List(ctx, &quotas, noCopy); err != nil {
		return Input{}, fmt.Errorf("listing ResourceQuotas: %w", err)
	}
	in := Input{
		HubLease:   hubLease,
		Nodes:      make([]*corev1.Node, len(nodes.Items)),
		Pods:       make([]*corev1.Pod, len(pods.Items)),
		Copies:     make([]*gantryv1beta1.Workload, len(copies.Items)),
		Jobs:       map[types.NamespacedName]client.Object{},
		Kinds:      r.kinds,
		Placements: r.placements,

		PriorityClasses: priorityClasses,
		RuntimeClasses:  runtimeClasses,
		Quotas:          make([]*corev1.ResourceQuota, len(quotas.Items)),
		Placing:         r.placing,
		Assumed:         r.assumed,
		Now:             r.clock.Now(),

		ReservationTTL:    r.opts.ReservationTTL,
		StarvationTimeout: r.opts.StarvationTimeout,
		PlacementTimeout:  r.opts.PlacementTimeout,
	}
	for i := range nodes.Items {
		in.Nodes[i] = &nodes.Items[i]
	}
	for i := range pods.Items {
		in.Pods[i] = &pods.Items[i]
	}
	for i := range quotas.Items {
		in.Quotas[i] = &quotas.Items[i]
	}
	for i := range copies.Items {
		c := &copies.Items[i]
		in.Copies[i] = c
		k := jobkind.Of(c)
		if !r.kinds[k.Name()] {
			continue // the cluster does not serve the kind: no such job can be here
		}
		key := JobKey(c)
		job := k.New()
		switch err := r.client.Get(ctx, key, job, noCopy); {
		case err == nil:
			in.Jobs[client.ObjectKeyFromObject(c)] = job
		case !apierrors.IsNotFound(err):
			return Input{}, fmt.Errorf("reading %s %s: %w", k.Name(), key, err)
		}
	}
	if in.PodGroups, err = r.readPodGroups(ctx); err != nil {
		return Input{}, err
	}
	if in.Kueue, err = r.readKueue(ctx, in); err != nil {
		return Input{}, err
	}
	keepBehind(r.assumed, in.Copies)
	return in, nil
}

// readPodGroups are the PodGroups Gantry made, by namespace and name; nil where the cluster serves none.
func (r *Reconciler) readPodGroups(ctx context.Context) (map[types.NamespacedName]*schedulingv1beta1.PodGroup, error) {
	if !r.podGroups {
		return nil, nil
	}
	var list schedulingv1beta1.PodGroupList
	if err := r.client.List(ctx, &list, client.HasLabels{gantryv1beta1.WorkloadUIDLabel}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing PodGroups: %w", err)
	}
	byName := make(map[types.NamespacedName]*schedulingv1beta1.PodGroup, len(list.Items))
	for i := range list.Items {
		byName[client.ObjectKeyFromObject(&list.Items[i])] = &list.Items[i]
	}
	return byName, nil
}

// readKueue reads the cluster's Kueue queues, cohorts, flavors and job Workloads when the pass needs
// them (ThroughKueue); nil where the cluster serves none, or the pass needs none.
func (r *Reconciler) readKueue(ctx context.Context, in Input) (*Kueue, error) {
	if !r.kueue || !ThroughKueue(in.Copies, in.Jobs) {
		return nil, nil
	}
	var (
		lqs kueue.LocalQueueList
		cqs kueue.ClusterQueueList
		cos kueue.CohortList
		rfs kueue.ResourceFlavorList
		wls kueue.WorkloadList
	)
	for _, l := range []client.ObjectList{&lqs, &cqs, &cos, &rfs} {
		if err := r.client.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing Kueue's %T: %w", l, err)
		}
	}
	if err := r.client.List(ctx, &wls, client.HasLabels{kueue.JobUIDLabel}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Kueue's Workloads: %w", err)
	}
	st := &Kueue{LocalQueues: map[types.NamespacedName]*kueue.LocalQueue{}, ClusterQueues: map[string]*kueue.ClusterQueue{},
		Cohorts: map[string]*kueue.Cohort{}, Flavors: map[string]*kueue.ResourceFlavor{}, Workloads: map[types.UID]*kueue.Workload{}}
	for i := range lqs.Items {
		st.LocalQueues[client.ObjectKeyFromObject(&lqs.Items[i])] = &lqs.Items[i]
	}
	for i := range cqs.Items {
		st.ClusterQueues[cqs.Items[i].Name] = &cqs.Items[i]
	}
	for i := range cos.Items {
		st.Cohorts[cos.Items[i].Name] = &cos.Items[i]
	}
	for i := range rfs.Items {
		st.Flavors[rfs.Items[i].Name] = &rfs.Items[i]
	}
	for i := range wls.Items {
		st.Workloads[types.UID(wls.Items[i].Labels[kueue.JobUIDLabel])] = &wls.Items[i]
	}
	return st, nil
}

// classes are the names of the cluster's PriorityClasses, and its RuntimeClasses by name.
func (r *Reconciler) classes(ctx context.Context) (priority map[string]bool, runtime map[string]*nodev1.RuntimeClass, err error) {
	var pcs schedulingv1.PriorityClassList
	if err := r.client.List(ctx, &pcs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("listing PriorityClasses: %w", err)
	}
	var rcs nodev1.RuntimeClassList
	if err := r.client.List(ctx, &rcs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("listing RuntimeClasses: %w", err)
	}
	priority, runtime = make(map[string]bool, len(pcs.Items)), make(map[string]*nodev1.RuntimeClass, len(rcs.Items))
	for i := range pcs.Items {
		priority[pcs.Items[i].Name] = true
	}
	for i := range rcs.Items {
		runtime[rcs.Items[i].Name] = &rcs.Items[i] // the cache's own: read, never changed
	}
	return priority, runtime, nil
}

// keepBehind forgets the written conditions of copies that are gone or that the cache shows past the
// version the write replaced.
func keepBehind(assumed *expectations.Written[types.UID, metav1.Condition], copies []*gantryv1beta1.Workload) {
	version := make(map[types.UID]string, len(copies))
	for _, c := range copies {
		version[c.UID] = c.ResourceVersion
	}
	assumed.Keep(func(uid types.UID, stale string) bool {
		v, ok := version[uid]
		return ok && v == stale
	})
}

// hubLease reads the hub's Lease from the cache and keeps the sighting of its last change.
func (r *Reconciler) hubLease(ctx context.Context) (HubLease, error) {
	var lease coordinationv1.Lease
	err := r.client.Get(ctx, types.NamespacedName{Namespace: gantryv1beta1.GantryNamespace, Name: gantryv1beta1.HubLeaseName}, &lease)
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return HubLease{}, fmt.Errorf("reading the hub's lease: %w", err)
	}
	l := &lease
	if !found {
		l = nil
	}
	var hl HubLease
	hl, r.leaseSeen = ReadHubLease(l, r.leaseSeen, r.clock.Now())
	return hl, nil
}

// apply writes the plan's conditions, one status update per copy, each against the resourceVersion the
// pass read. A copy that changed in between is decided again by the pass its change queues; an
// admission that was not written gives its reservation back before the report is computed.
func (r *Reconciler) apply(ctx context.Context, plan Plan) error {
	logger := log.FromContext(ctx)
	r.placements = maps.Clone(plan.Placements)
	r.placing = maps.Clone(plan.Placing)

	// The writes are independent, so they go out together: a burst of copies is answered in one round
	// trip's time, not one per copy.
	written := make([]*gantryv1beta1.Workload, len(plan.Updates))
	writeErrs := make([]error, len(plan.Updates))
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallelWrites)
	for i, u := range plan.Updates {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c := u.Copy.DeepCopy()
			meta.SetStatusCondition(&c.Status.Conditions, u.Condition)
			if u.admission() {
				c.Status.Admission, c.Status.WouldFitWithout = nil, u.WouldFitWithout
			}
			if u.Admits() {
				var podGroup string
				if u.PodGroup != nil {
					// Named even when it could not be made now: the next passes make it again (gangMissing).
					podGroup = u.PodGroup.Name
					r.createPodGroup(ctx, c, u.PodGroup)
				}
				c.Status.Admission = AdmissionOf(c, u.Placement, podGroup)
			}
			written[i], writeErrs[i] = c, r.client.Status().Update(ctx, c)
		}()
	}
	wg.Wait()

	var errs []error
	for i, u := range plan.Updates {
		c, err := written[i], writeErrs[i]
		if err != nil {
			if u.Admits() {
				plan.Snapshot.Release(GangKey(c))
				delete(r.placements, c.UID)
				delete(r.placing, c.UID)
			}
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				logger.V(2).Info("Copy changed since the pass read it; deciding again", "workload", klog.KObj(c), "err", err)
				continue
			}
			errs = append(errs, fmt.Errorf("updating the %s condition of workload copy %s: %w", u.Condition.Type, klog.KObj(c), err))
			continue
		}
		if !u.admission() {
			logger.Info("Workload copy "+u.Condition.Type, "workload", klog.KObj(c), "reason", u.Condition.Reason, "message", u.Condition.Message)
			continue
		}
		r.assumed.Record(c.UID, u.Copy.ResourceVersion, u.Condition)
		admissionsTotal.WithLabelValues(boundedResult(u.Result()), admissionOutcome(u.Condition.Reason)).Inc()
		if u.Admits() {
			// No Event here: the hub records the admission on the Job the user watches.
			logger.V(1).Info("Admitted workload copy", "workload", klog.KObj(c), "placement", u.Condition.Message)
			continue
		}
		logger.V(2).Info("Workload copy not admitted", "workload", klog.KObj(c), "reason", u.Condition.Reason, "message", u.Condition.Message)
		if gantryv1beta1.RejectsCluster(u.Condition.Reason) {
			r.recorder.Eventf(c, nil, corev1.EventTypeWarning, u.Condition.Reason, "Reject", "%s", u.Condition.Message)
		}
	}
	return errors.Join(append(errs, r.suspend(ctx, plan.Suspend), r.syncPodGroups(ctx, plan))...)
}

// suspend suspends the hub's Jobs whose lease lapsed, each guarded by its UID; the Job controller then
// deletes their pods.
func (r *Reconciler) suspend(ctx context.Context, jobs []client.Object) error {
	var errs []error
	for _, job := range jobs {
		patch := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:%q}},"spec":{"suspend":true}}`,
			job.GetUID(), gantryv1beta1.SuspendedByAnnotation, gantryv1beta1.SuspendedByFence)
		err := r.client.Patch(ctx, job.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, []byte(patch)))
		switch {
		case err == nil:
			log.FromContext(ctx).Info("Suspended a Job of the hub, whose lease lapsed", "job", klog.KObj(job))
			r.recorder.Eventf(job, nil, corev1.EventTypeWarning, gantryv1beta1.ReasonHubLeaseExpired, "Suspend",
				"The hub's lease on this cluster lapsed (failover policy Fence): the Job is suspended until the hub resumes or removes it")
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
			errs = append(errs, fmt.Errorf("suspending job %s: %w", klog.KObj(job), err))
		}
	}
	return errors.Join(errs...)
}

// createPodGroup makes the PodGroup of a copy being admitted. One there already is the copy's (its name
// is the copy's own); a failure is logged and said on the copy, and the next passes make it again.
func (r *Reconciler) createPodGroup(ctx context.Context, c *gantryv1beta1.Workload, pg *schedulingv1beta1.PodGroup) {
	err := r.client.Create(ctx, pg.DeepCopy())
	if err == nil || apierrors.IsAlreadyExists(err) {
		return
	}
	log.FromContext(ctx).Error(err, "Could not make the gang's PodGroup; its pods wait for it", "workload", klog.KObj(c), "podGroup", pg.Name)
	r.recorder.Eventf(c, nil, corev1.EventTypeWarning, gantryv1beta1.ReasonPodGroupNotCreated, "Admit",
		"Could not make PodGroup %s, which the gang's pods wait for (made again at the next pass): %v", pg.Name, err)
}

// syncPodGroups makes the missing PodGroups of admitted copies and lowers the quorum of those whose
// gang was placed whole to one pod.
func (r *Reconciler) syncPodGroups(ctx context.Context, plan Plan) error {
	var errs []error
	for _, pg := range plan.PodGroups {
		if err := r.client.Create(ctx, pg.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("making PodGroup %s again: %w", klog.KObj(pg), err))
		}
	}
	for _, pg := range plan.Loosen {
		patch := fmt.Sprintf(`{"metadata":{"uid":%q},"spec":{"schedulingPolicy":{"gang":{"minCount":1}}}}`, pg.UID)
		err := r.client.Patch(ctx, pg.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("lowering the quorum of PodGroup %s: %w", klog.KObj(pg), err))
		}
	}
	return errors.Join(errs...)
}

// The predicates below let through only the changes that can change a pass's outcome.

// copyChanged lets through the hub's copies as they come and go and as their spec or labels change;
// not their status alone, which only this agent writes (a pass already counts what it wrote, and
// the cache catching up with it changes no decision): a pass per copy fewer on every candidate.
var copyChanged = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return isCopy(e.Object) },
	DeleteFunc:  func(e event.DeleteEvent) bool { return isCopy(e.Object) },
	GenericFunc: func(e event.GenericEvent) bool { return isCopy(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return (isCopy(o) || isCopy(n)) && (o.GetGeneration() != n.GetGeneration() ||
			!maps.Equal(o.GetLabels(), n.GetLabels()) || (o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil))
	},
}

// quotaChanged lets through a ResourceQuota as it comes and goes and as its status changes: what it
// allows and what is used.
var quotaChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*corev1.ResourceQuota)
	n, ok2 := e.ObjectNew.(*corev1.ResourceQuota)
	return !ok1 || !ok2 || !equality.Semantic.DeepEqual(o.Status, n.Status)
}}

// clusterQueueChanged lets through a ClusterQueue as it comes and goes, as its spec changes, and as
// what its workloads hold of it or its activity changes.
var clusterQueueChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*kueue.ClusterQueue)
	n, ok2 := e.ObjectNew.(*kueue.ClusterQueue)
	return !ok1 || !ok2 || o.Generation != n.Generation ||
		!equality.Semantic.DeepEqual(o.Status.FlavorsReservation, n.Status.FlavorsReservation) ||
		!equality.Semantic.DeepEqual(o.Status.Conditions, n.Status.Conditions)
}}

// createdOrDeleted lets through a class as it comes and goes: only its name counts.
var createdOrDeleted = predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}

func isCopy(o client.Object) bool {
	_, ok := o.GetLabels()[gantryv1beta1.WorkloadUIDLabel]
	return ok
}

var nodeChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return !equality.Semantic.DeepEqual(admission.NodeFromCore(o), admission.NodeFromCore(n))
	},
}

// podMatters tells whether pod counts in a pass: as usage, or as a started pod of a copy.
func podMatters(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" || IsTerminal(pod)
}

var podChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return isPodThat(e.Object, podMatters) },
	DeleteFunc: func(e event.DeleteEvent) bool {
		// A tombstone may hide the pod; let it through.
		pod, ok := e.Object.(*corev1.Pod)
		return !ok || podMatters(pod)
	},
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Pod)
		n, ok2 := e.ObjectNew.(*corev1.Pod)
		if !ok1 || !ok2 {
			return true
		}
		if !podMatters(o) && !podMatters(n) {
			return false
		}
		return o.Spec.NodeName != n.Spec.NodeName || IsTerminal(o) != IsTerminal(n) ||
			o.Labels[gantryv1beta1.WorkloadUIDLabel] != n.Labels[gantryv1beta1.WorkloadUIDLabel] ||
			!equality.Semantic.DeepEqual(PodRequests(o), PodRequests(n))
	},
	GenericFunc: func(event.GenericEvent) bool { return true },
}

func isPodThat(o client.Object, f func(*corev1.Pod) bool) bool {
	pod, ok := o.(*corev1.Pod)
	return !ok || f(pod)
}

var jobChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		k, ok := jobkind.ForObject(e.ObjectNew)
		if !ok {
			return true
		}
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetLabels()[gantryv1beta1.WorkloadUIDLabel] != n.GetLabels()[gantryv1beta1.WorkloadUIDLabel] ||
			k.State(o).Finished != k.State(n).Finished
	},
}

// reportChanged lets through the report's creation and deletion: its updates are the agent's own.
func reportChanged(name string) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return e.Object.GetName() == name },
		DeleteFunc:  func(e event.DeleteEvent) bool { return e.Object.GetName() == name },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

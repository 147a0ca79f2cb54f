// Package dispatcher runs the hub's dispatch loop: each pass reads the hub's caches and the connected
// workers, has the queue manager (package queues) build the dispatch.Snapshot, calls dispatch.Plan and
// persists each decision in the Workload's status before anything is created on a worker.
package dispatcher

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/hub/dispatcher/queues"
	"github.com/gantry-dev/gantry/hub/metrics"
	"github.com/gantry-dev/gantry/internal/expectations"
	"github.com/gantry-dev/gantry/internal/pace"
)

// Reasons of Events on hub Jobs.
const (
	EventDispatched = "Dispatched"
	EventAdmitted   = "Admitted"
	EventPending    = "Pending"
	EventPreempted  = "Preempted"
)

// Dispatcher is the hub's single dispatch loop. One pass at a time decides over a snapshot and hands
// each workload's decision to a pool of writers; the next pass does not wait for them. A workload whose
// write is in flight is seen by later passes as the write will leave it, and gets no second write until
// the first one returns. Each decision is persisted with optimistic concurrency, so a stale cache can
// cost a retry but never a second winner. A write whose outcome is unknown (a timeout, a server error)
// may have been applied: it stays in force like one in flight until a live read tells what became of it.
type Dispatcher struct {
	Client client.Client
	// APIReader reads from the API server, not the cache, to learn what became of writes whose
	// outcome is unknown; nil uses Client.
	APIReader client.Reader
	Workers   Workers
	Recorder  events.EventRecorder
	Clock     clock.WithTicker
	// Writers bounds the status writes in flight at once.
	Writers int
	// Resync runs a pass at least this often, as a safety net; passes are otherwise event driven.
	Resync time.Duration
	// RejectionTTL is how long a cluster's rejection of a workload holds; 0 means
	// dispatch.DefaultRejectionTTL.
	RejectionTTL time.Duration
	// Timeline receives the times of the nominations and winners persisted, for the latency of the
	// steps that follow; nil remembers none.
	Timeline *metrics.Timeline

	trigger chan struct{}
	once    sync.Once

	writers chan struct{} // one token per write in flight
	slotMu  sync.Mutex
	queued  [urgencies][]func() // writes and reads waiting for a slot, by urgency (startInSlot)
	queues  *queues.Manager
	// follows says whether the Workload informer has delivered what it listed; nil when the manager
	// is fed from lists of the cache (Follow).
	follows atomic.Pointer[func() bool]

	// writes are the dispatcher's status writes until the cache shows them: in flight, of unknown
	// outcome, applied with the cache behind.
	writes *expectations.Writes[string, ownWrite]
	// cutAfter is how many settled workloads of a queue a pass walks before it cuts the rest; 0 is
	// queues.DefaultCutAfter.
	cutAfter int

	lastQueueStatus  time.Time
	statusesInFlight atomic.Bool // queue and cohort statuses being written in a slot
}

func (d *Dispatcher) init() {
	d.once.Do(func() {
		d.trigger = make(chan struct{}, 1)
		d.writes = expectations.NewWrites[string, ownWrite]()
		if d.Writers < 1 {
			d.Writers = 64
		}
		d.writers = make(chan struct{}, d.Writers)
		d.queues = queues.NewManager(d.cutAfter)
		if d.Resync == 0 {
			d.Resync = time.Minute
		}
		if d.Clock == nil {
			d.Clock = clock.RealClock{}
		}
		if d.RejectionTTL == 0 {
			d.RejectionTTL = dispatch.DefaultRejectionTTL
		}
		if d.APIReader == nil {
			d.APIReader = d.Client
		}
	})
}

// Trigger asks for a pass. Triggers that arrive during a pass coalesce into the next one.
func (d *Dispatcher) Trigger() {
	d.init()
	select {
	case d.trigger <- struct{}{}:
	default:
	}
}

// NeedLeaderElection makes only the leader dispatch.
func (d *Dispatcher) NeedLeaderElection() bool { return true }

// Start runs passes until ctx ends.
func (d *Dispatcher) Start(ctx context.Context) error {
	d.init()
	log := ctrllog.FromContext(ctx).WithName("dispatcher")
	ctx = ctrllog.IntoContext(ctx, log)
	if follows := d.following(); follows != nil && !toolscache.WaitForCacheSync(ctx.Done(), follows) {
		return nil // ended before the informer delivered the Workloads
	}
	resync := d.Clock.NewTicker(d.Resync)
	defer resync.Stop()
	var statusDue <-chan time.Time // a pass to write statuses that the last pass held back
	budget := pace.New(pace.Options{Duty: passDuty, Burst: passBurst}, d.Clock.Now())
	d.Trigger()
	for {
		select {
		case <-ctx.Done():
			return d.stop()
		case <-d.trigger:
		case <-resync.C():
			d.queues.Forget() // the safety net walks every workload
		case <-statusDue:
		}
		if wait := budget.Wait(d.Clock.Now()); wait > 0 {
			select {
			case <-ctx.Done():
				return d.stop()
			case <-d.Clock.After(wait):
			}
		}
		select {
		case <-d.trigger: // asked for before this pass began, which reads what it was asked for
		default:
		}
		start := d.Clock.Now()
		wait, err := d.pass(ctx)
		if err != nil {
			log.V(2).Info("Dispatch pass needs a retry", "err", err.Error())
			d.Trigger()
		}
		statusDue = nil
		if wait > 0 {
			statusDue = d.Clock.After(wait)
		}
		end := d.Clock.Now()
		budget.Spend(start, end)
		metrics.DispatchPass(end.Sub(start))
	}
}

// stop waits for the writes in flight, which the canceled context ends.
func (d *Dispatcher) stop() error {
	for range d.Writers {
		d.writers <- struct{}{}
	}
	return nil
}

// Passes run at once when asked for, as long as they took no more than passDuty of the time, over
// bursts of up to passBurst of passes; beyond that the next waits. However many events come in,
// passes then take at most a quarter of a core, and a pass over a deep queue acts on more changes at
// once; a single job, or a probe of a deep queue at rest, finds its passes unpaced.
const (
	passDuty  = 0.25
	passBurst = 500 * time.Millisecond
)

// pass runs one dispatch pass and says when the statuses it held back are due.
func (d *Dispatcher) pass(ctx context.Context) (time.Duration, error) {
	d.init()
	p, err := d.plan(ctx)
	if err != nil {
		return 0, err
	}
	return d.act(ctx, p), nil
}

// act writes what the pass decided and says when the statuses it held back are due.
func (d *Dispatcher) act(ctx context.Context, p *planned) time.Duration {
	d.queues.End(p.pass, &p.res)
	d.Timeline.KeepOnly(d.queues.HasUID)
	d.execute(ctx, p.pass.Writable, p.res)
	d.readBackDue(ctx)
	return soonest(p.res.HeldFor, d.writeStatuses(ctx, p))
}

// planned is what one pass read and decided.
type planned struct {
	read  queues.Read
	pass  *queues.Pass
	res   dispatch.Result
	usage *dispatch.Usage // nil when the queues' statuses are not due
}

// plan reads the hub and decides over it, leaving out the workloads of the queues at rest and the
// settled tails of deep ones (package queues).
func (d *Dispatcher) plan(ctx context.Context) (*planned, error) {
	d.init()
	p := &planned{}
	if err := d.read(ctx, &p.read); err != nil {
		return nil, err
	}
	withUsage := d.statusesDue() <= 0 // the statuses take the usage from the pass's own count
	p.pass = d.queues.Begin(p.read)
	if e := p.pass.WokeAll(); e != nil {
		ctrllog.FromContext(ctx).V(4).Info("Dispatch pass walks every workload", "event", fmt.Sprintf("%T%+v", e, e))
	}
	for {
		if withUsage {
			r, u := dispatch.PlanWithUsage(p.pass.Snapshot())
			p.res, p.usage = r, &u
		} else {
			p.res = dispatch.Plan(p.pass.Snapshot())
		}
		if len(p.res.Uncut) == 0 {
			return p, nil
		}
		p.pass.Uncut(p.res.Uncut)
		metrics.PassUncut()
	}
}

// soonest is the shorter of two waits, where 0 is none.
func soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// read reads the hub into r, and brings the queue manager up to date with the Workloads' changes.
func (d *Dispatcher) read(ctx context.Context, r *queues.Read) error {
	if err := d.readWorkloads(ctx); err != nil {
		return err
	}
	wcs, err := readSpecs(ctx, d.Client, r)
	if err != nil {
		return err
	}
	r.Clusters, r.Copies, r.Now, r.RejectionTTL = snapshotClusters(wcs, d.Workers), d.observeCopies, d.Clock.Now(), d.RejectionTTL
	var applied []ownWrite
	r.Own, applied = d.overlay()
	for _, w := range applied {
		d.written(w.Workload, w.c, w.event)
	}
	return nil
}

// readSpecs reads into r the queues, cohorts and namespaces a pass decides over, from the cache's own
// objects, not copies: nothing that reads them modifies them (apply deep-copies first). It returns the
// WorkerClusters, which the reader turns into r.Clusters as it knows their connections.
func readSpecs(ctx context.Context, c client.Reader, r *queues.Read) ([]gantry.WorkerCluster, error) {
	var gqs gantry.GlobalQueueList
	var qs gantry.QueueList
	var wcs gantry.WorkerClusterList
	var cohorts gantry.CohortList
	var nss corev1.NamespaceList
	for _, l := range []client.ObjectList{&gqs, &qs, &wcs, &cohorts, &nss} {
		if err := c.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing %T: %w", l, err)
		}
	}
	*r = queues.Read{GlobalQueues: gqs.Items, Queues: qs.Items, Cohorts: cohorts.Items, Namespaces: nss.Items}
	return wcs.Items, nil
}

// readWorkloads brings the queue manager up to date: from the informer's events when it follows them
// (Follow), else from a list of the cache's Workloads.
func (d *Dispatcher) readWorkloads(ctx context.Context) error {
	if d.following() == nil {
		var wls gantry.WorkloadList
		if err := d.Client.List(ctx, &wls, client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Errorf("listing workloads: %w", err)
		}
		items := make([]*gantry.Workload, len(wls.Items))
		for i := range wls.Items {
			items[i] = &wls.Items[i]
		}
		d.queues.Replace(items)
	}
	d.queues.Sync()
	return nil
}

// overlay lays the dispatcher's own writes over the manager's Workloads (expectations.Writes.Overlay).
// It returns, by key, the Workloads that stand in for the manager's, and the writes of unknown outcome
// that the cache shows applied, as the cache shows them.
func (d *Dispatcher) overlay() (map[string]*gantry.Workload, []ownWrite) {
	writes, superseded := d.writes.Overlay(func(key string) (ownWrite, bool) {
		if wl := d.queues.Workload(key); wl != nil {
			return ownWrite{Workload: wl}, true
		}
		return ownWrite{}, false
	})
	over := make(map[string]*gantry.Workload, len(writes))
	for key, w := range writes {
		over[key] = w.Workload
	}
	var applied []ownWrite
	for _, s := range superseded {
		if showsDecision(s.Cached.Workload, s.Written.c) {
			applied = append(applied, ownWrite{Workload: s.Cached.Workload, c: s.Written.c, event: s.Written.event})
		}
	}
	return over, applied
}

// change is one workload's part of a pass.
type change struct {
	wl          *gantry.Workload
	winner      string
	winnerQueue string // the GlobalQueue whose quota the winner uses
	borrowed    bool   // the winner runs it beyond that queue's quota
	rejections  []dispatch.Rejection
	nomination  *dispatch.Nomination
	verdict     *dispatch.Verdict
	preemption  *dispatch.Preemption
}

// execute writes each workload's part of the pass.
func (d *Dispatcher) execute(ctx context.Context, writable func(key string) *gantry.Workload, res dispatch.Result) {
	changes := map[string]*change{}
	get := func(key string) *change {
		if c := changes[key]; c != nil {
			return c
		}
		c := &change{wl: writable(key)}
		changes[key] = c
		return c
	}
	for _, w := range res.Winners {
		c := get(w.Key)
		c.winner, c.winnerQueue, c.borrowed = w.Cluster, w.GlobalQueue, w.Borrowed
	}
	for key, r := range res.Rejections {
		get(key).rejections = r
	}
	for i := range res.Nominations {
		get(res.Nominations[i].Key).nomination = &res.Nominations[i]
	}
	for i := range res.Verdicts {
		get(res.Verdicts[i].Key).verdict = &res.Verdicts[i]
	}
	for i := range res.Preemptions {
		get(res.Preemptions[i].Victim).preemption = &res.Preemptions[i]
	}
	var writes []slotTask
	for key, c := range changes {
		if c.wl == nil {
			continue
		}
		wl, event := d.decide(c)
		if equality.Semantic.DeepEqual(c.wl.Status, wl.Status) {
			continue
		}
		if !d.writes.Start(key, ownWrite{Workload: wl, c: c, event: event}) {
			continue // its write's return, or the read back of it, asks for another pass
		}
		writes = append(writes, slotTask{urgencyOf(c), func() { d.write(ctx, key, wl, c, event) }})
	}
	slices.SortStableFunc(writes, func(a, b slotTask) int { return int(a.urgency) - int(b.urgency) })
	for _, w := range writes {
		d.startInSlot(ctx, w.urgency, w.run)
	}
}

// decide applies one workload's decisions to a copy of it and says which Event records them.
func (d *Dispatcher) decide(c *change) (*gantry.Workload, func(job client.Object)) {
	wl := c.wl.DeepCopy()
	st := &wl.Status
	clearTakenBack(st, wl.Generation)
	recordRejections(st, c.rejections, metav1.NewTime(d.Clock.Now()))
	switch {
	case c.preemption != nil:
		return wl, d.recordPreemption(c, st)
	case c.winner != "":
		return wl, d.recordWinner(c, st, wl.Generation)
	case c.nomination != nil:
		return wl, d.recordNomination(c, st, wl.Generation)
	case c.verdict != nil:
		return wl, d.recordVerdict(c, st, wl.Generation)
	}
	return wl, nil
}

// clearTakenBack clears the winner the Workload controller took back (its eviction, the last one, names
// it and the epoch): the winner's fields are the dispatcher's, and are cleared with its next write, the
// one that dispatches the Workload again or says why it waits.
func clearTakenBack(st *gantry.WorkloadStatus, gen int64) {
	if !st.TakenBack() {
		return
	}
	msg := dispatch.TakenBackMessage(st.Evictions[len(st.Evictions)-1])
	st.ClusterName, st.Admission, st.NominatedClusters, st.Preemption = "", nil, nil, nil
	setCondition(st, gantry.WorkloadAdmitted, metav1.ConditionFalse, gantry.ReasonEvicted, msg, gen)
	setCondition(st, gantry.WorkloadDispatched, metav1.ConditionFalse, gantry.ReasonEvicted, msg, gen)
	setCondition(st, gantry.WorkloadPending, metav1.ConditionTrue, gantry.ReasonEvicted, msg, gen)
}

// recordRejections stamps each rejection with the time it was recorded, from which it lapses. A cluster
// whose earlier rejection lapsed gets its entry replaced: the API keeps one per cluster.
func recordRejections(st *gantry.WorkloadStatus, rejections []dispatch.Rejection, now metav1.Time) {
	for _, r := range rejections {
		rc := gantry.RejectedCluster{Name: r.Cluster, Reason: r.Reason, Message: r.Message, Time: now}
		if i := slices.IndexFunc(st.RejectedClusters, func(x gantry.RejectedCluster) bool { return x.Name == r.Cluster }); i >= 0 {
			st.RejectedClusters[i] = rc
		} else {
			st.RejectedClusters = append(st.RejectedClusters, rc)
		}
	}
}

// recordWinner records the winner, with the GlobalQueue whose quota it uses for as long as its Job may run.
func (d *Dispatcher) recordWinner(c *change, st *gantry.WorkloadStatus, gen int64) func(job client.Object) {
	st.ClusterName = c.winner
	if c.winnerQueue != "" {
		st.GlobalQueue = c.winnerQueue // already so, unless nominated before the field existed
	}
	winner := c.winner
	// The Job on the winner is held to the agent's choices, so they are recorded with the winner.
	if cp := currentCopy(c.wl, c.winner, d.Workers); cp != nil && cp.Status.Admission != nil {
		st.Admission = cp.Status.Admission.DeepCopy()
		if chosen := describeAdmission(st.Admission); chosen != "" {
			winner += " (" + chosen + ")"
		}
	}
	if c.borrowed {
		if st.Admission == nil {
			st.Admission = &gantry.Admission{}
		}
		st.Admission.Borrowed = true
	}
	msg := "admitted by " + winner
	setCondition(st, gantry.WorkloadAdmitted, metav1.ConditionTrue, gantry.ReasonAdmittedByCluster, msg, gen)
	setCondition(st, gantry.WorkloadPending, metav1.ConditionFalse, gantry.ReasonAdmittedByCluster, msg, gen)
	others := without(st.NominatedClusters, c.winner)
	epoch := st.DispatchEpoch
	return func(job client.Object) {
		if len(others) == 0 {
			d.Recorder.Eventf(job, nil, corev1.EventTypeNormal, EventAdmitted, "Dispatch", "Admitted by %s (epoch %d)", winner, epoch)
			return
		}
		d.Recorder.Eventf(job, nil, corev1.EventTypeNormal, EventAdmitted, "Dispatch", "Admitted by %s (epoch %d); withdrawing the copies from %s",
			winner, epoch, strings.Join(others, ", "))
	}
}

// recordPreemption records that the workload is taken back from its winner for another; the worker sync
// deletes its Job there and, once it is gone, queues it again.
func (d *Dispatcher) recordPreemption(c *change, st *gantry.WorkloadStatus) func(job client.Object) {
	p := c.preemption
	st.Preemption = &gantry.Preemption{Cluster: st.ClusterName, Epoch: st.DispatchEpoch, Preemptor: p.Preemptor,
		Reason: p.Reason, Message: p.Message, Time: metav1.NewTime(d.Clock.Now())}
	return func(job client.Object) {
		d.Recorder.Eventf(job, nil, corev1.EventTypeWarning, EventPreempted, "Preempt", "%s: %s", p.Reason, p.Message)
	}
}

// recordNomination records a new epoch's clusters and the GlobalQueue whose quota they reserve.
func (d *Dispatcher) recordNomination(c *change, st *gantry.WorkloadStatus, gen int64) func(job client.Object) {
	n := c.nomination
	st.DispatchEpoch = n.Epoch
	st.NominatedClusters = n.Clusters
	st.GlobalQueue = n.GlobalQueue
	list := strings.Join(n.Clusters, ", ")
	setCondition(st, gantry.WorkloadDispatched, metav1.ConditionTrue, gantry.ReasonNominated,
		fmt.Sprintf("dispatched to %s (epoch %d)", list, n.Epoch), gen)
	setCondition(st, gantry.WorkloadPending, metav1.ConditionTrue, gantry.ReasonWaitingForAdmission,
		"waiting for "+list+" to admit", gen)
	if n.Epoch == 1 {
		// A job's first dispatch is told by its Admitted Event a moment later, or by a Pending one if
		// its copies wait: an Event of its own would be a write per job that says nothing new.
		return nil
	}
	return func(job client.Object) {
		d.Recorder.Eventf(job, nil, corev1.EventTypeNormal, EventDispatched, "Dispatch", "Dispatched to %s (epoch %d)", list, n.Epoch)
	}
}

// recordVerdict records why the workload stays pending; an Event only when the reason changes.
func (d *Dispatcher) recordVerdict(c *change, st *gantry.WorkloadStatus, gen int64) func(job client.Object) {
	v := *c.verdict
	if v.Withdraw {
		st.NominatedClusters = nil
		setCondition(st, gantry.WorkloadDispatched, metav1.ConditionFalse, v.Reason, v.Message, gen)
	}
	prev := apimeta.FindStatusCondition(st.Conditions, gantry.WorkloadPending)
	sameReason := prev != nil && prev.Reason == v.Reason
	setCondition(st, gantry.WorkloadPending, metav1.ConditionTrue, v.Reason, v.Message, gen)
	if sameReason {
		return nil
	}
	eventType := corev1.EventTypeNormal
	if v.Reason != gantry.ReasonWaitingForQuota {
		eventType = corev1.EventTypeWarning
	}
	return func(job client.Object) {
		d.Recorder.Eventf(job, nil, eventType, EventPending, "Dispatch", "%s: %s", v.Reason, v.Message)
	}
}

func without(list []string, s string) []string {
	var out []string
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

func setCondition(st *gantry.WorkloadStatus, typ string, status metav1.ConditionStatus, reason, msg string, gen int64) {
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
	if typ == gantry.WorkloadPending {
		markStopped(st, status == metav1.ConditionTrue && reason == gantry.ReasonStopped, gen)
	}
}

// markStopped keeps the Stopped condition with the Pending one it is written with: True while the
// owner's stop holds the workload, False (Resumed) from the first Pending written after it. That time
// is when the workload began to wait anew, which its admission deadline counts from.
func markStopped(st *gantry.WorkloadStatus, stopped bool, gen int64) {
	switch c := apimeta.FindStatusCondition(st.Conditions, gantry.WorkloadStopped); {
	case stopped:
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: gantry.WorkloadStopped, Status: metav1.ConditionTrue,
			Reason: gantry.ReasonStopped, Message: "stopped by its owner (annotation " + gantry.StoppedAnnotation + ")", ObservedGeneration: gen})
	case c != nil && c.Status == metav1.ConditionTrue:
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: gantry.WorkloadStopped, Status: metav1.ConditionFalse,
			Reason: gantry.ReasonResumed, Message: "resumed by its owner: it waits anew", ObservedGeneration: gen})
	}
}

// describeAdmission renders an agent's choices for a person, e.g.
// "NVIDIA-A100-SXM4-80GB, topology.kubernetes.io/zone=zone-b"; empty when it made none.
func describeAdmission(a *gantry.Admission) string {
	var parts []string
	for _, ps := range a.PodSets {
		if ps.GPUProduct != "" && !slices.Contains(parts, ps.GPUProduct) {
			parts = append(parts, ps.GPUProduct)
		}
	}
	if a.TopologyDomain != "" {
		parts = append(parts, "domain "+a.TopologyDomain)
	}
	return strings.Join(parts, ", ")
}

package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/dispatch"
)

// Reasons of Events on hub Jobs.
const (
	EventDispatched = "Dispatched"
	EventAdmitted   = "Admitted"
	EventPending    = "Pending"
)

// Dispatcher is the hub's single dispatch loop. One pass at a time decides over a snapshot; the writes
// of a pass run in parallel. Each decision is persisted with optimistic concurrency, so a stale cache
// can cost a retry but never a second winner.
type Dispatcher struct {
	Client   client.Client
	Copies   CopyReader
	Recorder events.EventRecorder
	Clock    clock.WithTicker
	// Writers bounds the status writes in flight at once.
	Writers int
	// Resync runs a pass at least this often, as a safety net; passes are otherwise event driven.
	Resync time.Duration

	trigger chan struct{}
	once    sync.Once

	mu      sync.Mutex
	assumed map[string]*gantry.Workload // status written but maybe not yet in the cache

	lastQueueStatus time.Time
}

func (d *Dispatcher) init() {
	d.once.Do(func() {
		d.trigger = make(chan struct{}, 1)
		d.assumed = map[string]*gantry.Workload{}
		if d.Writers < 1 {
			d.Writers = 16
		}
		if d.Resync == 0 {
			d.Resync = time.Minute
		}
		if d.Clock == nil {
			d.Clock = clock.RealClock{}
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
	resync := d.Clock.NewTicker(d.Resync)
	defer resync.Stop()
	var statusDue <-chan time.Time // a pass to write queue statuses that the last pass held back
	d.Trigger()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.trigger:
		case <-resync.C():
		case <-statusDue:
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
		passDuration.Observe(d.Clock.Since(start).Seconds())
	}
}

// Pass runs one dispatch pass.
func (d *Dispatcher) Pass(ctx context.Context) error {
	_, err := d.pass(ctx)
	return err
}

func (d *Dispatcher) pass(ctx context.Context) (time.Duration, error) {
	d.init()
	st, err := d.read(ctx)
	if err != nil {
		return 0, err
	}
	snap, byKey, blockedList := buildSnapshot(st, d.Copies)
	res := dispatch.Plan(snap)
	err = d.execute(ctx, byKey, res, blockedList)
	return d.writeQueueStatus(ctx, st, snap), err
}

func (d *Dispatcher) read(ctx context.Context) (*hubState, error) {
	var wls gantry.WorkloadList
	var gqs gantry.GlobalQueueList
	var qs gantry.QueueList
	var wcs gantry.WorkerClusterList
	var nss corev1.NamespaceList
	for _, l := range []client.ObjectList{&wls, &gqs, &qs, &wcs, &nss} {
		// The cache's own objects, not copies: a pass never modifies them (apply deep-copies first), and
		// copying every Workload on every pass would dominate the pass.
		if err := d.Client.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing %T: %w", l, err)
		}
	}
	st := &hubState{globals: gqs.Items, queues: qs.Items, clusters: wcs.Items, namespaces: map[string]labels.Set{}}
	for _, ns := range nss.Items {
		st.namespaces[ns.Name] = ns.Labels
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := make(map[string]bool, len(wls.Items))
	for i := range wls.Items {
		wl := &wls.Items[i]
		key := wl.Namespace + "/" + wl.Name
		seen[key] = true
		if a := d.assumed[key]; a != nil {
			if a.UID == wl.UID && !newerOrEqual(wl.ResourceVersion, a.ResourceVersion) {
				wl = a // the cache has not caught up with our own write yet
			} else {
				delete(d.assumed, key)
			}
		}
		st.workloads = append(st.workloads, wl)
	}
	for key := range d.assumed {
		if !seen[key] {
			delete(d.assumed, key)
		}
	}
	return st, nil
}

// newerOrEqual compares resource versions, which the API server derives from etcd revisions.
func newerOrEqual(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return true // not comparable: trust the cache
	}
	return x >= y
}

// change is one workload's part of a pass.
type change struct {
	wl         *gantry.Workload
	winner     string
	rejections []dispatch.Rejection
	nomination *dispatch.Nomination
	verdict    *dispatch.Verdict
}

func (d *Dispatcher) execute(ctx context.Context, byKey map[string]*gantry.Workload, res dispatch.Result, blockedList []blocked) error {
	changes := map[string]*change{}
	get := func(key string) *change {
		if c := changes[key]; c != nil {
			return c
		}
		c := &change{wl: byKey[key]}
		changes[key] = c
		return c
	}
	for _, w := range res.Winners {
		get(w.Key).winner = w.Cluster
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
	for _, b := range blockedList {
		c := get(b.wl.Namespace + "/" + b.wl.Name)
		c.verdict = &dispatch.Verdict{Reason: b.reason, Message: b.message, Withdraw: len(b.wl.Status.NominatedClusters) > 0}
	}

	work := make(chan *change)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var errs []error
	for i := 0; i < d.Writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				if err := d.apply(ctx, c); err != nil {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
				}
			}
		}()
	}
	for _, c := range changes {
		if c.wl != nil {
			work <- c
		}
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

// apply persists one workload's decisions in a single status write, then records Events.
func (d *Dispatcher) apply(ctx context.Context, c *change) error {
	wl := c.wl.DeepCopy()
	st := &wl.Status
	gen := wl.Generation
	for _, r := range c.rejections {
		st.RejectedClusters = append(st.RejectedClusters, gantry.RejectedCluster{Name: r.Cluster, Reason: r.Reason, Message: r.Message})
	}
	var event func(job client.Object)
	switch {
	case c.winner != "":
		st.ClusterName = c.winner
		msg := "admitted by " + c.winner
		setCondition(st, gantry.WorkloadAdmitted, metav1.ConditionTrue, gantry.ReasonAdmittedByCluster, msg, gen)
		setCondition(st, gantry.WorkloadPending, metav1.ConditionFalse, gantry.ReasonAdmittedByCluster, msg, gen)
		others := without(st.NominatedClusters, c.winner)
		event = func(job client.Object) {
			if len(others) == 0 {
				d.Recorder.Eventf(job, nil, corev1.EventTypeNormal, EventAdmitted, "Dispatch", "Admitted by %s (epoch %d)", c.winner, st.DispatchEpoch)
				return
			}
			d.Recorder.Eventf(job, nil, corev1.EventTypeNormal, EventAdmitted, "Dispatch", "Admitted by %s (epoch %d); withdrawing the copies from %s",
				c.winner, st.DispatchEpoch, strings.Join(others, ", "))
		}
	case c.nomination != nil:
		st.DispatchEpoch = c.nomination.Epoch
		st.NominatedClusters = c.nomination.Clusters
		list := strings.Join(c.nomination.Clusters, ", ")
		setCondition(st, gantry.WorkloadDispatched, metav1.ConditionTrue, gantry.ReasonNominated,
			fmt.Sprintf("dispatched to %s (epoch %d)", list, c.nomination.Epoch), gen)
		setCondition(st, gantry.WorkloadPending, metav1.ConditionTrue, gantry.ReasonWaitingForAdmission,
			"waiting for "+list+" to admit", gen)
		event = func(job client.Object) {
			d.Recorder.Eventf(job, nil, corev1.EventTypeNormal, EventDispatched, "Dispatch", "Dispatched to %s (epoch %d)", list, c.nomination.Epoch)
		}
	case c.verdict != nil:
		if c.verdict.Withdraw {
			st.NominatedClusters = nil
			setCondition(st, gantry.WorkloadDispatched, metav1.ConditionFalse, c.verdict.Reason, c.verdict.Message, gen)
		}
		prev := apimeta.FindStatusCondition(st.Conditions, gantry.WorkloadPending)
		if prev == nil || prev.Reason != c.verdict.Reason {
			eventType := corev1.EventTypeNormal
			if c.verdict.Reason != gantry.ReasonWaitingForQuota {
				eventType = corev1.EventTypeWarning
			}
			v := *c.verdict
			event = func(job client.Object) {
				d.Recorder.Eventf(job, nil, eventType, EventPending, "Dispatch", "%s: %s", v.Reason, v.Message)
			}
		}
		setCondition(st, gantry.WorkloadPending, metav1.ConditionTrue, c.verdict.Reason, c.verdict.Message, gen)
	}
	if equality.Semantic.DeepEqual(c.wl.Status, wl.Status) {
		return nil
	}
	if err := d.Client.Status().Update(ctx, wl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing dispatch status of %s: %w", client.ObjectKeyFromObject(wl), err)
	}
	d.mu.Lock()
	d.assumed[wl.Namespace+"/"+wl.Name] = wl
	d.mu.Unlock()
	if c.winner != "" {
		winners.Inc()
		if created := wl.CreationTimestamp.Time; !created.IsZero() {
			admissionLatency.Observe(d.Clock.Since(created).Seconds())
		}
	}
	if c.nomination != nil {
		nominations.Inc()
	}
	if job := jobRef(wl); job != nil && event != nil {
		event(job)
	}
	return nil
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
}

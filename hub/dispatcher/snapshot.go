// Package dispatcher runs the hub's dispatch loop: it builds a dispatch.Snapshot from the hub's caches
// and the connected workers, calls dispatch.Plan and persists each decision in the Workload's status
// before anything is created on a worker.
package dispatcher

import (
	"cmp"
	"strconv"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/hub/remote"
)

// Workers are the connected worker clusters, as the dispatcher reaches them; *remote.Manager is the
// real one.
type Workers interface {
	// Worker returns the connected cluster of that name.
	Worker(name string) (remote.Worker, bool)
	// Tried says whether the hub has tried to connect the cluster since it started.
	Tried(name string) bool
}

// hubState is what one pass reads from the hub's cache and the dispatcher's book.
type hubState struct {
	// workloads are the book's entries in queue order, but for those its tallies count; over holds, by
	// key, those the dispatcher's own writes stand in for (see overlay), and entries all of the book's by
	// key.
	workloads []*entry
	// parking is what a pass reads of each of workloads to park it; nil when it parks none.
	parking    []parkingMeta
	tallies    *tallies
	over       map[string]*entry
	entries    map[string]*entry
	globals    []gantry.GlobalQueue
	queues     []gantry.Queue
	clusters   []gantry.WorkerCluster
	cohorts    []gantry.Cohort
	namespaces map[string]labels.Set
	// namespaceVersions are the Namespaces' resourceVersions, by name.
	namespaceVersions map[string]string
}

// entry is the entry of the key as the pass sees it: the overlay's, else the book's; nil when there
// is none.
func (st *hubState) entry(key string) *entry {
	if e := st.over[key]; e != nil {
		return e
	}
	return st.entries[key]
}

// workload is the Workload of the key as the pass sees it; nil when there is none.
func (st *hubState) workload(key string) *gantry.Workload {
	if e := st.entry(key); e != nil {
		return e.wl
	}
	return nil
}

// writable is the Workload of the key if the pass may write it: it exists and is not being deleted.
func (st *hubState) writable(key string) *gantry.Workload {
	if wl := st.workload(key); wl != nil && wl.DeletionTimestamp == nil {
		return wl
	}
	return nil
}

// built is a pass's snapshot, and what the hub reads of it besides.
type built struct {
	snap *dispatch.Snapshot
	// locals are the Queues the snapshot's workloads name, in the same order; tallyQueues those of its
	// tallies.
	locals      []*queueRef
	tallyQueues []queueKey
	// parked are the Queues whose workloads the pass parked, each counting them (queueRef.parked).
	parked []*queueRef
}

// buildSnapshot turns hub state into the dispatcher's snapshot. A pending workload whose Queue cannot
// be resolved comes under no GlobalQueue, with its QueueProblem. The snapshot's workloads are the
// entries' own, set for this pass: they hold until the next one.
func buildSnapshot(st *hubState, workers Workers, now time.Time, rejectionTTL time.Duration) *built {
	return buildParking(st, workers, now, rejectionTTL, nil)
}

// parker tells, once a pass has read the clusters and the queues, which GlobalQueues it parks and
// which it may cut (rest).
type parker func(s *dispatch.Snapshot, r *resolver) *passRest

// buildParking is buildSnapshot leaving out the parkable workloads of the GlobalQueues park parks, and
// the settled tails of those it may cut (cut); both are counted in the built's parked Queues. A nil
// park parks and cuts nothing.
func buildParking(st *hubState, workers Workers, now time.Time, rejectionTTL time.Duration, park parker) *built {
	s := &dispatch.Snapshot{Clusters: snapshotClusters(st.clusters, workers), Queues: map[string]*dispatch.GlobalQueue{},
		Cohorts: cohortsOf(st.cohorts), Now: now, RejectionTTL: rejectionTTL}
	b := &snapshotBuilder{out: &built{snap: s}, r: newResolver(st, s.Queues), workers: workers, now: now, rejectionTTL: rejectionTTL}
	if park != nil {
		b.rest = park(s, b.r)
		b.r.parked = b.rest.parked
	}
	leaving := b.rest != nil && (b.rest.parked != nil || b.rest.cuts != nil)
	if !leaving { // every workload goes in; else what the parked leave is not known up front
		s.Workloads, b.out.locals = make([]*dispatch.Workload, 0, len(st.workloads)), make([]*queueRef, 0, len(st.workloads))
	}
	overlaid, parking := len(st.over) > 0, leaving && len(st.parking) == len(st.workloads)
	for i, e := range st.workloads {
		// The dispatcher's own writes stand in for the entry where it wrote; they never do in a parked
		// queue, which is not quiet while a write of it is in flight or settles (rest), nor for a
		// settled entry, which no pass decided for since.
		if parking && st.parking[i].parkable {
			if m := &st.parking[i]; b.r.parks(m.queue) || b.cuts(m, e) {
				b.park(m.queue)
				continue
			}
		}
		if o := st.over[e.w.Key]; overlaid && o != nil {
			e = o
		} else if b.rest != nil && i < len(st.parking) {
			b.markSettled(e, &st.parking[i])
		}
		b.include(e)
	}
	b.recordCuts()
	if st.tallies != nil {
		pt := st.tallies.forPass(st.over, st.entries)
		for _, e := range pt.standIns {
			b.include(e)
		}
		s.Tallies, s.Tallied, b.out.tallyQueues = pt.tallies, pt.tallied, pt.queues
	}
	return b.out
}

// park counts a parked workload of the Queue.
func (b *snapshotBuilder) park(q *queueRef) {
	if q.countedBy != b.r {
		q.countedBy, q.parked = b.r, 0
		b.out.parked = append(b.out.parked, q)
	}
	q.parked++
}

type snapshotBuilder struct {
	out *built
	r   *resolver
	// rest is what the pass parks and may cut (nil: nothing); cutting the tails it cuts, by GlobalQueue.
	rest         *passRest
	cutting      map[string]*tail
	workers      Workers
	now          time.Time
	rejectionTTL time.Duration
}

// include adds the entry's workload to the snapshot, as this pass sees it.
func (b *snapshotBuilder) include(e *entry) {
	w := &e.w
	gqName, problem := b.r.resolve(e.queue)
	queue, nominatedQueue, observed := "", "", []dispatch.Copy(nil)
	switch {
	case w.Phase == dispatch.Admitted:
		// Its Job may run until the workload is finished, or, when it is being deleted, until the
		// finalizer has seen the Job gone: it uses the quota it was admitted under all that time,
		// whatever its Queue names now. A GlobalQueue deleted meanwhile has no ledger to count it in.
		queue, problem = cmp.Or(e.recordedQueue, gqName), nil
	case e.deleting:
		return // nothing runs, and nothing more is decided for it
	case problem != nil:
		if w.Phase != dispatch.Pending {
			return
		}
		// dispatch.Plan says why it waits; under no GlobalQueue, it counts in none.
	default:
		queue, nominatedQueue = gqName, e.recordedQueue
		if w.Phase == dispatch.Pending && w.Epoch > 0 {
			observed = observeCopies(e.wl, b.workers)
		}
	}
	// Set only when they change, so that a walk over a queue at rest leaves its memory as it was.
	if w.GlobalQueue != queue || w.NominatedQueue != nominatedQueue {
		w.GlobalQueue, w.NominatedQueue = queue, nominatedQueue
	}
	if (w.QueueProblem == nil) != (problem == nil) || (problem != nil && *w.QueueProblem != *problem) {
		w.QueueProblem = problem
	}
	if w.Copies != nil || observed != nil {
		w.Copies = observed
	}
	b.out.snap.Workloads = append(b.out.snap.Workloads, w)
	b.out.locals = append(b.out.locals, e.queue)
}

func snapshotClusters(clusters []gantry.WorkerCluster, workers Workers) map[string]dispatch.Cluster {
	out := make(map[string]dispatch.Cluster, len(clusters))
	for _, wc := range clusters {
		w, connected := workers.Worker(wc.Name)
		var kinds map[string]bool
		if connected {
			kinds = kindSet(w.Kinds())
		}
		out[wc.Name] = dispatch.Cluster{
			Name:       wc.Name,
			Connected:  connected,
			Connecting: !connected && !workers.Tried(wc.Name),
			AgentReady: apimeta.IsStatusConditionTrue(wc.Status.Conditions, gantry.ClusterAgentReady),
			Cordoned:   wc.Spec.Cordoned,
			Fenced:     wc.Spec.Fenced,
			GPUs:       dispatch.GPUCapacityOf(wc.Status.Capacity),
			Kinds:      kinds,
		}
	}
	return out
}

func kindSet(kinds []gantry.JobKind) map[string]bool {
	if kinds == nil {
		return nil
	}
	out := make(map[string]bool, len(kinds))
	for _, k := range kinds {
		out[string(k)] = true
	}
	return out
}

// globalQueueOf is the GlobalQueue's strategy and quota, and the namespaces it selects (none when its
// selector is missing or invalid).
func globalQueueOf(gq *gantry.GlobalQueue) (*dispatch.GlobalQueue, labels.Selector) {
	q := &dispatch.GlobalQueue{
		Name:          gq.Name,
		StrictFIFO:    gq.Spec.QueueingStrategy == gantry.StrictFIFO,
		MaxCandidates: int(gq.Spec.Dispatch.MaxCandidates),
		Quota:         map[string]dispatch.Resources{},
		Cohort:        gq.Spec.Cohort,
		Weight:        copyOfWeight(gq.Spec.FairSharing.Weight),
	}
	if q.MaxCandidates == 0 {
		q.MaxCandidates = gantry.DefaultMaxCandidates
	}
	for _, sc := range gq.Spec.Dispatch.Scores {
		q.Scores = append(q.Scores, dispatch.WeightedScore{Name: string(sc.Name), Weight: int(sc.Weight)})
	}
	q.PreferredClusters = gq.Spec.Dispatch.PreferredClusters
	q.Incremental = gq.Spec.Dispatch.Mode == gantry.DispatchIncremental
	q.Preemption = gq.Spec.Preemption
	for _, c := range gq.Spec.Clusters {
		q.Clusters = append(q.Clusters, c.Name)
		q.Quota[c.Name] = dispatch.FromResourceList(c.Quota)
		if c.BorrowingLimit != nil {
			if q.BorrowingLimit == nil {
				q.BorrowingLimit = map[string]dispatch.Resources{}
			}
			q.BorrowingLimit[c.Name] = dispatch.FromResourceList(c.BorrowingLimit)
		}
		if c.LendingLimit != nil {
			if q.LendingLimit == nil {
				q.LendingLimit = map[string]dispatch.Resources{}
			}
			q.LendingLimit[c.Name] = dispatch.FromResourceList(c.LendingLimit)
		}
	}
	if gq.Spec.NamespaceSelector == nil {
		return q, labels.Nothing()
	}
	sel, err := metav1.LabelSelectorAsSelector(gq.Spec.NamespaceSelector)
	if err != nil {
		return q, labels.Nothing()
	}
	return q, sel
}

// cohortsOf is the tree of cohorts the dispatcher decides over: a cohort on a cycle of parents is made
// a root, so that no quota is lent round a loop.
func cohortsOf(cohorts []gantry.Cohort) map[string]*dispatch.Cohort {
	out := make(map[string]*dispatch.Cohort, len(cohorts))
	for i := range cohorts {
		c := &cohorts[i]
		dc := &dispatch.Cohort{Name: c.Name, Parent: c.Spec.Parent, Weight: copyOfWeight(c.Spec.FairSharing.Weight)}
		for _, cq := range c.Spec.Clusters {
			if cq.Quota != nil {
				if dc.Quota == nil {
					dc.Quota = map[string]dispatch.Resources{}
				}
				dc.Quota[cq.Name] = dispatch.FromResourceList(cq.Quota)
			}
			if cq.LendingLimit != nil {
				if dc.LendingLimit == nil {
					dc.LendingLimit = map[string]dispatch.Resources{}
				}
				dc.LendingLimit[cq.Name] = dispatch.FromResourceList(cq.LendingLimit)
			}
		}
		out[c.Name] = dc
	}
	return out
}

// copyOfWeight keeps the snapshot apart from the cache's objects, which a pass must never change.
func copyOfWeight(w *int32) *int32 {
	if w == nil {
		return nil
	}
	v := *w
	return &v
}

// resolver finds the GlobalQueue a Workload's Queue names now (dispatch.QueueIndex), once per Queue
// in a pass.
type resolver struct {
	index  dispatch.QueueIndex
	parked map[string]bool // GlobalQueues whose parkable workloads the pass leaves out
}

type queueKey struct{ namespace, name string }

// queueRef is a Queue that Workloads name, whether or not it exists, held once for all of them: a deep
// queue's Workloads name few Queues, and a pass resolves each of those once.
type queueRef struct {
	queueKey
	resolvedBy *resolver // the pass whose resolution it holds
	resolution
	users int // entries of the book that name it
	// parkedBy is the pass that worked out parks: whether it parks the Queue's parkable workloads;
	// countedBy the pass that counted how many it parked.
	parkedBy *resolver
	parks    bool
	// cuttable: its entries may settle; tail is what the pass cuts of its GlobalQueue's settled entries
	// (nil: none). cutBy is the pass that looked them up.
	cutBy     *resolver
	cuttable  bool
	tail      *tail
	countedBy *resolver
	parked    int
}

type resolution struct {
	globalQueue string
	problem     *dispatch.QueueProblem
}

// newResolver reads the GlobalQueues into queues, and the Queues, for resolving Workloads' queues.
func newResolver(st *hubState, queues map[string]*dispatch.GlobalQueue) *resolver {
	r := &resolver{index: dispatch.QueueIndex{GlobalQueueOf: make(map[dispatch.QueueRef]string, len(st.queues)),
		Selects: make(map[string]labels.Selector, len(st.globals)), Namespaces: st.namespaces}}
	for i := range st.globals {
		gq := &st.globals[i]
		queues[gq.Name], r.index.Selects[gq.Name] = globalQueueOf(gq)
	}
	for _, q := range st.queues {
		r.index.GlobalQueueOf[dispatch.QueueRef{Namespace: q.Namespace, Name: q.Name}] = q.Spec.GlobalQueue
	}
	return r
}

// resolve returns the GlobalQueue the Queue names, and why its Workloads cannot be dispatched under it
// (nil when they can). The name comes back even when that GlobalQueue is missing or does not select
// the namespace.
func (r *resolver) resolve(q *queueRef) (string, *dispatch.QueueProblem) {
	if q.resolvedBy != r {
		gq, problem := r.index.Resolve(dispatch.QueueRef{Namespace: q.namespace, Name: q.name})
		q.resolution, q.resolvedBy = resolution{gq, problem}, r
	}
	return q.globalQueue, q.problem
}

// parks says whether the pass leaves out the Queue's parkable workloads: its GlobalQueue is parked and
// its workloads can be dispatched under it.
func (r *resolver) parks(q *queueRef) bool {
	if q.parkedBy != r {
		gq, problem := r.resolve(q)
		q.parks, q.parkedBy = problem == nil && r.parked[gq], r
	}
	return q.parks
}

// rejectionsOf reads when each cluster that rejected the Workload did (a rejection recorded without a
// time counts as recorded when the Workload was created), and how often it was taken back from each
// cluster other than by a preemption; nil when it has none.
func rejectionsOf(wl *gantry.Workload) (map[string]time.Time, map[string]dispatch.Evictions) {
	var at map[string]time.Time
	for _, r := range wl.Status.RejectedClusters {
		if at == nil {
			at = map[string]time.Time{}
		}
		at[r.Name] = cmp.Or(r.Time.Time, wl.CreationTimestamp.Time)
	}
	var evicted map[string]dispatch.Evictions
	for _, e := range wl.Status.Evictions {
		if e.Reason == gantry.ReasonPreempted {
			continue
		}
		if evicted == nil {
			evicted = map[string]dispatch.Evictions{}
		}
		n := evicted[e.Cluster]
		evicted[e.Cluster] = dispatch.Evictions{Count: n.Count + 1, LastReason: e.Reason}
	}
	return at, evicted
}

// currentCopy is the workload's copy on the cluster if it belongs to the workload's current epoch.
// Copies of other epochs or of another Workload of the same name are fenced: nil.
func currentCopy(wl *gantry.Workload, cluster string, workers Workers) *gantry.Workload {
	w, ok := workers.Worker(cluster)
	if !ok {
		return nil
	}
	cp := w.CopyInPlace(client.ObjectKeyFromObject(wl))
	if cp == nil || cp.Labels[gantry.WorkloadUIDLabel] != string(wl.UID) ||
		cp.Labels[gantry.DispatchEpochLabel] != strconv.FormatInt(wl.Status.DispatchEpoch, 10) {
		return nil
	}
	return cp
}

// observeCopies reads the copies of the workload's current epoch on its nominated clusters.
func observeCopies(wl *gantry.Workload, workers Workers) []dispatch.Copy {
	var out []dispatch.Copy
	for _, c := range wl.Status.Nominated() {
		cp := currentCopy(wl, c, workers)
		if cp == nil {
			continue
		}
		cond := apimeta.FindStatusCondition(cp.Status.Conditions, gantry.WorkloadAdmitted)
		if cond == nil {
			continue
		}
		switch {
		case cond.Status == metav1.ConditionTrue:
			out = append(out, dispatch.Copy{Cluster: c, Admitted: true, AdmittedAt: cond.LastTransitionTime.Time})
		case gantry.RejectsCluster(cond.Reason):
			out = append(out, dispatch.Copy{Cluster: c, Rejected: true, Reason: cond.Reason, Message: cond.Message})
		case cond.Reason == gantry.ReasonReservationExpired:
			out = append(out, dispatch.Copy{Cluster: c, Expired: true, Reason: cond.Reason, Message: cond.Message})
		case cond.ObservedGeneration == cp.Generation:
			out = append(out, dispatch.Copy{Cluster: c, Waiting: true, Reason: cond.Reason, Message: cond.Message,
				WouldFitWithout: cp.Status.WouldFitWithout})
		}
	}
	return out
}

// jobRef is the hub's job a Workload stands for, of whatever kind, for Events: its controller owner,
// as the owner reference names it. Nil when it has none.
func jobRef(wl *gantry.Workload) client.Object {
	ref := metav1.GetControllerOf(wl)
	if ref == nil {
		return nil
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: ref.APIVersion, Kind: ref.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Name: ref.Name, UID: ref.UID},
	}
}

package queues

import (
	"cmp"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// Read is what a pass read of the hub besides the Workloads, whose changes the manager was told of.
type Read struct {
	GlobalQueues []gantry.GlobalQueue
	Queues       []gantry.Queue
	Cohorts      []gantry.Cohort
	Namespaces   []corev1.Namespace
	// Clusters are the worker clusters as the dispatcher knows them, from their objects and connections.
	Clusters map[string]dispatch.Cluster
	// Own are, by key, the dispatcher's own writes that the cache does not show as written: they stand
	// in for the book's Workloads.
	Own map[string]*gantry.Workload
	// Copies reads the copies of a nominated workload's current epoch on the workers.
	Copies func(wl *gantry.Workload) []dispatch.Copy
	Now    time.Time
	// RejectionTTL is how long a cluster's rejection of a workload holds (0: dispatch.DefaultRejectionTTL).
	RejectionTTL time.Duration
}

// Pass is one pass's view of the hub: the book as the last Sync left it, with the dispatcher's own
// writes laid over it, and the snapshot dispatch.Plan decides over.
type Pass struct {
	m    *Manager
	read Read
	// over holds, by key, the entries the dispatcher's own writes stand in for.
	over       map[string]*entry
	namespaces map[string]labels.Set
	// rest is what the pass parks and may cut; nil for a pass over every workload.
	rest *passRest
	out  *built
	// uncuts is how many times the pass was built again with tails it had cut.
	uncuts int
}

// built is a pass's snapshot, and what the queues' statuses read of it besides.
type built struct {
	snap *dispatch.Snapshot
	// locals are the Queues the snapshot's workloads name, in the same order; tallyQueues those of its
	// tallies.
	locals      []*queueRef
	tallyQueues []queueKey
	// parked are the Queues whose workloads the pass parked, each counting them (queueRef.parked).
	parked []*queueRef
}

// Begin starts a pass: it takes in the events since the last one and builds the snapshot, leaving out
// the parkable workloads of the queues none of them woke (rest) and the settled tails of deep ones (cut).
// The manager must have been synced (Sync) first.
func (m *Manager) Begin(r Read) *Pass {
	p := m.newPass(r)
	touched, left := m.book.takeChanges()
	p.build(func(s *dispatch.Snapshot, res *resolver) *passRest {
		return m.rest.begin(restInputs{read: &p.read, over: p.over, snap: s, r: res, touched: touched, left: left,
			watched: m.book.watched})
	})
	return p
}

// Full builds the snapshot of every workload and leaves the manager as it was: what a pass that parks
// must decide as.
func (m *Manager) Full(r Read) *Pass {
	p := m.newPass(r)
	p.build(nil)
	return p
}

// Full is the pass over every workload that reads what p read.
func (p *Pass) Full() *Pass { return p.m.Full(p.read) }

func (m *Manager) newPass(r Read) *Pass {
	p := &Pass{m: m, read: r, namespaces: make(map[string]labels.Set, len(r.Namespaces))}
	p.read.RejectionTTL = cmp.Or(r.RejectionTTL, dispatch.DefaultRejectionTTL)
	for i := range r.Namespaces {
		p.namespaces[r.Namespaces[i].Name] = r.Namespaces[i].Labels
	}
	if len(r.Own) > 0 {
		p.over = make(map[string]*entry, len(r.Own))
		for key, wl := range r.Own {
			p.over[key] = newEntry(wl, nil)
		}
	}
	return p
}

// Snapshot is what dispatch.Plan decides over in this pass. Its workloads are the book's own entries,
// set for this pass: they hold until the next one.
func (p *Pass) Snapshot() *dispatch.Snapshot { return p.out.snap }

// Uncut builds the snapshot again walking more of the queues' settled entries: the quota left might
// hold some of the tails they cut (dispatch.Result.Uncut). Each time walks more, and a queue whose
// settled entries are all walked has no tail to give back.
func (p *Pass) Uncut(queues []string) {
	for _, q := range queues {
		p.rest.cuts[q] *= CutGrowth
	}
	p.uncuts++
	p.build(nil)
}

// WokeAll is the event that made the pass walk every workload (Resync, SpecChanged, ClusterChanged),
// naming what changed; nil when none did, or for a pass over every workload (Full).
func (p *Pass) WokeAll() Event {
	if p.rest == nil {
		return nil
	}
	return p.rest.wokeAll
}

// Uncuts is how many times the pass was built again with tails it had cut.
func (p *Pass) Uncuts() int { return p.uncuts }

// Parked is how many workloads the pass left out, parked or cut.
func (p *Pass) Parked() int {
	n := 0
	for _, q := range p.out.parked {
		n += q.parked
	}
	return n
}

// entry is the entry of the key as the pass sees it: the dispatcher's own write, else the book's; nil
// when there is none.
func (p *Pass) entry(key string) *entry {
	if e := p.over[key]; e != nil {
		return e
	}
	return p.m.book.entries[key]
}

// Writable is the Workload of the key if the pass may write it: it exists, as the pass sees it, and is
// not being deleted.
func (p *Pass) Writable(key string) *gantry.Workload {
	if e := p.entry(key); e != nil && e.wl.DeletionTimestamp == nil {
		return e.wl
	}
	return nil
}

// parker tells, once a pass has read the clusters and the queues, which GlobalQueues it parks and
// which it may cut (rest).
type parker func(s *dispatch.Snapshot, r *resolver) *passRest

// build makes the pass's snapshot, leaving out the parkable workloads of the GlobalQueues the pass
// parks, and the settled tails of those it may cut (cut); both are counted in the built's parked
// Queues. A pass without rest, and a nil park on its first build, parks and cuts nothing.
func (p *Pass) build(park parker) {
	s := &dispatch.Snapshot{Clusters: p.read.Clusters, Queues: map[string]*dispatch.GlobalQueue{},
		Cohorts: cohortsOf(p.read.Cohorts), Now: p.read.Now, RejectionTTL: p.read.RejectionTTL,
		Proposed: p.m.proposed, AgentNews: p.m.agentNews}
	b := &snapshotBuilder{out: &built{snap: s}, r: newResolver(&p.read, p.namespaces, s.Queues), copies: p.read.Copies}
	if park != nil {
		p.rest = park(s, b.r)
	}
	b.rest = p.rest
	if b.rest != nil {
		b.r.parked = b.rest.parked
	}
	bk := p.m.book
	leaving := b.rest != nil && (b.rest.parked != nil || b.rest.cuts != nil)
	if !leaving { // every workload goes in; else what the parked leave is not known up front
		s.Workloads, b.out.locals = make([]*dispatch.Workload, 0, len(bk.order)), make([]*queueRef, 0, len(bk.order))
	}
	overlaid := len(p.over) > 0
	for i, e := range bk.order {
		// The dispatcher's own writes stand in for the entry where it wrote; they never do in a parked
		// queue, which is not quiet while a write of it is in flight or settles (rest), nor for a
		// settled entry, which no pass decided for since.
		if leaving && bk.parking[i].parkable {
			if m := &bk.parking[i]; b.r.parks(m.queue) || b.cuts(m, e) {
				b.park(m.queue)
				continue
			}
		}
		if o := p.over[e.w.Key]; overlaid && o != nil {
			e = o
		} else if b.rest != nil {
			b.markSettled(e, &bk.parking[i])
		}
		b.include(e)
	}
	b.recordCuts()
	pt := bk.tallies.forPass(p.over, bk.entries)
	for _, e := range pt.standIns {
		b.include(e)
	}
	s.Tallies, s.Tallied, b.out.tallyQueues = pt.tallies, pt.tallied, pt.queues
	p.out = b.out
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
	rest    *passRest
	cutting map[string]*tail
	copies  func(wl *gantry.Workload) []dispatch.Copy
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
		if w.Phase == dispatch.Pending && w.Epoch > 0 && b.copies != nil {
			observed = b.copies(e.wl)
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

package dispatcher

import (
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/dispatch"
)

// A deep queue at rest is mostly workloads that wait for quota, and a pass that walks them all only
// finds again that they wait. rest lets passes leave them out: a component of the queues (a tree of
// cohorts, or a queue without one; dispatch.ComponentOf) that the last pass walked and decided nothing
// for is quiet, and stays so until something it decides over changes. A pass then parks the quiet
// components' waiting workloads, none of which holds a reservation (a nominated workload keeps its
// component walked): it counts them for the queues' statuses and decides nothing for them, which is
// what it would decide.
//
// What a component decides over is the fields of dispatch.Snapshot; planInputs (inputs.go) names, for
// each, how a pass learns that it changed, and a test holds it to the snapshot's type. Any change of a
// spec or of a cluster's availability walks everything (but quota that only grew, of a GlobalQueue
// without a cohort, walks its own component), and every Resync pass walks everything as a safety net.
//
// A queue that may preempt proposes a verdict for each of its waiting workloads in every pass (a
// preemption may say more of them): its component is never quiet while it has any.
type rest struct {
	known bool // false: the next pass walks everything
	// walks are, by GlobalQueue, how many settled entries the next pass walks before it cuts the rest,
	// where more than cutAfter: half as many as the last pass walked after it had to plan again.
	walks    map[string]int
	cutAfter int
	specs    seenSpecs
	clusters map[string]dispatch.Cluster
	// overQueues are the GlobalQueues of the workloads the last pass's overlay covered.
	overQueues []string
	parts      map[string]partRest // by component
	lastPass   time.Time           // when the last pass began
}

// partRest is what the last pass left of a component.
type partRest struct {
	// quiet: the component's workloads were decided nothing for.
	quiet bool
	// readCapacity: some of its workloads waited for room the clusters' capacity reports show.
	readCapacity bool
}

// forget makes the next pass walk every workload.
func (r *rest) forget() { r.known = false }

// passRest is one pass's view of what changed since the last, and the GlobalQueues it parks.
type passRest struct {
	specs      seenSpecs
	components map[string]string // GlobalQueue -> component
	parked     map[string]bool   // by GlobalQueue
	// cuts are the walked GlobalQueues whose settled tails it may cut, each with how many of its
	// settled entries it walks first.
	cuts map[string]int
}

func (p *passRest) component(queue string) string {
	if c, ok := p.components[queue]; ok {
		return c
	}
	return "queue/" + queue
}

// restInputs are what a pass read that tells what changed since the last one.
type restInputs struct {
	st           *hubState
	snap         *dispatch.Snapshot // its clusters, queues and cohorts; no workloads yet
	r            *resolver
	touched      []*entry // entries the book took in since the last pass
	left         []string // GlobalQueues of the entries they replaced or that left, as the last pass saw them
	watched      map[*entry]struct{}
	now          time.Time
	rejectionTTL time.Duration
}

// begin works out which GlobalQueues this pass parks.
func (r *rest) begin(in restInputs) *passRest {
	p := &passRest{specs: specsOf(in.st), components: make(map[string]string, len(in.snap.Queues))}
	since := r.lastPass
	r.lastPass = in.now
	for name := range in.snap.Queues {
		p.components[name] = dispatch.ComponentOf(in.snap, name)
	}
	grown, changed := r.specs.changes(p.specs)
	if !r.known || changed || !sameAvailability(r.clusters, in.snap.Clusters) {
		return p // and settles anew every workload it walks
	}
	dirty := map[string]bool{}
	mark := func(queue string) {
		if queue != "" {
			dirty[p.component(queue)] = true
		}
	}
	for _, q := range grown {
		mark(q)
	}
	markEntry := func(e *entry) {
		gq, _ := in.r.resolve(e.queue)
		mark(gq)
		mark(e.recordedQueue)
	}
	for _, q := range in.left {
		mark(q)
	}
	for _, q := range r.overQueues {
		mark(q)
	}
	for _, e := range in.touched {
		markEntry(e)
	}
	for _, o := range in.st.over {
		markEntry(o)
	}
	for e := range in.watched {
		if in.st.over[e.w.Key] == nil && watchedChanged(e, since, in.now, in.rejectionTTL) {
			markEntry(e)
		}
	}
	capacityChanged := !sameCapacity(r.clusters, in.snap.Clusters)
	for name := range in.snap.Queues {
		part := p.component(name)
		switch pr := r.parts[part]; {
		case pr.quiet && !dirty[part] && !(capacityChanged && pr.readCapacity):
			if p.parked == nil {
				p.parked = map[string]bool{}
			}
			p.parked[name] = true
		case dispatch.CanCut(in.snap, name):
			if p.cuts == nil {
				p.cuts = map[string]int{}
			}
			p.cuts[name] = max(r.walks[name], r.cutAfter)
		}
	}
	return p
}

// end remembers what the pass decided over and which components it decided nothing for.
func (r *rest) end(p *passRest, st *hubState, snap *dispatch.Snapshot, res *dispatch.Result) {
	decided := map[string]bool{}
	mark := func(key string) {
		markUnsettled(st, key)
		if e := st.entry(key); e != nil && e.w.GlobalQueue != "" {
			decided[p.component(e.w.GlobalQueue)] = true
		}
	}
	for _, w := range res.Winners {
		mark(w.Key)
	}
	for key := range res.Rejections {
		mark(key)
	}
	for i := range res.Nominations {
		mark(res.Nominations[i].Key)
	}
	for i := range res.Verdicts {
		mark(res.Verdicts[i].Key)
	}
	for _, key := range res.Held {
		mark(key)
	}
	for i := range res.Preemptions {
		mark(res.Preemptions[i].Victim)
		mark(res.Preemptions[i].Preemptor)
	}
	parts := make(map[string]partRest, len(p.components))
	for name := range snap.Queues {
		part := p.component(name)
		pr, seen := parts[part]
		if !seen {
			pr.quiet = !decided[part]
		}
		// A parked queue's workloads were not asked this time: what they waited for stands.
		pr.readCapacity = pr.readCapacity || res.ReadCapacity[name] || (p.parked[name] && r.parts[part].readCapacity)
		parts[part] = pr
	}
	r.known, r.specs, r.clusters, r.parts = true, p.specs, snap.Clusters, parts
	clear(r.walks)
	for q, n := range p.cuts {
		if n /= 2; n > r.cutAfter {
			if r.walks == nil {
				r.walks = map[string]int{}
			}
			r.walks[q] = n
		}
	}
	r.overQueues = r.overQueues[:0]
	for _, o := range st.over {
		r.overQueues = append(r.overQueues, o.w.GlobalQueue, o.recordedQueue)
	}
}

// watchedChanged says whether the entry's component is walked for it: it is nominated, or a rejection
// of it lapsed since the last pass (every pass looks at every watched entry). A nominated workload's
// copies are read on the workers as the pass goes: a pass that parked its component could take in a
// change of a copy (one admitted a moment before) without deciding on it, so such a component is
// never parked.
func watchedChanged(e *entry, since, now time.Time, rejectionTTL time.Duration) bool {
	return len(e.w.Nominated) > 0 || (e.timed && e.w.RejectionLapsed(since, now, rejectionTTL))
}

// sameAvailability says whether the same clusters are there, each as connected, ready, cordoned,
// fenced and running the same kinds as before.
func sameAvailability(was, now map[string]dispatch.Cluster) bool {
	if len(was) != len(now) {
		return false
	}
	for name, c := range now {
		o, ok := was[name]
		if !ok || o.Connected != c.Connected || o.Connecting != c.Connecting || o.AgentReady != c.AgentReady ||
			o.Cordoned != c.Cordoned || o.Fenced != c.Fenced || !maps.Equal(o.Kinds, c.Kinds) ||
			(o.Kinds == nil) != (c.Kinds == nil) {
			return false
		}
	}
	return true
}

// sameCapacity says whether every cluster reports the same GPUs as before.
func sameCapacity(was, now map[string]dispatch.Cluster) bool {
	for name, c := range now {
		if !slices.Equal(was[name].GPUs, c.GPUs) {
			return false
		}
	}
	return true
}

// seenSpecs are the specs a pass decided over, by kind and name: a GlobalQueue's, a Queue's or a
// Cohort's spec, a Namespace's labels; with the resourceVersion they were read at.
type seenSpecs map[seenKey]seenSpec

type seenKey struct{ kind, namespace, name string }

type seenSpec struct {
	resourceVersion string
	spec            any
}

func specsOf(st *hubState) seenSpecs {
	out := make(seenSpecs, len(st.globals)+len(st.queues)+len(st.cohorts)+len(st.namespaceVersions))
	for i := range st.globals {
		o := &st.globals[i]
		out[seenKey{"GlobalQueue", "", o.Name}] = seenSpec{o.ResourceVersion, &o.Spec}
	}
	for i := range st.queues {
		o := &st.queues[i]
		out[seenKey{"Queue", o.Namespace, o.Name}] = seenSpec{o.ResourceVersion, &o.Spec}
	}
	for i := range st.cohorts {
		o := &st.cohorts[i]
		out[seenKey{"Cohort", "", o.Name}] = seenSpec{o.ResourceVersion, &o.Spec}
	}
	for name, rv := range st.namespaceVersions {
		out[seenKey{"Namespace", "", name}] = seenSpec{rv, st.namespaces[name]}
	}
	return out
}

// changes compares the specs with those seen before: the same objects, each at the same version or
// with the same spec (a status write changes the version alone), but for grown, the GlobalQueues
// without a cohort whose quota only grew; changed says whether anything else differs. A queue's
// waiting workloads that waited for quota stay settled when its quota grows: its cut is checked
// against the quota as it is now, and more quota turns none of them into a workload that can never
// be held or waits for anything else.
func (s seenSpecs) changes(now seenSpecs) (grown []string, changed bool) {
	if len(s) != len(now) {
		return nil, true
	}
	for k, n := range now {
		o, ok := s[k]
		switch {
		case !ok:
			return nil, true
		case o.resourceVersion == n.resourceVersion || equality.Semantic.DeepEqual(o.spec, n.spec):
		case k.kind == "GlobalQueue" && quotaGrew(o.spec.(*gantry.GlobalQueueSpec), n.spec.(*gantry.GlobalQueueSpec)):
			grown = append(grown, k.name)
		default:
			return nil, true
		}
	}
	return grown, false
}

// quotaGrew says whether a GlobalQueue without a cohort changed from was to now only by quota that
// grew: on the same clusters, each resource limited now was limited before, and to no more.
func quotaGrew(was, now *gantry.GlobalQueueSpec) bool {
	if was.Cohort != "" || now.Cohort != "" || len(was.Clusters) != len(now.Clusters) {
		return false
	}
	for i := range now.Clusters {
		o, n := &was.Clusters[i], &now.Clusters[i]
		if o.Name != n.Name || !equality.Semantic.DeepEqual(o.BorrowingLimit, n.BorrowingLimit) ||
			!equality.Semantic.DeepEqual(o.LendingLimit, n.LendingLimit) {
			return false
		}
		for r, q := range n.Quota {
			if before, limited := o.Quota[r]; !limited || before.Cmp(q) > 0 {
				return false
			}
		}
	}
	// Everything else as it was.
	a, b := *was, *now
	a.Clusters, b.Clusters = nil, nil
	return equality.Semantic.DeepEqual(a, b)
}

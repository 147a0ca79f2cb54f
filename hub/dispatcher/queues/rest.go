package queues

import (
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// A deep queue at rest is mostly workloads that wait for quota, and a pass that walks them all only
// finds again that they wait. rest lets passes leave them out: a component of the queues (a tree of
// cohorts, or a queue without one; dispatch.ComponentOf) that the last pass walked and decided nothing
// for is quiet, and stays so until an event wakes it (events.go). A pass then parks the quiet
// components' waiting workloads, none of which holds a reservation (a nominated workload keeps its
// component walked): it counts them for the queues' statuses and decides nothing for them, which is
// what it would decide. Any change of a spec or of a cluster's availability walks everything (but
// quota that only grew, of a GlobalQueue without a cohort, walks its own component), and every Resync
// pass walks everything as a safety net.
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
	// wokeAll is the event that made the pass walk every workload; nil when none did.
	wokeAll    Event
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
	read    *Read
	over    map[string]*entry  // the dispatcher's own writes, by key
	snap    *dispatch.Snapshot // its clusters, queues and cohorts; no workloads yet
	r       *resolver
	touched []*entry // entries the book took in since the last pass
	left    []string // GlobalQueues of the entries they replaced or that left, as the last pass saw them
	watched map[*entry]struct{}
}

// begin works out, from the events since the last pass, which GlobalQueues this pass parks and which
// it may cut.
func (r *rest) begin(in restInputs) *passRest {
	p := &passRest{specs: specsOf(in.read), components: make(map[string]string, len(in.snap.Queues))}
	for name := range in.snap.Queues {
		p.components[name] = dispatch.ComponentOf(in.snap, name)
	}
	w := &waking{components: map[string]bool{}, p: p, r: in.r}
	r.events(in, p, func(e Event) { e.wake(w) })
	if w.all != nil {
		p.wokeAll = w.all
		return p // and settles anew every workload it walks
	}
	for name := range in.snap.Queues {
		part := p.component(name)
		switch pr := r.parts[part]; {
		case pr.quiet && !w.components[part] && !(w.capacity && pr.readCapacity):
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

// events hands over the events since the last pass: first those that wake everything, and if there is
// one, no more.
func (r *rest) events(in restInputs, p *passRest, event func(Event)) {
	since := r.lastPass
	r.lastPass = in.read.Now
	if !r.known {
		event(Resync{})
		return
	}
	grown, changed := r.specs.changes(p.specs)
	if changed != nil {
		event(*changed)
		return
	}
	if name, same := sameAvailability(r.clusters, in.snap.Clusters); !same {
		event(ClusterChanged{Cluster: name})
		return
	}
	for _, q := range grown {
		event(QuotaGrew{GlobalQueue: q})
	}
	if name, same := sameCapacity(r.clusters, in.snap.Clusters); !same {
		event(CapacityReported{Cluster: name})
	}
	for _, q := range in.left {
		event(WorkloadLeft{GlobalQueue: q})
	}
	for _, q := range r.overQueues {
		event(OwnWriteSeen{GlobalQueue: q})
	}
	for _, e := range in.touched {
		event(WorkloadChanged{e})
	}
	for _, o := range in.over {
		event(OwnWrite{o})
	}
	for e := range in.watched {
		switch {
		case in.over[e.w.Key] != nil:
		case len(e.w.Nominated) > 0:
			event(CopiesRead{e})
		case e.timed && e.w.RejectionLapsed(since, in.read.Now, in.read.RejectionTTL):
			event(RejectionLapsed{e})
		}
	}
}

// end remembers what the pass decided over and which components it decided nothing for.
func (r *rest) end(ps *Pass, res *dispatch.Result) {
	p, snap := ps.rest, ps.out.snap
	decided := map[string]bool{}
	forEachDecided(res, func(d Decided) {
		markUnsettled(ps.m.book, d.Key)
		if e := ps.entry(d.Key); e != nil && e.w.GlobalQueue != "" {
			decided[p.component(e.w.GlobalQueue)] = true
		}
	})
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
	for _, o := range ps.over {
		r.overQueues = append(r.overQueues, o.w.GlobalQueue, o.recordedQueue)
	}
}

// forEachDecided hands over a Decided event for each workload the pass decided something for, or held
// a verdict of back (a workload may come more than once).
func forEachDecided(res *dispatch.Result, event func(Decided)) {
	add := func(key string) { event(Decided{Key: key}) }
	for _, w := range res.Winners {
		add(w.Key)
	}
	for key := range res.Rejections {
		add(key)
	}
	for i := range res.Nominations {
		add(res.Nominations[i].Key)
	}
	for i := range res.Verdicts {
		add(res.Verdicts[i].Key)
	}
	for _, key := range res.Held {
		add(key)
	}
	for i := range res.Preemptions {
		add(res.Preemptions[i].Victim)
		add(res.Preemptions[i].Preemptor)
	}
}

// sameAvailability says whether the same clusters are there, each as connected, ready, cordoned,
// fenced and running the same kinds as before; if not, it names one that differs.
func sameAvailability(was, now map[string]dispatch.Cluster) (string, bool) {
	for name, c := range now {
		o, ok := was[name]
		if !ok || o.Connected != c.Connected || o.Connecting != c.Connecting || o.AgentReady != c.AgentReady ||
			o.Cordoned != c.Cordoned || o.Fenced != c.Fenced || !maps.Equal(o.Kinds, c.Kinds) ||
			(o.Kinds == nil) != (c.Kinds == nil) || !maps.Equal(o.Labels, c.Labels) || !o.Price.Equal(c.Price) {
			return name, false
		}
	}
	for name := range was {
		if _, ok := now[name]; !ok {
			return name, false
		}
	}
	return "", true
}

// sameCapacity says whether every cluster reports the same GPUs and room as before; if not, it names
// one that differs.
func sameCapacity(was, now map[string]dispatch.Cluster) (string, bool) {
	for name, c := range now {
		if !slices.Equal(was[name].GPUs, c.GPUs) || !slices.Equal(was[name].Resources, c.Resources) {
			return name, false
		}
	}
	return "", true
}

// seenSpecs are the specs a pass decided over, by kind and name: a GlobalQueue's, a Queue's or a
// Cohort's spec, a Namespace's labels; with the resourceVersion they were read at.
type seenSpecs map[seenKey]seenSpec

type seenKey struct{ kind, namespace, name string }

type seenSpec struct {
	resourceVersion string
	spec            any
}

func specsOf(read *Read) seenSpecs {
	out := make(seenSpecs, len(read.GlobalQueues)+len(read.Queues)+len(read.Cohorts)+len(read.Namespaces))
	for i := range read.GlobalQueues {
		o := &read.GlobalQueues[i]
		out[seenKey{"GlobalQueue", "", o.Name}] = seenSpec{o.ResourceVersion, &o.Spec}
	}
	for i := range read.Queues {
		o := &read.Queues[i]
		out[seenKey{"Queue", o.Namespace, o.Name}] = seenSpec{o.ResourceVersion, &o.Spec}
	}
	for i := range read.Cohorts {
		o := &read.Cohorts[i]
		out[seenKey{"Cohort", "", o.Name}] = seenSpec{o.ResourceVersion, &o.Spec}
	}
	for i := range read.Namespaces {
		o := &read.Namespaces[i]
		out[seenKey{"Namespace", "", o.Name}] = seenSpec{o.ResourceVersion, labels.Set(o.Labels)}
	}
	return out
}

// changes compares the specs with those seen before: the same objects, each at the same version or
// with the same spec (a status write changes the version alone), but for grown, the GlobalQueues
// without a cohort whose quota only grew; changed names one that differs otherwise, if any. A queue's
// waiting workloads that waited for quota stay settled when its quota grows: its cut is checked
// against the quota as it is now, and more quota turns none of them into a workload that can never
// be held or waits for anything else.
func (s seenSpecs) changes(now seenSpecs) (grown []string, changed *SpecChanged) {
	for k, n := range now {
		o, ok := s[k]
		switch {
		case !ok:
			return nil, k.event()
		case o.resourceVersion == n.resourceVersion || equality.Semantic.DeepEqual(o.spec, n.spec):
		case k.kind == "GlobalQueue" && quotaGrew(o.spec.(*gantry.GlobalQueueSpec), n.spec.(*gantry.GlobalQueueSpec)):
			grown = append(grown, k.name)
		default:
			return nil, k.event()
		}
	}
	for k := range s {
		if _, ok := now[k]; !ok {
			return nil, k.event()
		}
	}
	return grown, nil
}

func (k seenKey) event() *SpecChanged {
	return &SpecChanged{Kind: k.kind, Namespace: k.namespace, Name: k.name}
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

package dispatch

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ledger tracks, per queue and cluster, the quota admitted workloads use and nominated ones reserve,
// and per cohort, cluster and resource, what the queues and sub-cohorts of the cohort lend one another.
type ledger struct {
	// verdicts are the workloads of the pass's verdicts; its queues share them.
	verdicts *verdictWorkloads
	// unqueued are the pending workloads whose Queue gives them no GlobalQueue; stopped those their owner
	// stopped.
	unqueued []*Workload
	stopped  []*Workload
	queues   map[string]*queueLedger
	cohorts  map[string]*cohortNode
	pools    map[poolKey]*pool
	slab     []pool
	// flying is, per cluster, the requests its report does not count yet (alone.go); won, what the
	// workloads won there ask for.
	flying byCluster
	won    byCluster
}

type queueLedger struct {
	q     *GlobalQueue
	index map[corev1.ResourceName]int // resources the queue limits on some cluster
	names []corev1.ResourceName       // the same resources, in index order
	// pending is how many of its workloads are pending, once counted; lastPending the last of them met
	// while counting, and unsorted whether they came out of queue order.
	pending     int
	lastPending *Workload
	unsorted    bool
	counting    []int64 // countUsage's buffer
	clusters    []clusterLedger
	byName      map[string]int
	// cohort is the queue's cohort, nil without one; borrowed is, per resource, what the queue uses
	// (admitted and reserved) beyond its quota over all clusters, the numerator of its fair share.
	cohort   *cohortNode
	borrowed []int64
	// idle is, per resource, its unused quota over all clusters; lendable what its whole cohort tree
	// lends over all clusters.
	idle     []int64
	lendable []int64
	// rootIndex maps its resources to their index in its cohort tree's vectors, -1 for none.
	rootIndex []int
	// cached is its turn among its cohort's members, stale once it nominated since.
	cached turn
	stale  bool
	// nom walks the workloads that need clusters in this pass; maxCandidates and scores are how many
	// clusters get copies and how they are ranked.
	nom           *nominator
	maxCandidates int
	scores        []weightedScorer
	// blocked are the workloads of this pass that may preempt.
	blocked []blocked
	// cut is the tail of its waiting workloads the snapshot left out; nil when none.
	cut *Cut
	// room counts, for the whole pass, the nominations that took quota and the widenings that gave
	// some back.
	room *roomChanges
	// flying is the pass's: the requests of the copies each cluster's report may not count yet.
	flying byCluster
	// verdicts is the pass's: the workloads of its verdicts.
	verdicts *verdictWorkloads
	// now and rejectionTTL are the snapshot's: when a rejection lapses.
	now          time.Time
	rejectionTTL time.Duration
	// readCapacity: a pending workload of this pass passed every quota filter on some cluster, so what
	// it was told depends on the clusters' capacity reports.
	readCapacity bool
}

type clusterLedger struct {
	owner   *queueLedger
	name    string
	cluster Cluster
	known   bool
	quota   []int64 // math.MaxInt64 where the resource is not limited on this cluster
	// borrow is the most the queue may use beyond its quota, borrowed from its cohort (0 without one);
	// guarded the part of its quota it never lends; pools its cohort's pool of each limited resource on
	// this cluster (nil without a cohort).
	borrow  []int64
	guarded []int64
	pools   []*pool
	// ceiling is, per resource, the most the queue may ever use on the cluster (see limit).
	ceiling  []int64
	admitted []int64
	reserved []int64
	// workloads counts the queue's workloads admitted or reserved there.
	workloads int
	// lowestRunning is the lowest priority of the workloads running on the cluster (of any queue, not
	// being preempted), when running says there are any.
	lowestRunning int32
	running       bool
}

// poolKey names what one cohort's tree lends within the cohort of one resource on one cluster.
type poolKey struct {
	cohort, cluster string
	resource        corev1.ResourceName
}

// pool is what a cohort's members lend one another of one resource on one cluster. Its capacity is the
// sum of what its queues lend, of what its sub-cohorts' pools lend it and of the cohort's own quota;
// guarded is the part of it the cohort does not lend its parent. admitted and used are how much of the
// capacity is in use (what each member uses beyond what it keeps) by admitted workloads, and with the
// reservations of nominated ones. Use beyond guarded is passed on to the parent's pool, so the root
// pool sees everything the tree borrows of what its members lend.
type pool struct {
	cohort            *cohortNode
	resource          corev1.ResourceName
	k                 int // the resource's index in the tree's fair-share vectors
	parent            *pool
	children          []*pool
	capacity, guarded int64
	own               int64 // the cohort's own quota, part of capacity
	admitted, used    int64
	members           []poolMember
}

type poolMember struct {
	queue string
	c     *clusterLedger
	k     int
}

// newLedger lays out the snapshot's queues and cohorts and counts what its workloads use.
func newLedger(s *Snapshot) *ledger {
	l := emptyLedger(s)
	l.countUsage(s)
	l.noteLowestRunning(s)
	return l
}

// emptyLedger lays out the snapshot's queues and cohorts, their quota and limits, with nothing used.
func emptyLedger(s *Snapshot) *ledger {
	l := &ledger{queues: make(map[string]*queueLedger, len(s.Queues)), cohorts: map[string]*cohortNode{}, pools: map[poolKey]*pool{},
		verdicts: &verdictWorkloads{}}
	room := &roomChanges{}
	l.flying, l.won = byCluster{}, byCluster{}
	for name, q := range s.Queues {
		ql := &queueLedger{q: q, index: map[corev1.ResourceName]int{}, byName: make(map[string]int, len(q.Clusters)),
			maxCandidates: max(q.MaxCandidates, 1), scores: scoresOf(q), room: room, flying: l.flying, verdicts: l.verdicts,
			now: s.Now, rejectionTTL: s.RejectionTTL}
		for _, c := range q.Clusters {
			for r := range q.Quota[c] {
				if _, ok := ql.index[r]; !ok {
					ql.index[r] = len(ql.index)
					ql.names = append(ql.names, r)
				}
			}
		}
		ql.clusters = make([]clusterLedger, len(q.Clusters))
		for i, c := range q.Clusters {
			cl, known := s.Clusters[c]
			ql.clusters[i] = clusterLedger{owner: ql, name: c, cluster: cl, known: known}
			ql.byName[c] = i
		}
		ql.borrowed, ql.idle = make([]int64, len(ql.index)), make([]int64, len(ql.index))
		l.queues[name] = ql
	}
	for _, name := range slices.Sorted(maps.Keys(l.queues)) { // pools list their members in a stable order
		l.queues[name].layOut(l, s)
	}
	l.addCohortQuota(s)
	l.sumCohortLending(s)
	for _, ql := range l.queues {
		for i := range ql.clusters {
			c := &ql.clusters[i]
			for k := range c.ceiling {
				c.ceiling[k] = c.limit(k)
			}
		}
	}
	return l
}

// layOut sizes the queue's vectors per cluster: its quota, what it may borrow and never lends there,
// and, in a cohort, its share of the cohort's pools.
func (ql *queueLedger) layOut(l *ledger, s *Snapshot) {
	n, q := len(ql.index), ql.q
	if q.Cohort != "" {
		ql.cohort = l.cohort(q.Cohort, s)
		ql.cohort.queues = append(ql.cohort.queues, ql)
	}
	// One backing array per queue for its clusters' six vectors: a pass lays out every queue anew.
	backing, pools := make([]int64, 6*n*len(ql.clusters)), make([]*pool, n*len(ql.clusters))
	next := func() []int64 {
		v := backing[:n:n]
		backing = backing[n:]
		return v
	}
	for i := range ql.clusters {
		cs := &ql.clusters[i]
		cs.quota, cs.borrow, cs.guarded, cs.ceiling, cs.admitted, cs.reserved = next(), next(), next(), next(), next(), next()
		cs.pools, pools = pools[:n:n], pools[n:]
		for k := range cs.quota {
			cs.quota[k] = math.MaxInt64
		}
		for r, v := range q.Quota[cs.name] {
			cs.quota[ql.index[r]] = v
			ql.idle[ql.index[r]] += max(0, v)
		}
		if ql.cohort == nil {
			continue
		}
		for r, k := range ql.index {
			if cs.quota[k] == math.MaxInt64 {
				continue // not limited: nothing to borrow or lend
			}
			cs.borrow[k] = math.MaxInt64
			if v, ok := q.BorrowingLimit[cs.name][r]; ok {
				cs.borrow[k] = max(v, 0)
			}
			lend := cs.quota[k]
			if v, ok := q.LendingLimit[cs.name][r]; ok {
				lend = min(max(v, 0), lend)
			}
			cs.guarded[k] = cs.quota[k] - lend
			p := l.pool(ql.cohort, cs.name, r)
			p.capacity += lend
			p.members = append(p.members, poolMember{queue: q.Name, c: cs, k: k})
			cs.pools[k] = p
		}
	}
}

// pool returns the cohort's pool of the resource on the cluster, made with those of its ancestors.
func (l *ledger) pool(n *cohortNode, cluster string, r corev1.ResourceName) *pool {
	key := poolKey{cohort: n.name, cluster: cluster, resource: r}
	if p := l.pools[key]; p != nil {
		return p
	}
	if len(l.slab) == 0 {
		l.slab = make([]pool, 256) // pools side by side: a pass walks them for every cluster it scans
	}
	p := &l.slab[0]
	l.slab = l.slab[1:]
	p.cohort, p.resource = n, r
	l.pools[key] = p
	if n.parent != nil {
		p.parent = l.pool(n.parent, cluster, r)
		p.parent.children = append(p.parent.children, p)
	}
	return p
}

// addCohortQuota adds what cohorts hold themselves to their pools: quota of resources some queue of
// their tree limits on that cluster (others nobody borrows).
func (l *ledger) addCohortQuota(s *Snapshot) {
	for key, p := range l.pools {
		if c := s.Cohorts[key.cohort]; c != nil {
			p.own = max(0, c.Quota[key.cluster][key.resource])
			p.capacity += p.own
		}
	}
	// Pools of cohorts with quota but no member limiting the resource on that cluster are never made:
	// nothing could borrow from them.
}

// sumCohortLending adds up what sub-cohorts lend their parents, sets what each cohort keeps, and sizes the
// fair-share vectors of every cohort tree.
func (l *ledger) sumCohortLending(s *Snapshot) {
	for _, key := range slices.SortedFunc(maps.Keys(l.pools), comparePoolKeys) {
		if p := l.pools[key]; p.parent == nil {
			p.addUpCapacity(s, key.cluster)
		}
	}
	for _, n := range l.cohorts {
		n.borrowed, n.idle = make([]int64, len(n.root().resources)), make([]int64, len(n.root().resources))
		slices.SortFunc(n.children, func(a, b *cohortNode) int { return cmp.Compare(a.name, b.name) })
	}
	for _, p := range l.pools {
		p.cohort.idle[p.k] += p.capacity
	}
	for _, ql := range l.queues {
		if ql.cohort == nil {
			continue
		}
		ql.lendable, ql.rootIndex, ql.stale = make([]int64, len(ql.index)), make([]int, len(ql.index)), true
		root := ql.cohort.root()
		for r, k := range ql.index {
			ql.rootIndex[k] = -1
			if i, ok := root.resources[r]; ok {
				ql.lendable[k], ql.rootIndex[k] = root.lendable[i], i
			}
		}
	}
}

// addUpCapacity computes the pool's capacity from its sub-cohorts' pools, bottom up, and what it keeps.
func (p *pool) addUpCapacity(s *Snapshot, cluster string) {
	for _, c := range p.children {
		c.addUpCapacity(s, cluster)
		p.capacity += c.capacity - c.guarded
	}
	p.guarded = p.capacity // a root lends nothing on
	if p.parent != nil {
		if v, ok := p.cohort.spec.lendingLimit(cluster, p.resource); ok {
			p.guarded = p.capacity - min(max(v, 0), p.capacity)
		} else {
			p.guarded = 0
		}
	}
	root := p.cohort.root()
	k, ok := root.resources[p.resource]
	if !ok {
		k = len(root.resources)
		root.resources[p.resource] = k
		root.lendable = append(root.lendable, 0)
	}
	p.k = k
	if p.parent == nil {
		root.lendable[k] += p.capacity
	}
}

func comparePoolKeys(a, b poolKey) int {
	return cmp.Or(cmp.Compare(a.cohort, b.cohort), cmp.Compare(a.cluster, b.cluster), cmp.Compare(a.resource, b.resource))
}

// countUsage adds what admitted workloads use and nominated ones reserve.
func (l *ledger) countUsage(s *Snapshot) {
	l.countTallies(s)
	for _, w := range s.Workloads {
		l.countFlying(w)
		if ql := l.queues[w.GlobalQueue]; ql != nil {
			ql.countUsage(w)
		}
	}
	l.flying.addUnreported(s.Clusters, l.won)
}

// countFlying counts a nominated workload in flight on its clusters, and an admitted one as won on its
// winner.
func (l *ledger) countFlying(w *Workload) {
	switch {
	case w.Phase == Pending && w.Epoch > 0:
		l.flying.add(w.Nominated, w.Requests)
	case w.Phase == Admitted && w.Winner != "":
		l.won.addTo(w.Winner, w.Requests)
	}
}

// countUsage adds what the workload uses, admitted, or reserves, nominated, in the queue. Its vector is
// laid out in the queue's one buffer for counting: nothing is kept of it.
func (ql *queueLedger) countUsage(w *Workload) {
	switch w.Phase {
	case Admitted:
		if i, ok := ql.byName[w.Winner]; ok {
			ql.counting = ql.vectorInto(ql.counting, w.Requests)
			ql.clusters[i].add(true, ql.counting, 1)
		}
	case Pending:
		if w.Epoch > 0 && !w.nominationVoid() {
			ql.counting = ql.vectorInto(ql.counting, w.Requests)
			vec := ql.counting
			for _, c := range w.Nominated {
				if i, ok := ql.byName[c]; ok {
					ql.clusters[i].add(false, vec, 1)
				}
			}
		}
	}
}

// countTallies adds what the snapshot's tallies of admitted workloads use: each tally once, its
// workloads counted on the cluster as many as they are.
func (l *ledger) countTallies(s *Snapshot) {
	for i := range s.Tallies {
		t := &s.Tallies[i]
		if t.Workloads > 0 {
			l.won.addTo(t.Cluster, t.Requests)
		}
		ql := l.queues[t.GlobalQueue]
		if ql == nil || t.Workloads == 0 {
			continue
		}
		if c, ok := ql.byName[t.Cluster]; ok {
			ql.counting = ql.vectorInto(ql.counting, t.Requests)
			ql.clusters[c].add(true, ql.counting, 1)
			ql.clusters[c].workloads += t.Workloads - 1
		}
	}
}

// vector lays out the requests the queue limits; other resources are not counted.
func (ql *queueLedger) vector(req Resources) []int64 { return ql.vectorInto(nil, req) }

// vectorInto lays out the requests in vec's buffer, grown as needed. It looks up the few resources the
// queue limits rather than ranging over the requests: no map iterator, and lookups in a small map
// compare keys without hashing them.
func (ql *queueLedger) vectorInto(vec []int64, req Resources) []int64 {
	vec = slices.Grow(vec[:0], len(ql.names))[:len(ql.names)]
	for i, r := range ql.names {
		vec[i] = req[r]
	}
	return vec
}

// add adds sign*vec to the cluster's admitted (or reserved) usage and keeps the queue's borrowed
// amounts and its cohort's pools in step.
func (c *clusterLedger) add(admitted bool, vec []int64, sign int64) {
	c.workloads += int(sign)
	for k, v := range vec {
		if v == 0 {
			continue
		}
		a0, u0 := c.admitted[k], c.admitted[k]+c.reserved[k]
		if admitted {
			c.admitted[k] += sign * v
		} else {
			c.reserved[k] += sign * v
		}
		a1, u1 := c.admitted[k], c.admitted[k]+c.reserved[k]
		if q := c.quota[k]; q != math.MaxInt64 {
			c.owner.borrowed[k] += max(0, u1-q) - max(0, u0-q)
			c.owner.idle[k] += max(0, q-u1) - max(0, q-u0)
		}
		if p := c.pools[k]; p != nil {
			p.shift(c.overGuard(k, a1)-c.overGuard(k, a0), c.overGuard(k, u1)-c.overGuard(k, u0))
		}
	}
}

// overGuard is how much of use falls on the cohort's pool: what goes beyond the guarded part.
func (c *clusterLedger) overGuard(k int, use int64) int64 { return max(0, use-c.guarded[k]) }

// shift adds a member's change of use to the pool and passes on, up the tree, what changes beyond
// the part each cohort keeps.
func (p *pool) shift(admitted, used int64) {
	for ; p != nil && (admitted != 0 || used != 0); p = p.parent {
		a0, u0 := p.admitted, p.used
		p.admitted += admitted
		p.used += used
		p.cohort.borrowed[p.k] += max(0, p.used-p.capacity) - max(0, u0-p.capacity)
		p.cohort.idle[p.k] += max(0, p.capacity-p.used) - max(0, p.capacity-u0)
		admitted, used = p.over(p.admitted)-p.over(a0), p.over(p.used)-p.over(u0)
	}
}

// over is how much of use the pool passes on to its parent's.
func (p *pool) over(use int64) int64 { return max(0, use-p.guarded) }

// admits says whether the tree can lend d more to a member of the pool: what each cohort on the way
// passes on beyond what it keeps stays, at the root, within what the whole tree lends.
func (p *pool) admits(d int64, withReserved bool) bool {
	for ; d > 0; p = p.parent {
		use := p.admitted
		if withReserved {
			use = p.used
		}
		if p.parent == nil {
			return use+d <= p.capacity
		}
		d = p.over(use+d) - p.over(use)
	}
	return true
}

// fits says whether the queue may add vec on the cluster: its use (admitted, and reserved with
// withReserved) plus vec within its quota and what it may borrow, and its cohort's tree within what it
// lends. A queue in a cohort may so be kept below its own quota while others borrow what it lent.
func (c *clusterLedger) fits(vec []int64, withReserved bool) bool {
	for k, v := range vec {
		if v <= 0 {
			continue
		}
		use := c.admitted[k]
		if withReserved {
			use += c.reserved[k]
		}
		if use+v > satAdd(c.quota[k], c.borrow[k]) {
			return false
		}
		if p := c.pools[k]; p != nil && !p.admits(c.overGuard(k, use+v)-c.overGuard(k, use), withReserved) {
			return false
		}
	}
	return true
}

// couldEverFit says whether vec fits the queue on the cluster once nothing else runs there: within its
// quota and what it may borrow, which is at most what the cohort's tree lends.
func (c *clusterLedger) couldEverFit(vec []int64) bool {
	for k, v := range vec {
		if v > c.ceiling[k] {
			return false
		}
	}
	return true
}

// limit is the most the queue may ever use of resource k on the cluster: what it keeps, what every
// cohort up the tree keeps, and all the root lends.
func (c *clusterLedger) limit(k int) int64 {
	l := satAdd(c.quota[k], c.borrow[k])
	if p := c.pools[k]; p != nil {
		reach := c.guarded[k]
		for ; p.parent != nil; p = p.parent {
			reach = satAdd(reach, p.guarded)
		}
		l = min(l, satAdd(reach, p.capacity))
	}
	return l
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// release drops the reservations of a workload's current nomination.
func (ql *queueLedger) release(w *Workload) {
	if w.Epoch == 0 || w.nominationVoid() {
		return // nothing reserved in this queue
	}
	ql.reserveOn(w.Nominated, ql.vector(w.Requests), -1)
}

// reserve takes back the reservations release dropped.
func (ql *queueLedger) reserve(w *Workload, vec []int64) { ql.reserveOn(w.Nominated, vec, 1) }

func (ql *queueLedger) reserveOn(clusters []string, vec []int64, sign int64) {
	for _, c := range clusters {
		if i, ok := ql.byName[c]; ok {
			ql.clusters[i].add(false, vec, sign)
		}
	}
}

package dispatch

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Preemption takes the admitted workload Victim back from Cluster to make room for Preemptor. The
// victim keeps its quota until its Job there is gone; only then can the preemptor be nominated.
type Preemption struct {
	Victim    string
	Cluster   string
	Preemptor string
	// Reason is the rule that allowed it: ReasonInQueuePriority, ReasonInCohortReclamation or
	// ReasonInCohortFairSharing.
	Reason  string
	Message string
}

// Bounds on the work and the harm of one pass's preemptions.
const (
	// MaxPreemptionsPerPass is how many workloads one pass may preempt in all.
	MaxPreemptionsPerPass = 16
	// MaxPreemptorsTriedPerPass is how many waiting workloads one pass looks for victims for.
	MaxPreemptorsTriedPerPass = 32
)

// blocked is a workload that may preempt: one the pass left waiting for quota, or one whose copies all
// wait at their agents (onNodes). verdict is the index of its verdict in the result, -1 for none.
type blocked struct {
	w       *Workload
	vec     []int64
	verdict int
	onNodes bool
	// verdicts are the pass's, to which one for it is added should it have none.
	verdicts *verdictWorkloads
}

// noteQuotaBlocked remembers the head workload, whose verdict was just added, as one that may preempt:
// it waits for quota, and its queue may preempt.
func (ql *queueLedger) noteQuotaBlocked(w *Workload, vec []int64, res *Result) {
	i := len(res.Verdicts) - 1
	if res.Verdicts[i].Reason != gantry.ReasonWaitingForQuota || !ql.preempts() {
		return
	}
	ql.blocked = append(ql.blocked, blocked{w: w, vec: slices.Clone(vec), verdict: i, verdicts: ql.verdicts})
}

// noteWaitingOnNodes remembers a nominated workload as one that may preempt at node level: an agent
// holding a copy of it named admitted workloads whose going would let it fit. verdict is the index of
// its verdict in the result, -1 for none.
func (ql *queueLedger) noteWaitingOnNodes(w *Workload, rejected map[string]string, verdict int) {
	if !ql.preempts() || !slices.ContainsFunc(w.Copies, func(cp Copy) bool {
		return cp.Waiting && len(cp.WouldFitWithout) > 0 && rejected[cp.Cluster] == "" && slices.Contains(w.Nominated, cp.Cluster)
	}) {
		return
	}
	ql.blocked = append(ql.blocked, blocked{w: w, vec: ql.vector(w.Requests), verdict: verdict, onNodes: true, verdicts: ql.verdicts})
}

// preempts says whether the queue has any rule that lets it preempt.
func (ql *queueLedger) preempts() bool { return ql.q.preempts() }

func (q *GlobalQueue) preempts() bool {
	p := q.Preemption
	return !allowsNone(p.WithinQueue) || !allowsNone(p.ReclaimWithinCohort) || !allowsNone(p.FairSharing)
}

func allowsNone(r gantry.PreemptionRule) bool { return r == "" || r == gantry.PreemptNever }

// preempter chooses the pass's preemptions: for each workload left waiting for quota, highest priority
// first, the cluster where the fewest victims its queue's rules allow make room for it.
type preempter struct {
	l *ledger
	// running are the admitted workloads not being preempted, by cluster; taken are those this pass
	// chose as victims.
	running map[string][]*Workload
	taken   map[string]bool
	leaving map[string][]*Workload // by preemptor: victims still leaving
	budget  int
}

// preempt adds the pass's preemptions to res, and says in the verdicts of the workloads they are for
// (and of those whose victims are still leaving) that they wait for them.
func (l *ledger) preempt(s *Snapshot, res *Result) {
	var all []blocked
	for _, ql := range l.queues {
		all = append(all, ql.blocked...)
	}
	if len(all) == 0 {
		return
	}
	slices.SortFunc(all, func(a, b blocked) int {
		if a.w.Priority != b.w.Priority {
			return cmp.Compare(b.w.Priority, a.w.Priority)
		}
		return cmp.Or(a.w.Created.Compare(b.w.Created), strings.Compare(a.w.Key, b.w.Key))
	})
	p := &preempter{l: l, running: map[string][]*Workload{}, taken: map[string]bool{}, leaving: map[string][]*Workload{},
		budget: MaxPreemptionsPerPass}
	for _, w := range s.Workloads {
		switch {
		case w.Phase != Admitted:
		case w.PreemptedFor != "":
			p.leaving[w.PreemptedFor] = append(p.leaving[w.PreemptedFor], w)
		default:
			p.running[w.Winner] = append(p.running[w.Winner], w)
		}
	}
	for _, w := range s.Tallied {
		p.running[w.Winner] = append(p.running[w.Winner], w)
	}
	tries := MaxPreemptorsTriedPerPass
	for _, b := range all {
		if leaving := p.leaving[b.w.Key]; len(leaving) > 0 {
			b.say(res, leavingMessage(leaving))
			continue
		}
		if tries == 0 || p.budget == 0 {
			continue
		}
		tries--
		var chosen *choice
		if b.onNodes {
			chosen = p.bestOnNodes(b)
		} else {
			chosen = p.bestOnQuota(b)
		}
		if chosen != nil {
			p.commit(b, chosen, res)
			b.say(res, chosen.message())
		}
	}
}

// say makes the workload's verdict in res Preempting, with msg.
func (b blocked) say(res *Result, msg string) {
	if b.verdict < 0 {
		b.verdicts.add(res, b.w, Verdict{Key: b.w.Key, Reason: gantry.ReasonPreempting, Message: msg})
		return
	}
	v := &res.Verdicts[b.verdict]
	v.Reason, v.Message = gantry.ReasonPreempting, msg
}

// leavingMessage says which preempted workloads a preemptor waits for.
func leavingMessage(leaving []*Workload) string {
	keys := make([]string, len(leaving))
	for i, w := range leaving {
		keys[i] = w.Key
	}
	slices.Sort(keys)
	return fmt.Sprintf("waiting for preempted %s to leave %s", strings.Join(keys, ", "), leaving[0].Winner)
}

// victim is a running workload a preemptor may take a cluster's quota from.
type victim struct {
	w   *Workload
	ql  *queueLedger   // its queue
	c   *clusterLedger // its queue's ledger on the cluster
	vec []int64
	// sameQueue: it is of the preemptor's queue; otherwise of another queue of its cohort's tree that
	// borrows on the cluster.
	sameQueue bool
	reason    string
	// atRisk is the GPU time its preemption would lose (Workload.AtRisk).
	atRisk float64
}

// choice is the victims on one cluster whose going makes room for a preemptor.
type choice struct {
	cluster string
	victims []*victim
}

func (c *choice) message() string {
	keys := make([]string, len(c.victims))
	for i, v := range c.victims {
		keys[i] = v.w.Key + " (" + v.reason + ")"
	}
	return fmt.Sprintf("preempting %s on %s to make room for it", strings.Join(keys, ", "), c.cluster)
}

// worse says whether a needs more harm than b: more victims, then a higher priority among them, then
// more work lost.
func (a *choice) worse(b *choice) bool {
	if len(a.victims) != len(b.victims) {
		return len(a.victims) > len(b.victims)
	}
	if pa, pb := maxPriority(a.victims), maxPriority(b.victims); pa != pb {
		return pa > pb
	}
	return lost(a.victims) > lost(b.victims)
}

func lost(vs []*victim) float64 {
	var sum float64
	for _, v := range vs {
		sum += v.atRisk
	}
	return sum
}

func maxPriority(vs []*victim) int32 {
	p := int32(math.MinInt32)
	for _, v := range vs {
		p = max(p, v.w.Priority)
	}
	return p
}

// bestOnQuota is, for a workload no cluster has quota for, the cluster of its queue where preempting
// makes room for it with the least harm; nil when there is none.
func (p *preempter) bestOnQuota(b blocked) *choice {
	ql := p.l.queues[b.w.GlobalQueue]
	var best *choice
	for i := range ql.clusters {
		c := &ql.clusters[i]
		if leftOutAt(b.w, b.vec, c) != stageQuota {
			continue // it could not run there now whatever were preempted
		}
		cands := p.candidates(ql, c, b.w)
		ch := p.choiceOn(ql, c, b, cands)
		if ch == nil && slices.ContainsFunc(cands, func(v *victim) bool { return !v.sameQueue }) {
			// Other queues' workloads come first but a rule may refuse them all: its own queue's alone.
			ch = p.choiceOn(ql, c, b, slices.DeleteFunc(cands, func(v *victim) bool { return !v.sameQueue }))
		}
		if ch != nil && (best == nil || best.worse(ch)) {
			best = ch
		}
	}
	return best
}

// commit records the choice's preemptions.
func (p *preempter) commit(b blocked, ch *choice, res *Result) {
	for _, v := range ch.victims {
		p.taken[v.w.Key] = true
		p.budget--
		res.Preemptions = append(res.Preemptions, Preemption{Victim: v.w.Key, Cluster: ch.cluster, Preemptor: b.w.Key,
			Reason: v.reason, Message: fmt.Sprintf("preempted on %s to make room for %s (priority %d): %s",
				ch.cluster, b.w.Key, b.w.Priority, reasonText(v.reason))})
	}
}

func reasonText(reason string) string {
	switch reason {
	case gantry.ReasonInQueuePriority:
		return "a workload of its own queue with a higher priority, or of equal priority and queued before it"
	case gantry.ReasonInCohortReclamation:
		return "its queue borrowed the quota there from the preemptor's, which takes it back"
	}
	return "its queue borrows there and keeps a larger weighted share of its cohort than the preemptor's"
}

// choiceOn finds the fewest victims on the cluster whose going lets the preemptor fit there: it takes
// candidates in order (of other queues before its own, lower priority first, newer first) until it
// fits, then gives back each it turns out not to need, latest first. The ledger is left as it was.
func (p *preempter) choiceOn(ql *queueLedger, c *clusterLedger, b blocked, cands []*victim) *choice {
	var taken []*victim
	fits := false
	for _, v := range cands {
		v.c.add(true, v.vec, -1)
		taken = append(taken, v)
		if fits = p.allowed(ql, c, b, taken); fits {
			break
		}
	}
	if fits {
		for i := len(taken) - 2; i >= 0; i-- {
			v := taken[i]
			v.c.add(true, v.vec, 1)
			rest := slices.Delete(slices.Clone(taken), i, i+1)
			if p.allowed(ql, c, b, rest) {
				taken = rest
			} else {
				v.c.add(true, v.vec, -1)
			}
		}
		p.allowed(ql, c, b, taken) // names each victim's rule as the chosen set stands
	}
	for _, v := range taken {
		v.c.add(true, v.vec, 1)
	}
	if !fits || !c.cluster.mayFitAfter(b.w.GPU, taken) {
		return nil
	}
	return &choice{cluster: c.name, victims: taken}
}

// candidates are the running workloads on the cluster the preemptor's queue may preempt by priority,
// in the order they are taken.
func (p *preempter) candidates(ql *queueLedger, c *clusterLedger, w *Workload) []*victim {
	rules := ql.q.Preemption
	var out []*victim
	for _, r := range p.running[c.name] {
		if p.taken[r.Key] {
			continue
		}
		rq := p.l.queues[r.GlobalQueue]
		if rq == nil {
			continue
		}
		i, ok := rq.byName[c.name]
		if !ok {
			continue // its queue counts nothing there
		}
		v := &victim{w: r, ql: rq, c: &rq.clusters[i], sameQueue: rq == ql, atRisk: r.AtRisk(ql.now)}
		switch {
		case v.sameQueue && mayPreempt(rules.WithinQueue, w, r):
			v.reason = gantry.ReasonInQueuePriority
		case v.sameQueue, ql.cohort == nil, rq.cohort == nil, rq.cohort.root() != ql.cohort.root(), !v.c.borrows():
			continue
		case !mayPreempt(rules.ReclaimWithinCohort, w, r) && !mayPreempt(rules.FairSharing, w, r):
			continue
		}
		v.vec = rq.vector(r.Requests)
		out = append(out, v)
	}
	slices.SortStableFunc(out, func(a, b *victim) int {
		switch {
		case a.sameQueue != b.sameQueue:
			return boolOrder(b.sameQueue) - boolOrder(a.sameQueue) // other queues' first
		case a.w.Priority != b.w.Priority:
			return cmp.Compare(a.w.Priority, b.w.Priority)
		}
		// The least work lost first: since its last checkpoint, or its start (newer first, without).
		return cmp.Or(cmp.Compare(a.atRisk, b.atRisk), b.w.Created.Compare(a.w.Created), strings.Compare(a.w.Key, b.w.Key))
	})
	return out
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mayPreempt says whether the rule lets preemptor preempt victim by their priorities: never one of
// higher priority.
func mayPreempt(rule gantry.PreemptionRule, preemptor, victim *Workload) bool {
	switch rule {
	case gantry.PreemptLowerPriority:
		return victim.Priority < preemptor.Priority
	case gantry.PreemptLowerOrNewerEqualPriority:
		return victim.Priority < preemptor.Priority ||
			(victim.Priority == preemptor.Priority && victim.Created.After(preemptor.Created))
	case gantry.PreemptLowerOrEqualPriority:
		return victim.Priority <= preemptor.Priority
	}
	return false
}

// borrows says whether the queue uses more than its quota of some resource on the cluster.
func (c *clusterLedger) borrows() bool {
	for k, q := range c.quota {
		if q != math.MaxInt64 && c.admitted[k]+c.reserved[k] > q {
			return true
		}
	}
	return false
}

// allowed says whether, with the victims gone (the ledger shows them gone), the preemptor fits on the
// cluster and every victim of another queue is one a rule allows: reclaiming, when the preemptor then
// fits within its own quota; fair sharing, when it would borrow but each victim's queue keeps a larger
// weighted share than its own with it. It sets each victim's reason.
func (p *preempter) allowed(ql *queueLedger, c *clusterLedger, b blocked, victims []*victim) bool {
	if !c.fits(b.vec, true) {
		return false
	}
	rules, own := ql.q.Preemption, c.withinQuota(b.vec)
	var mine float64
	if !own {
		c.add(false, b.vec, 1)
		mine = ql.share()
		c.add(false, b.vec, -1)
	}
	return allowedAcross(rules, b.w, victims, own, mine)
}

// allowedAcross says whether a rule allows each victim of another queue, and sets its reason: reclaiming
// when the preemptor then uses no more than its own quota (own), else fair sharing while the victim's
// queue keeps a larger weighted share than mine, the preemptor's queue's with it. The ledger shows the
// victims gone.
func allowedAcross(rules gantry.PreemptionPolicy, preemptor *Workload, victims []*victim, own bool, mine float64) bool {
	for _, v := range victims {
		switch {
		case v.sameQueue:
		case own && mayPreempt(rules.ReclaimWithinCohort, preemptor, v.w):
			v.reason = gantry.ReasonInCohortReclamation
		case mayPreempt(rules.FairSharing, preemptor, v.w) && v.ql.share() > mine:
			v.reason = gantry.ReasonInCohortFairSharing
		default:
			return false
		}
	}
	return true
}

// withinQuota says whether the queue's use on the cluster with vec stays within its own quota.
func (c *clusterLedger) withinQuota(vec []int64) bool {
	for k, v := range vec {
		if v > 0 && c.quota[k] != math.MaxInt64 && c.admitted[k]+c.reserved[k]+v > c.quota[k] {
			return false
		}
	}
	return true
}

// share is the queue's weighted dominant share of what its cohort tree lends, as the ledger stands.
func (ql *queueLedger) share() float64 {
	if ql.cohort == nil {
		return 0
	}
	return dominantShare(make([]int64, len(ql.borrowed)), ql.borrowed, ql.idle, ql.lendable, weightOf(ql.q.Weight))
}

// mayFitAfter says whether the cluster's last report leaves room for the demand once the victims' GPUs
// are free too (a necessary condition only: the agent decides). A demand without GPUs, or a cluster
// without reports, may fit.
func (c Cluster) mayFitAfter(d GPUDemand, victims []*victim) bool {
	if d.PerPod <= 0 || c.GPUs == nil {
		return true
	}
	var freed int64
	for _, v := range victims {
		freed += v.w.GPU.Total
	}
	var free, largestAlloc int64
	for _, g := range c.GPUs {
		if len(d.Products) == 0 || slices.Contains(d.Products, g.Product) {
			free += g.Free
			largestAlloc = max(largestAlloc, g.LargestAllocatableOnNode)
		}
	}
	return largestAlloc >= d.PerPod && free+freed >= d.Total
}

// bestOnNodes is, for a nominated workload whose copies all wait at their agents, the cluster where the
// fewest of the workloads its agent named must go, all of them ones the queue's rules allow; nil when
// there is none.
func (p *preempter) bestOnNodes(b blocked) *choice {
	ql := p.l.queues[b.w.GlobalQueue]
	var best *choice
	for _, cp := range b.w.Copies {
		i, ok := ql.byName[cp.Cluster]
		if !ok || !cp.Waiting || len(cp.WouldFitWithout) == 0 || !slices.Contains(b.w.Nominated, cp.Cluster) {
			continue
		}
		if ch := p.namedOn(ql, &ql.clusters[i], b, cp.WouldFitWithout); ch != nil && (best == nil || best.worse(ch)) {
			best = ch
		}
	}
	return best
}

// namedOn is the choice of the named workloads on the cluster, nil unless each is running there and a
// rule of the queue allows preempting it (see candidates and allowedAcross; the workload's reservation
// there is already counted).
func (p *preempter) namedOn(ql *queueLedger, c *clusterLedger, b blocked, named []string) *choice {
	cands := p.candidates(ql, c, b.w)
	ch := &choice{cluster: c.name}
	for _, key := range named {
		i := slices.IndexFunc(cands, func(v *victim) bool { return v.w.Key == key })
		if i < 0 {
			return nil
		}
		ch.victims = append(ch.victims, cands[i])
	}
	for _, v := range ch.victims {
		v.c.add(true, v.vec, -1)
	}
	ok := allowedAcross(ql.q.Preemption, b.w, ch.victims, c.withinQuota(make([]int64, len(b.vec))), ql.share())
	for _, v := range ch.victims {
		v.c.add(true, v.vec, 1)
	}
	if !ok {
		return nil
	}
	return ch
}

// noteLowestRunning tells each queue's cluster ledgers the lowest priority running there, so that the
// pipeline can tell where a workload might preempt.
func (l *ledger) noteLowestRunning(s *Snapshot) {
	if !l.anyPreempts() {
		return // a pass over every workload that no queue would use
	}
	lowest := map[string]int32{}
	note := func(cluster string, priority int32) {
		if p, ok := lowest[cluster]; !ok || priority < p {
			lowest[cluster] = priority
		}
	}
	for _, w := range s.Workloads {
		if w.Phase == Admitted && w.PreemptedFor == "" {
			note(w.Winner, w.Priority)
		}
	}
	for _, t := range s.Tallies {
		if t.Workloads > 0 {
			note(t.Cluster, t.Priority)
		}
	}
	if len(lowest) == 0 {
		return
	}
	for _, ql := range l.queues {
		if !ql.preempts() {
			continue
		}
		for i := range ql.clusters {
			c := &ql.clusters[i]
			c.lowestRunning, c.running = lowest[c.name]
		}
	}
}

// mayMakeRoomFor says whether the workload's queue may preempt and something of a priority its rules
// could allow runs on the cluster: a copy sent there though its last report shows no room asks the
// agent what would make room.
func (c *clusterLedger) mayMakeRoomFor(w *Workload) bool {
	if !c.running {
		return false
	}
	p := c.owner.q.Preemption
	equal := p.WithinQueue == gantry.PreemptLowerOrNewerEqualPriority || p.ReclaimWithinCohort == gantry.PreemptLowerOrEqualPriority ||
		p.FairSharing == gantry.PreemptLowerOrEqualPriority
	return w.Priority > c.lowestRunning || (equal && w.Priority == c.lowestRunning)
}

func (l *ledger) anyPreempts() bool {
	for _, ql := range l.queues {
		if ql.preempts() {
			return true
		}
	}
	return false
}

package dispatch

import (
	"maps"
	"math"
	"slices"
)

// nominate hands each queue's workloads that need clusters to its nominator. Queues in no cohort share
// nothing and go one after the other. The queues of a cohort tree take turns by fair sharing: each
// next workload comes from the member with the smallest weighted share, descending from the root through
// the sub-cohort with the smallest; equal shares go to the higher priority, then the older workload.
func (l *ledger) nominate(res *Result) {
	for _, name := range slices.Sorted(maps.Keys(l.queues)) {
		ql := l.queues[name]
		if ql.cohort == nil {
			ql.walkAlone(res)
			continue
		}
		if ql.nom == nil {
			continue
		}
		for n := ql.cohort; n != nil; n = n.parent {
			n.waiting += len(ql.nom.pending)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(l.cohorts)) {
		root := l.cohorts[name]
		for root.parent == nil && root.waiting > 0 {
			ql, _ := root.pick()
			ql.nom.step(res)
			ql.stale = true
			for n := ql.cohort; n != nil; n = n.parent {
				n.waiting--
				n.stale = true // its pools changed with the queue's, and maybe its pick
			}
		}
	}
}

// pick is the queue whose workload is nominated next among the cohort's, and the cohort's turn among
// its siblings: of its own queues and the picks of its sub-cohorts, the one with the best turn. A
// sub-cohort's turn is its own share and the head of its pick. Both are kept until a nomination in the
// cohort's tree makes them stale.
func (n *cohortNode) pick() (*queueLedger, turn) {
	if !n.stale {
		return n.picked, n.turn
	}
	var best *queueLedger
	var bestTurn turn
	for _, ql := range n.queues {
		if ql.nom.head() == nil {
			continue
		}
		if t := ql.turn(); best == nil || t.before(bestTurn) {
			best, bestTurn = ql, t
		}
	}
	for _, c := range n.children {
		if c.waiting == 0 {
			continue
		}
		if ql, t := c.pick(); best == nil || t.before(bestTurn) {
			best, bestTurn = ql, t
		}
	}
	h := best.nom.head()
	n.picked, n.stale = best, false
	n.turn = turn{share: n.shareWith(best), priority: h.Priority, created: h.Created.UnixNano(), name: n.name}
	return n.picked, n.turn
}

// turn is the queue's turn among its cohort's members: its share with its head workload, kept until it
// nominates again.
func (ql *queueLedger) turn() turn {
	if ql.stale {
		h := ql.nom.head()
		ql.cached = turn{share: ql.shareWith(ql.nom.headVector()), priority: h.Priority, created: h.Created.UnixNano(), name: ql.q.Name}
		ql.stale = false
	}
	return ql.cached
}

// turn orders the members of a cohort for the next nomination.
type turn struct {
	share    float64
	priority int32
	created  int64
	name     string
}

func (t turn) before(o turn) bool {
	switch {
	case t.share != o.share:
		return t.share < o.share
	case t.priority != o.priority:
		return t.priority > o.priority
	case t.created != o.created:
		return t.created < o.created
	}
	return t.name < o.name
}

// shareWith is the queue's weighted dominant share with half of the workload vec counted: of the
// resources its cohort tree lends, the largest fraction it borrows, over its weight. Counting half of
// the next workload puts a queue's share, while the workload runs, as much above its due as it was below
// before: neither a large next job nor a small one skews the long-run split.
func (ql *queueLedger) shareWith(vec []int64) float64 {
	return dominantShare(vec, ql.borrowed, ql.idle, ql.lendable, weightOf(ql.q.Weight))
}

// shareWith is the cohort's weighted dominant share with half of the head workload of the queue
// counted: of the resources its tree lends, the largest fraction it borrows through its parent, over
// its weight.
func (n *cohortNode) shareWith(ql *queueLedger) float64 {
	vec := n.scratch[:0]
	for range n.borrowed {
		vec = append(vec, 0)
	}
	for k, v := range ql.nom.headVector() {
		if i := ql.rootIndex[k]; i >= 0 {
			vec[i] = v
		}
	}
	n.scratch = vec
	return dominantShare(vec, n.borrowed, n.idle, n.root().lendable, n.weight)
}

// dominantShare is the largest fraction (borrowed[k] + half of what vec[k] needs beyond idle[k]) /
// lendable[k], divided by the weight. A weight of 0 makes any borrowing count as infinite: such a member
// gets what no other wants.
func dominantShare(vec, borrowed, idle, lendable []int64, weight int32) float64 {
	var s float64
	for k, b := range borrowed {
		if b += max(0, vec[k]-idle[k]) / 2; b > 0 {
			s = max(s, float64(b)/float64(max(lendable[k], 1)))
		}
	}
	switch {
	case s == 0:
		return 0
	case weight <= 0:
		return math.Inf(1)
	}
	return s / float64(weight)
}

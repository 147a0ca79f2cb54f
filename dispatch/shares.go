package dispatch

import "math"

// Share is what a queue's admitted workloads borrow from its cohort on one cluster, and what it lends.
type Share struct {
	Borrowed, Lent Resources
}

// CohortShares says, per GlobalQueue in a cohort and cluster, what the queue borrows there (its
// admitted workloads' use beyond its quota) and what it lends: its part of what the cohort's queues
// borrow there, in proportion to the unused quota each may lend. Queues in no cohort, and clusters where
// a queue neither borrows nor lends, are absent.
func CohortShares(s *Snapshot) map[string]map[string]Share {
	l := newLedger(s)
	out := map[string]map[string]Share{}
	add := func(queue, cluster string, lent bool, p poolKey, v int64) {
		if v <= 0 {
			return
		}
		byCluster := out[queue]
		if byCluster == nil {
			byCluster = map[string]Share{}
			out[queue] = byCluster
		}
		sh := byCluster[cluster]
		if sh.Borrowed == nil {
			sh = Share{Borrowed: Resources{}, Lent: Resources{}}
		}
		if lent {
			sh.Lent[p.resource] += v
		} else {
			sh.Borrowed[p.resource] += v
		}
		byCluster[cluster] = sh
	}
	for key, p := range l.pools {
		var borrowed, idleSum int64
		idle := make([]int64, len(p.members))
		for j, m := range p.members {
			c := m.c
			b := max(0, c.admitted[m.k]-c.quota[m.k])
			borrowed += b
			add(m.queue, c.name, false, key, b)
			idle[j] = max(0, c.quota[m.k]-c.guarded[m.k]-c.overGuard(m.k, c.admitted[m.k]))
			idleSum += idle[j]
		}
		if borrowed == 0 || idleSum == 0 {
			continue
		}
		for j, m := range p.members {
			add(m.queue, m.c.name, true, key, int64(math.Round(float64(borrowed)*float64(idle[j])/float64(idleSum))))
		}
	}
	return out
}

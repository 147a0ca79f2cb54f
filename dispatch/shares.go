package dispatch

import "math"

// Share is what a queue's admitted workloads borrow from its cohort on one cluster, and what it lends.
type Share struct {
	Borrowed, Lent Resources
}

// Usage is what the statuses of queues and cohorts say of sharing, from one ledger of the snapshot.
// Queues: per GlobalQueue in a cohort and cluster, what the queue borrows there (its admitted
// workloads' use beyond its quota) and what it lends: its part of what the queues of its cohort tree
// borrow there, in proportion to the unused quota each may lend (cohorts' own quota lends too); queues
// in no cohort, and clusters where a queue neither borrows nor lends, are absent. Cohorts: per cohort
// that some queue's quota reaches and cluster, what its tree lends, uses and borrows there.
type Usage struct {
	Queues  map[string]map[string]Share
	Cohorts map[string]map[string]CohortUse
}

// UsageOf builds the snapshot's ledger once and reads both parts of Usage from it.
func UsageOf(s *Snapshot) Usage {
	l := newLedger(s)
	return Usage{Queues: l.shares(), Cohorts: l.cohortUse()}
}

func (l *ledger) shares() map[string]map[string]Share {
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
	for key, root := range l.pools {
		if root.parent != nil {
			continue
		}
		var borrowed, idleSum int64
		var lenders []poolMember
		var idle []int64
		root.walk(func(p *pool) {
			idleSum += p.own
			for _, m := range p.members {
				c := m.c
				b := max(0, c.admitted[m.k]-c.quota[m.k])
				borrowed += b
				add(m.queue, key.cluster, false, key, b)
				lenders = append(lenders, m)
				idle = append(idle, max(0, c.quota[m.k]-c.guarded[m.k]-c.overGuard(m.k, c.admitted[m.k])))
				idleSum += idle[len(idle)-1]
			}
		})
		if borrowed == 0 || idleSum == 0 {
			continue
		}
		for j, m := range lenders {
			add(m.queue, key.cluster, true, key, int64(math.Round(float64(borrowed)*float64(idle[j])/float64(idleSum))))
		}
	}
	return out
}

// walk calls f on the pool and the pools of its sub-cohorts.
func (p *pool) walk(f func(*pool)) {
	f(p)
	for _, c := range p.children {
		c.walk(f)
	}
}

// CohortUse is what a cohort's tree lends within the cohort on one cluster, how much of it admitted
// workloads use, and what the tree uses beyond it, borrowed through its parent.
type CohortUse struct {
	Lendable, Used, Borrowed Resources
}

func (l *ledger) cohortUse() map[string]map[string]CohortUse {
	out := map[string]map[string]CohortUse{}
	for key, p := range l.pools {
		byCluster := out[key.cohort]
		if byCluster == nil {
			byCluster = map[string]CohortUse{}
			out[key.cohort] = byCluster
		}
		u, ok := byCluster[key.cluster]
		if !ok {
			u = CohortUse{Lendable: Resources{}, Used: Resources{}, Borrowed: Resources{}}
		}
		u.Lendable[key.resource] = p.capacity
		u.Used[key.resource] = p.admitted
		if b := p.admitted - p.capacity; b > 0 {
			u.Borrowed[key.resource] = b
		}
		byCluster[key.cluster] = u
	}
	return out
}

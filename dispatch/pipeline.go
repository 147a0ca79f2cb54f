package dispatch

import (
	"math"
	"slices"
)

// Choosing a workload's candidate clusters is a short pipeline of named plugins, as in kube-scheduler's
// framework: filters leave out the clusters that cannot take a copy now, then scores rank the rest and
// the best maxCandidates get copies. Adding a plugin is one file with its type and a table test, and
// one line in leftOutAt or narrowers (a filter), or its registerScorer call (a score).

// stage is which verdict a workload gets when a filter of that stage leaves out its last cluster.
type stage int

const (
	// stageNever: the cluster could never hold the workload (NoClusterCanHold).
	stageNever stage = iota
	// stageUnavailable: the cluster takes no copies now (NoClusterAvailable).
	stageUnavailable
	// stageQuota: the queue has no quota left there (WaitingForQuota).
	stageQuota
	// stageCapacity: the cluster has no room now (WaitingForCapacity).
	stageCapacity
	stages
)

// filter leaves out, one cluster at a time, clusters that cannot take a copy of the workload now. Each
// filter is a type of this interface and a line in leftOutAt.
type filter interface {
	stage() stage
	// admits says whether the cluster may take the workload; vec is its requests the queue limits.
	admits(w *Workload, vec []int64, c *clusterLedger) bool
}

// narrower leaves out clusters in view of all that passed every filter: keep is what it keeps of them.
type narrower interface {
	keep(w *Workload, ql *queueLedger, passed []int) []int
}

// scorer ranks clusters that passed every filter: higher is better. Values are scaled over the clusters
// being ranked, so only their order and distances matter.
type scorer interface {
	name() string
	score(w *Workload, vec []int64, c *clusterLedger, ql *queueLedger) float64
}

// leftOutAt runs the filters on one cluster, in an order along which stages never decrease, and returns
// the stage of the first that leaves the cluster out; stages when none does. The chain is written out,
// not looped over, so that the filters inline: it runs for every cluster of every workload scanned.
func leftOutAt(w *Workload, vec []int64, c *clusterLedger) stage {
	switch {
	case !(knownCluster{}).admits(w, vec, c):
		return knownCluster{}.stage()
	case !(notRefused{}).admits(w, vec, c):
		return notRefused{}.stage()
	case !(quotaCeiling{}).admits(w, vec, c):
		return quotaCeiling{}.stage()
	case !(usableCluster{}).admits(w, vec, c):
		return usableCluster{}.stage()
	case !(quotaRoom{}).admits(w, vec, c):
		return quotaRoom{}.stage()
	case !(capacityRoom{}).admits(w, vec, c):
		return capacityRoom{}.stage()
	}
	return stages
}

// narrowers run after the filters.
var narrowers = []narrower{productPreference{}}

// scorers are the scores a GlobalQueue may choose, by name.
var scorers = map[string]scorer{}

func registerScorer(s scorer) scorer { scorers[s.name()] = s; return s }

// WeightedScore is a score a GlobalQueue ranks clusters by, and its weight.
type WeightedScore struct {
	Name   string
	Weight int
}

// scan counts, for a workload, the clusters that passed every filter of each stage and those before.
type scan [stages]int

// candidates returns the up to k clusters that passed every filter with the best scores, earlier
// clusters first on ties.
func (n *nominator) candidates(w *Workload, vec []int64, k int) ([]scored, scan) {
	ql, best := n.ql, n.best[:0]
	var sc scan
	passed := n.passed[:0]
	for i := range ql.clusters {
		c := &ql.clusters[i]
		failed := leftOutAt(w, vec, c)
		for s := range failed {
			sc[s]++
		}
		if failed == stages {
			passed = append(passed, i)
		}
	}
	for _, nw := range narrowers {
		passed = nw.keep(w, ql, passed)
	}
	n.passed = passed
	scores := ql.scores
	if len(scores) == 1 { // one score needs no scaling: keep the best as they come
		for _, i := range passed {
			v := scores[0].score(w, vec, &ql.clusters[i], ql)
			if math.IsNaN(v) {
				v = math.Inf(-1) // the score knows nothing of the cluster: last
			}
			best = insertBest(best, scored{idx: i, score: v}, k)
		}
		return best, sc
	}
	total := n.scaled(w, vec, passed, scores)
	for j, i := range passed {
		best = insertBest(best, scored{idx: i, score: total[j]}, k)
	}
	return best, sc
}

// scaled is each cluster's weighted sum of its scores, each scaled to 0..1 over the clusters; a score
// that knows nothing of a cluster (NaN) gives it 0.
func (n *nominator) scaled(w *Workload, vec []int64, passed []int, scores []weightedScorer) []float64 {
	ql := n.ql
	total := slices.Grow(n.total[:0], len(passed))[:len(passed)]
	clear(total)
	raw := slices.Grow(n.raw[:0], len(passed))[:len(passed)]
	for _, s := range scores {
		lo, hi := math.Inf(1), math.Inf(-1)
		for j, i := range passed {
			if raw[j] = s.score(w, vec, &ql.clusters[i], ql); !math.IsNaN(raw[j]) {
				lo, hi = min(lo, raw[j]), max(hi, raw[j])
			}
		}
		for j := range passed {
			v := 1.0
			switch {
			case math.IsNaN(raw[j]):
				v = 0
			case hi > lo:
				v = (raw[j] - lo) / (hi - lo)
			}
			total[j] += float64(s.weight) * v
		}
	}
	n.total, n.raw = total, raw
	return total
}

// insertBest inserts s into best, kept sorted by score, highest first, and at most k long; earlier
// entries stay first on ties.
func insertBest(best []scored, s scored, k int) []scored {
	pos := len(best)
	for pos > 0 && best[pos-1].score < s.score {
		pos--
	}
	if pos >= k {
		return best
	}
	if len(best) < k {
		best = append(best, scored{})
	}
	copy(best[pos+1:], best[pos:len(best)-1])
	best[pos] = s
	return best
}

type weightedScorer struct {
	scorer
	weight int
}

// scoresOf resolves a queue's scores; Headroom alone when it names none it knows.
func scoresOf(q *GlobalQueue) []weightedScorer {
	var out []weightedScorer
	for _, ws := range q.Scores {
		if s, ok := scorers[ws.Name]; ok {
			out = append(out, weightedScorer{scorer: s, weight: max(ws.Weight, 1)})
		}
	}
	if len(out) == 0 {
		out = append(out, weightedScorer{scorer: headroom, weight: 1})
	}
	return out
}

package dispatch

import "slices"

// preference prefers clusters earlier in the queue's PreferredClusters; clusters not listed come after
// all listed ones.
var _ = registerScorer(preference{})

type preference struct{}

func (preference) name() string { return "Preference" }
func (preference) score(_ *Workload, _ []int64, c *clusterLedger, ql *queueLedger) float64 {
	i := slices.Index(ql.q.PreferredClusters, c.name)
	if i < 0 {
		i = len(ql.q.PreferredClusters)
	}
	return -float64(i)
}

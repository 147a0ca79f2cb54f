package dispatch

// spread prefers the cluster where the queue runs and holds the fewest workloads (admitted, and
// nominated there and not yet admitted anywhere).
var _ = registerScorer(spread{})

type spread struct{}

func (spread) name() string { return "Spread" }
func (spread) score(_ *Workload, _ []int64, c *clusterLedger, _ *queueLedger) float64 {
	return -float64(c.workloads)
}

package dispatch

// The scores of where a job is best placed beyond room: what it costs, how near its data it runs, and
// whether it runs on its queue's own quota.
var (
	_ = registerScorer(price{})
	_ = registerScorer(nearData{})
	_ = registerScorer(withinQuota{})
)

// price prefers the cluster where the workload costs least per hour (Cluster.PerHour); a cluster that
// does not price what it uses ranks last.
type price struct{}

func (price) name() string { return "Price" }
func (price) score(w *Workload, _ []int64, c *clusterLedger, _ *queueLedger) float64 {
	return -c.cluster.PerHour(w)
}

// nearData prefers the clusters whose labels carry more of the terms of the workload's data location.
type nearData struct{}

func (nearData) name() string { return "NearData" }
func (nearData) score(w *Workload, _ []int64, c *clusterLedger, _ *queueLedger) float64 {
	return float64(c.cluster.MatchedTerms(w.DataLocation))
}

// withinQuota prefers the clusters where the workload runs within its queue's own quota over those
// where it borrows from its cohort, and may be preempted to give that back.
type withinQuota struct{}

func (withinQuota) name() string { return "WithinQuota" }
func (withinQuota) score(_ *Workload, vec []int64, c *clusterLedger, _ *queueLedger) float64 {
	if c.withinQuota(vec) {
		return 1
	}
	return 0
}

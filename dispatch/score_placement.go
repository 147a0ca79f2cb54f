package dispatch

import gantry "github.com/gantry-dev/gantry/apis/v1beta1"

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

// nearData prefers the clusters whose labels carry more of the terms of the workload's data location,
// and, for a workload whose saved work is on a cluster it was taken back from, more of that cluster's
// location (CheckpointTerms).
type nearData struct{}

func (nearData) name() string { return "NearData" }
func (nearData) score(w *Workload, _ []int64, c *clusterLedger, ql *queueLedger) float64 {
	score := c.cluster.MatchedTerms(w.DataLocation)
	if w.CheckpointedOn != "" {
		if i, ok := ql.byName[w.CheckpointedOn]; ok {
			score += c.cluster.MatchedTerms(CheckpointTerms(w, ql.clusters[i].cluster))
		}
	}
	return float64(score)
}

// RegionLabel is the label whose value places a checkpoint when the job names no data location.
const RegionLabel = "topology.kubernetes.io/region"

// CheckpointTerms is where a workload's checkpoint is, as terms over cluster labels: the values the
// cluster it ran on carries of the keys of its data location, or of RegionLabel when it names none.
func CheckpointTerms(w *Workload, ranOn Cluster) []gantry.LabelTerm {
	keys := []string{RegionLabel}
	if len(w.DataLocation) > 0 {
		keys = keys[:0]
		for _, t := range w.DataLocation {
			keys = append(keys, t.Key)
		}
	}
	var terms []gantry.LabelTerm
	for _, k := range keys {
		if v, ok := ranOn.Labels[k]; ok {
			terms = append(terms, gantry.LabelTerm{Key: k, Value: v})
		}
	}
	return terms
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

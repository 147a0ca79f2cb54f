package dispatch

import "math"

// headroom prefers the cluster whose quota the workload leaves the most room in: the smallest fraction
// left of any limited resource after placing it; 1 when nothing limits.
var headroom = registerScorer(headroomScorer{})

type headroomScorer struct{}

func (headroomScorer) name() string { return "Headroom" }
func (headroomScorer) score(_ *Workload, vec []int64, c *clusterLedger, _ *queueLedger) float64 {
	score := 1.0
	for i := range vec {
		if c.quota[i] == math.MaxInt64 || c.quota[i] == 0 {
			continue
		}
		left := float64(c.quota[i]-c.admitted[i]-c.reserved[i]-vec[i]) / float64(c.quota[i])
		if left < score {
			score = left
		}
	}
	return score
}

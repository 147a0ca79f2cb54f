package dispatch

import (
	"math"
	"slices"
)

// mostFreeGPUs prefers the cluster whose agent last reported the most free GPUs of the products the
// workload accepts; binPacking the one with the fewest, so that whole nodes and clusters stay free for
// large jobs (clusters without room were filtered out before). A cluster without a capacity report
// scores lowest on both.
var (
	_ = registerScorer(mostFreeGPUs{})
	_ = registerScorer(binPacking{})
)

type mostFreeGPUs struct{}

func (mostFreeGPUs) name() string { return "MostFreeGPUs" }
func (mostFreeGPUs) score(w *Workload, _ []int64, c *clusterLedger, _ *queueLedger) float64 {
	free, known := freeGPUs(w, c.cluster)
	if !known {
		return math.NaN()
	}
	return float64(free)
}

type binPacking struct{}

func (binPacking) name() string { return "BinPacking" }
func (binPacking) score(w *Workload, _ []int64, c *clusterLedger, _ *queueLedger) float64 {
	free, known := freeGPUs(w, c.cluster)
	if !known {
		return math.NaN()
	}
	return -float64(free)
}

// freeGPUs is what the cluster last reported free of the products the workload accepts (any when it
// names none); known is false without a report.
func freeGPUs(w *Workload, c Cluster) (free int64, known bool) {
	if c.GPUs == nil {
		return 0, false
	}
	for _, g := range c.GPUs {
		if len(w.GPU.Products) == 0 || slices.Contains(w.GPU.Products, g.Product) {
			free += g.Free
		}
	}
	return free, true
}

package fleetsim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/dispatch"
)

// busyTrace is a queue kept over its fleet's size at times: jobs of 1 to 4 pods of 1, 2, 4 or 8 GPUs,
// running 10 to 60 minutes, arriving at random at a load of load times the fleet's 64 GPUs, for hours.
func busyTrace(seed uint64, jobs int, load float64) []Job {
	rnd := rand.New(rand.NewPCG(seed, 7))
	var out []Job
	var at time.Duration
	for i := range jobs {
		j := Job{Name: fmt.Sprintf("j%d", i), Queue: "q", Pods: 1 + rnd.IntN(4), GPUsPerPod: []int{1, 2, 4, 8}[rnd.IntN(4)],
			Run: time.Duration(10+rnd.IntN(51)) * time.Minute}
		at += time.Duration(rnd.ExpFloat64() * float64(2.5*3.75*35*float64(time.Minute)/(64*load)))
		j.Arrive = at
		out = append(out, j)
	}
	return out
}

// Of the jobs that had to wait, the share that started within the range forecast when they arrived
// (dispatch.ForecastStart over the queue's starts and what was ahead of them), and how far off the
// likely time was. docs/performance.md quotes this test's log (go test -v -run
// TestForecastsOnASimulatedFleet ./dispatch/fleetsim/).
func TestForecastsOnASimulatedFleet(t *testing.T) {
	clusters := []Cluster{{Name: "a", Nodes: 4, GPUsPerNode: 8, Product: "A100"}, {Name: "b", Nodes: 4, GPUsPerNode: 8, Product: "A100"}}
	var inside, waited int
	for _, load := range []float64{0.8, 0.9, 1.0} {
		for seed := range uint64(3) {
			out := Run(Fleet{Clusters: clusters, Queues: []*dispatch.GlobalQueue{queue("q", clusters...)}}, busyTrace(seed, 500, load),
				Options{Step: 5 * time.Second})
			in, n, errs := 0, 0, []float64{}
			for _, o := range out {
				f := o.Forecast
				if !f.Known || o.Ended == 0 {
					continue
				}
				n++
				if w := o.Wait(); w >= f.Early && w <= f.Late {
					in++
				}
				errs = append(errs, (o.Wait() - f.Likely).Abs().Minutes())
			}
			slices.Sort(errs)
			t.Logf("load %.1f, seed %d: %d jobs forecast, %d (%.0f%%) started within the range; likely time off by %.1f min (median), %.1f (90th)",
				load, seed, n, in, 100*float64(in)/float64(max(n, 1)), errs[len(errs)/2], errs[len(errs)*9/10])
			inside, waited = inside+in, waited+n
		}
	}
	share := float64(inside) / float64(waited)
	t.Logf("in all: %d of %d (%.0f%%) within the forecast range (meant for %.0f%%)", inside, waited, 100*share, 100*dispatch.ForecastCoverage)
	if waited < 300 || share < 0.5 {
		t.Errorf("%d of %d jobs started within their forecast range: want at least half of 300 or more", inside, waited)
	}
}

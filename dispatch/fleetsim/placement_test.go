package fleetsim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// tiers is a fleet of two price tiers in two regions: on-premises clusters of 64 GPUs at 1 a GPU-hour,
// cloud ones of 32 at 3, each tier in eu and us; 192 GPUs in all.
func tiers() []Cluster {
	cluster := func(name, region string, nodes int, price float64) Cluster {
		return Cluster{Name: name, Nodes: nodes, GPUsPerNode: 8, Product: "A100",
			Price: &dispatch.Price{GPU: map[string]float64{"A100": price}}, Labels: map[string]string{"region": region}}
	}
	return []Cluster{cluster("cloud-us", "us", 4, 3), cluster("cloud-eu", "eu", 4, 3), cluster("onprem-us", "us", 8, 1), cluster("onprem-eu", "eu", 8, 1)}
}

// placementTrace is jobs of 1 to 4 pods of 1, 2, 4 or 8 GPUs, running 10 to 60 minutes, arriving at
// random for hours at a load near half the fleet (what its on-premises tier holds, less fragments); share of them read a dataset held in eu.
func placementTrace(seed uint64, jobs int, share float64) []Job {
	rnd := rand.New(rand.NewPCG(seed, 40))
	var out []Job
	var at time.Duration
	for i := range jobs {
		j := Job{Name: fmt.Sprintf("j%d", i), Queue: "q", Pods: 1 + rnd.IntN(4), GPUsPerPod: []int{1, 2, 4, 8}[rnd.IntN(4)],
			Run: time.Duration(10+rnd.IntN(51)) * time.Minute}
		// GPUs asked on average: 2.5 pods x 3.75 GPUs x 35 min; arrivals spaced to keep about 96 busy.
		at += time.Duration(rnd.ExpFloat64() * float64(2.5*3.75*35*float64(time.Minute)/96))
		j.Arrive = at
		if rnd.Float64() < share {
			j.DataLocation = []gantry.LabelTerm{{Key: "region", Value: "eu"}}
		}
		out = append(out, j)
	}
	return out
}

// placementFigures are what a policy did to a trace.
type placementFigures struct {
	costPerGPUHour float64
	nearData       float64 // share of the jobs with a data location that ran where it is
	meanWait       time.Duration
	p90Wait        time.Duration
}

func figuresOf(out []Outcome) placementFigures {
	var f placementFigures
	var cost, hours float64
	var withData, near int
	waits := make([]time.Duration, 0, len(out))
	for _, o := range out {
		cost, hours = cost+o.Cost, hours+o.GPUHours
		waits = append(waits, o.Wait())
		f.meanWait += o.Wait()
		if len(o.Job.DataLocation) > 0 {
			withData++
			if o.Cluster == "cloud-eu" || o.Cluster == "onprem-eu" {
				near++
			}
		}
	}
	slices.Sort(waits)
	f.costPerGPUHour, f.nearData = cost/hours, float64(near)/float64(withData)
	f.meanWait, f.p90Wait = f.meanWait/time.Duration(len(out)), waits[len(waits)*9/10]
	return f
}

// On the same traces, the Price score cuts what a GPU-hour costs, NearData runs more of the jobs with a
// dataset in eu there, and both together do both, against the default scoring (Headroom), at a cost in
// waiting that the figures show. docs/performance.md quotes this test's log (go test -v -run
// TestPlacementScoresOnASimulatedFleet ./dispatch/fleetsim/).
func TestPlacementScoresOnASimulatedFleet(t *testing.T) {
	policies := []struct {
		name          string
		scores        []dispatch.WeightedScore
		maxCandidates int
	}{
		{"Headroom (default)", nil, 2},
		{"Price", []dispatch.WeightedScore{{Name: "Price"}}, 2},
		{"NearData", []dispatch.WeightedScore{{Name: "NearData"}}, 2},
		{"NearData×2 + Price", []dispatch.WeightedScore{{Name: "NearData", Weight: 2}, {Name: "Price", Weight: 1}}, 2},
		{"Price, 1 candidate", []dispatch.WeightedScore{{Name: "Price"}}, 1},
	}
	for seed := range uint64(3) {
		trace := placementTrace(seed, 600, 0.5)
		figures := make([]placementFigures, len(policies))
		for i, p := range policies {
			q := queue("q", tiers()...)
			q.Scores, q.MaxCandidates = p.scores, p.maxCandidates
			figures[i] = figuresOf(Run(Fleet{Clusters: tiers(), Queues: []*dispatch.GlobalQueue{q}}, trace, Options{}))
			t.Logf("seed %d %-20s cost/GPU-hour %.2f, near data %3.0f%%, wait mean %v p90 %v", seed, p.name,
				figures[i].costPerGPUHour, 100*figures[i].nearData, figures[i].meanWait.Round(time.Second), figures[i].p90Wait.Round(time.Second))
		}
		base, price, near, both := figures[0], figures[1], figures[2], figures[3]
		if price.costPerGPUHour > 0.92*base.costPerGPUHour {
			t.Errorf("seed %d: Price costs %.2f a GPU-hour, want at least 8%% under the default's %.2f", seed, price.costPerGPUHour, base.costPerGPUHour)
		}
		if near.nearData < base.nearData+0.2 || both.nearData < base.nearData+0.2 {
			t.Errorf("seed %d: near data %.2f (NearData), %.2f (both); want 20 points over the default's %.2f", seed, near.nearData, both.nearData, base.nearData)
		}
		if both.costPerGPUHour >= base.costPerGPUHour {
			t.Errorf("seed %d: NearData and Price cost %.2f a GPU-hour, want under the default's %.2f", seed, both.costPerGPUHour, base.costPerGPUHour)
		}
	}
}

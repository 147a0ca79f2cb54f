package fleetsim

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// checkpointTrace is a fleet kept full by long low-priority training jobs that checkpoint every 15, 30
// or 60 minutes, and urgent high-priority jobs that preempt them, every 10 minutes on average.
func checkpointTrace(seed uint64) []Job {
	rnd := rand.New(rand.NewPCG(seed, 4))
	var out []Job
	for i := range 60 {
		out = append(out, Job{Name: fmt.Sprintf("train-%d", i), Queue: "q", Pods: 1 + rnd.IntN(2), GPUsPerPod: 8,
			Arrive: time.Duration(rnd.IntN(240)) * time.Minute, Run: time.Duration(60+rnd.IntN(180)) * time.Minute,
			CheckpointEvery: []time.Duration{15, 30, 60}[rnd.IntN(3)] * time.Minute})
	}
	var at time.Duration
	for i := 0; at < 8*time.Hour; i++ {
		at += time.Duration(rnd.ExpFloat64() * float64(10*time.Minute))
		out = append(out, Job{Name: fmt.Sprintf("urgent-%d", i), Queue: "q", Priority: 100, Pods: 1, GPUsPerPod: 8,
			Arrive: at, Run: time.Duration(10+rnd.IntN(20)) * time.Minute})
	}
	return out
}

// On the same traces, a dispatcher told how the jobs checkpoint preempts those that lose the least work
// since their last checkpoint, and the GPU-hours lost fall against the order it takes without (the
// newest first, by GPUs): docs/performance.md quotes this test's log (go test -v -run
// TestPreemptionLosesTheLeastWorkOnASimulatedFleet ./dispatch/fleetsim/).
func TestPreemptionLosesTheLeastWorkOnASimulatedFleet(t *testing.T) {
	clusters := []Cluster{{Name: "a", Nodes: 4, GPUsPerNode: 8, Product: "H100"}, {Name: "b", Nodes: 4, GPUsPerNode: 8, Product: "H100"}}
	var lostWithout, lostWith float64
	for seed := range uint64(4) {
		trace := checkpointTrace(seed)
		lost := map[bool]float64{}
		for _, know := range []bool{false, true} {
			q := queue("q", clusters...)
			q.Preemption = gantry.PreemptionPolicy{WithinQueue: gantry.PreemptLowerPriority}
			out := Run(Fleet{Clusters: clusters, Queues: []*dispatch.GlobalQueue{q}}, trace, Options{KnowCheckpoints: know, Step: 5 * time.Second})
			var used float64
			preempted := 0
			for _, o := range out {
				lost[know] += o.LostGPUHours
				used += o.GPUHours
				preempted += o.TakenBack
			}
			t.Logf("seed %d, checkpoints known %-5v: %3d preemptions, %6.1f GPU-hours lost of %6.1f used (%.1f%%)",
				seed, know, preempted, lost[know], used, 100*lost[know]/used)
		}
		lostWithout, lostWith = lostWithout+lost[false], lostWith+lost[true]
		if lost[true] > lost[false] {
			t.Errorf("seed %d: %.1f GPU-hours lost knowing the checkpoints, %.1f without", seed, lost[true], lost[false])
		}
	}
	t.Logf("in all: %.1f GPU-hours lost without, %.1f with (%.0f%% less)", lostWithout, lostWith, 100*(1-lostWith/lostWithout))
	if lostWith > 0.7*lostWithout {
		t.Errorf("knowing the checkpoints lost %.1f GPU-hours, without %.1f: want at least 30%% less", lostWith, lostWithout)
	}
}

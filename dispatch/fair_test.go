package dispatch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// nominatedPerQueue counts a pass's nominations by GlobalQueue.
func nominatedPerQueue(res Result) map[string]int {
	out := map[string]int{}
	for _, n := range res.Nominations {
		out[n.GlobalQueue]++
	}
	return out
}

// jobs makes n pending one-GPU workloads of a queue, created a second apart from start.
func jobs(queue string, n, start int) []*Workload {
	var out []*Workload
	for i := range n {
		out = append(out, makeWorkload(fmt.Sprintf("ns/%s-%d", queue, i), queue).gpus(1).createdAt(start+i).obj())
	}
	return out
}

// Under contention the queues and sub-cohorts of a cohort take what it lends in the ratio of their
// weights; equal shares go to the higher priority, then the older workload.
func TestFairSharing(t *testing.T) {
	lender := makeQueue("lender").cohort("lab").quota("c", "nvidia.com/gpu", 12).obj() // runs nothing
	borrower := func(name string, w int32) *GlobalQueue {
		return makeQueue(name).cohort("lab").quota("c", "nvidia.com/gpu", 0).weight(w).maxCandidates(1).obj()
	}
	cases := map[string]struct {
		snapshot *Snapshot
		want     map[string]int
	}{
		"weights 1 and 2 split what is lent 1:2": {
			snapshot: makeSnapshot().cluster("c").queue(lender).queue(borrower("light", 1)).queue(borrower("heavy", 2)).
				workloads(append(jobs("light", 20, 0), jobs("heavy", 20, 0)...)...).obj(),
			want: map[string]int{"light": 4, "heavy": 8},
		},
		"what a queue already borrows counts": {
			snapshot: makeSnapshot().cluster("c").queue(lender).queue(borrower("light", 1)).queue(borrower("heavy", 2)).
				workloads(append(append(jobs("light", 20, 0), jobs("heavy", 20, 0)...),
					makeWorkload("ns/heavy-running", "heavy").gpus(6).admittedOn("c").obj())...).obj(),
			want: map[string]int{"light": 4, "heavy": 2}, // then 4 and 8 of 12: shares 4/12 and 8/12 over 2
		},
		"a weight of 0 gets only what the others leave": {
			snapshot: makeSnapshot().cluster("c").queue(lender).queue(borrower("zero", 0)).queue(borrower("one", 1)).
				workloads(append(jobs("zero", 4, 0), jobs("one", 10, 1)...)...).obj(),
			want: map[string]int{"zero": 2, "one": 10},
		},
		"sub-cohorts by their weights": {
			snapshot: makeSnapshot().cluster("c").
				cohorts(makeCohort("org").quota("c", 12).obj(), makeCohort("x").parent("org").weight(1).obj(), makeCohort("y").parent("org").weight(3).obj()).
				queue(makeQueue("in-x").cohort("x").quota("c", "nvidia.com/gpu", 0).maxCandidates(1).obj()).
				queue(makeQueue("in-y").cohort("y").quota("c", "nvidia.com/gpu", 0).maxCandidates(1).obj()).
				workloads(append(jobs("in-x", 20, 0), jobs("in-y", 20, 0)...)...).obj(),
			want: map[string]int{"in-x": 3, "in-y": 9},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, nominatedPerQueue(Plan(tc.snapshot))); diff != "" {
				t.Errorf("nominations per queue (-want +got):\n%s", diff)
			}
		})
	}
}

// With equal shares, the higher priority goes first, then the older workload, whichever queue it is in.
func TestFairSharingBreaksTiesByPriorityAndAge(t *testing.T) {
	lender := makeQueue("lender").cohort("lab").quota("c", "nvidia.com/gpu", 1).obj()
	a := makeQueue("a").cohort("lab").quota("c", "nvidia.com/gpu", 0).obj()
	z := makeQueue("z").cohort("lab").quota("c", "nvidia.com/gpu", 0).obj()
	for name, tc := range map[string]struct {
		ws   []*Workload
		want string
	}{
		"priority": {ws: []*Workload{makeWorkload("ns/a", "a").gpus(1).obj(), makeWorkload("ns/z", "z").gpus(1).priority(5).obj()}, want: "ns/z"},
		"age":      {ws: []*Workload{makeWorkload("ns/a", "a").gpus(1).createdAt(2).obj(), makeWorkload("ns/z", "z").gpus(1).createdAt(1).obj()}, want: "ns/z"},
		"name":     {ws: []*Workload{makeWorkload("ns/a", "a").gpus(1).obj(), makeWorkload("ns/z", "z").gpus(1).obj()}, want: "ns/a"},
	} {
		t.Run(name, func(t *testing.T) {
			res := Plan(makeSnapshot().cluster("c").queue(lender).queue(a).queue(z).workloads(tc.ws...).obj())
			if len(res.Nominations) != 1 || res.Nominations[0].Key != tc.want {
				t.Errorf("nominations %+v, want only %s", res.Nominations, tc.want)
			}
		})
	}
}

// A simulated fleet, saturated by two queues of weights 1 and 2 that borrow everything they run: over
// the run their GPU-seconds split 1:2 within 10%. Jobs of 1 to 4 GPUs run 20 to 60 s; agents admit a
// copy when their cluster has the GPUs free; every second is one dispatch pass.
func TestFairSharesConvergeToWeightsInASimulatedRun(t *testing.T) {
	for seed := range uint64(4) {
		sim := newFairSim(rand.New(rand.NewPCG(seed, 2)))
		gpuSeconds := sim.run(4000, 300)
		ratio := gpuSeconds["heavy"] / gpuSeconds["light"]
		busy := (gpuSeconds["heavy"] + gpuSeconds["light"]) / (16 * 3700)
		t.Logf("seed %d: GPU-seconds light %.0f, heavy %.0f, ratio %.3f, fleet busy %.0f%%", seed, gpuSeconds["light"], gpuSeconds["heavy"], ratio, 100*busy)
		if math.Abs(ratio-2)/2 > 0.10 {
			t.Errorf("seed %d: heavy/light GPU-seconds = %.3f, want 2 within 10%%", seed, ratio)
		}
	}
}

type fairSim struct {
	rnd      *rand.Rand
	s        *Snapshot
	free     map[string]int64 // GPUs free per cluster, in milli-units
	ends     map[string]int   // key -> second its job ends
	next     map[string]int   // queue -> next job's number
	now      int
	clusters []string
}

func newFairSim(rnd *rand.Rand) *fairSim {
	clusters := []string{"c1", "c2"}
	sim := &fairSim{rnd: rnd, free: map[string]int64{}, ends: map[string]int{}, next: map[string]int{}, clusters: clusters}
	b := makeSnapshot().cluster(clusters...).cohorts(makeCohort("lab").quota("c1", 8).quota("c2", 8).obj())
	for _, q := range []struct {
		name string
		w    int32
	}{{"light", 1}, {"heavy", 2}} {
		qb := makeQueue(q.name).cohort("lab").weight(q.w).maxCandidates(1)
		for _, c := range clusters {
			qb.quota(c, "nvidia.com/gpu", 0)
		}
		b.queue(qb.obj())
	}
	sim.s = b.obj()
	for _, c := range clusters {
		sim.free[c] = 8000
	}
	return sim
}

// run simulates seconds of dispatching and returns the GPU-seconds each queue ran after warmup.
func (sim *fairSim) run(seconds, warmup int) map[string]float64 {
	out := map[string]float64{}
	for sim.now = 0; sim.now < seconds; sim.now++ {
		sim.topUp()
		sim.finish()
		res := Plan(sim.s)
		sim.apply(res)
		sim.admit()
		if sim.now >= warmup {
			for _, w := range sim.s.Workloads {
				if w.Phase == Admitted {
					out[w.GlobalQueue] += float64(w.Requests["nvidia.com/gpu"]) / 1000
				}
			}
		}
	}
	return out
}

// topUp keeps 20 jobs pending in each queue.
func (sim *fairSim) topUp() {
	pending := map[string]int{}
	for _, w := range sim.s.Workloads {
		if w.Phase == Pending {
			pending[w.GlobalQueue]++
		}
	}
	for _, q := range []string{"light", "heavy"} {
		for ; pending[q] < 20; pending[q]++ {
			sim.next[q]++
			w := makeWorkload(fmt.Sprintf("ns/%s-%d", q, sim.next[q]), q).gpus(1 + sim.rnd.IntN(4)).obj()
			w.Created = t0.Add(time.Duration(sim.now) * time.Second)
			sim.s.Workloads = append(sim.s.Workloads, w)
		}
	}
}

// finish ends the jobs whose time is up and drops finished workloads.
func (sim *fairSim) finish() {
	kept := sim.s.Workloads[:0]
	for _, w := range sim.s.Workloads {
		if w.Phase == Admitted && sim.ends[w.Key] <= sim.now {
			sim.free[w.Winner] += w.Requests["nvidia.com/gpu"]
			continue
		}
		kept = append(kept, w)
	}
	sim.s.Workloads = kept
}

// apply records the pass's winners and nominations, as the hub does.
func (sim *fairSim) apply(res Result) {
	byKey := map[string]*Workload{}
	for _, w := range sim.s.Workloads {
		byKey[w.Key] = w
	}
	for _, win := range res.Winners {
		w := byKey[win.Key]
		w.Phase, w.Winner, w.Copies = Admitted, win.Cluster, nil
		sim.ends[w.Key] = sim.now + 20 + sim.rnd.IntN(41)
	}
	for _, n := range res.Nominations {
		w := byKey[n.Key]
		w.Epoch, w.Nominated, w.NominatedQueue, w.Copies = n.Epoch, n.Clusters, n.GlobalQueue, nil
	}
}

// admit plays the agents: a copy is admitted where its GPUs are free, holding them.
func (sim *fairSim) admit() {
	for _, w := range sim.s.Workloads {
		if w.Phase != Pending || w.Epoch == 0 || len(w.Copies) > 0 {
			continue
		}
		for _, c := range w.Nominated {
			if gpus := w.Requests["nvidia.com/gpu"]; sim.free[c] >= gpus {
				sim.free[c] -= gpus
				w.Copies = append(w.Copies, Copy{Cluster: c, Admitted: true, AdmittedAt: t0.Add(time.Duration(sim.now) * time.Second)})
				break
			}
		}
	}
}

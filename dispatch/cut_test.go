package dispatch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// A cut holds when the quota left where its tail starts holds none of it; else the pass gives it back.
func TestCutIsCheckedWhereItsTailStarts(t *testing.T) {
	queue := func() *queueBuilder {
		return makeQueue("q").quota("a", "nvidia.com/gpu", 4).quota("b", "nvidia.com/gpu", 4)
	}
	tailAt := func(sec int, least int64) map[string]Cut {
		return map[string]Cut{"q": {First: makeWorkload("ns/tail", "q").createdAt(sec).obj(), Least: Resources{"nvidia.com/gpu": least * 1000}}}
	}
	cases := map[string]struct {
		snapshot *Snapshot
		cuts     map[string]Cut
		uncut    bool
	}{
		"no quota left for the tail": {
			snapshot: makeSnapshot().cluster("a", "b").queue(queue().obj()).workloads(
				makeWorkload("ns/r1", "q").gpus(4).admittedOn("a").obj(),
				makeWorkload("ns/r2", "q").gpus(3).admittedOn("b").obj(),
			).obj(),
			cuts: tailAt(5, 2),
		},
		"quota left for the least of the tail": {
			snapshot: makeSnapshot().cluster("a", "b").queue(queue().obj()).workloads(
				makeWorkload("ns/r1", "q").gpus(4).admittedOn("a").obj(),
				makeWorkload("ns/r2", "q").gpus(3).admittedOn("b").obj(),
			).obj(),
			cuts:  tailAt(5, 1),
			uncut: true,
		},
		"the quota left is taken before the tail starts": {
			snapshot: makeSnapshot().cluster("a", "b").queue(queue().obj()).workloads(
				makeWorkload("ns/r1", "q").gpus(4).admittedOn("a").obj(),
				makeWorkload("ns/head", "q").gpus(4).createdAt(1).obj(),
			).obj(),
			cuts: tailAt(5, 1),
		},
		"the quota left is taken only after the tail starts": {
			snapshot: makeSnapshot().cluster("a", "b").queue(queue().obj()).workloads(
				makeWorkload("ns/r1", "q").gpus(4).admittedOn("a").obj(),
				makeWorkload("ns/behind", "q").gpus(4).createdAt(9).obj(),
			).obj(),
			cuts:  tailAt(5, 1),
			uncut: true,
		},
		"a workload behind the tail widens and may give quota back": {
			snapshot: makeSnapshot().cluster("a", "b").queue(incremental(queue())).workloads(
				makeWorkload("ns/r1", "q").gpus(4).admittedOn("b").obj(),
				makeWorkload("ns/behind", "q").gpus(4).createdAt(9).nominated(1, "a").nominatedUnder("q").
					copyWaiting("a", "NoEligibleNode", "busy").obj(),
			).obj(),
			cuts:  tailAt(5, 1),
			uncut: true,
		},
		"a queue in a cohort takes no cut": {
			snapshot: makeSnapshot().cluster("a", "b").queue(queue().cohort("co").obj()).workloads(
				makeWorkload("ns/r1", "q").gpus(4).admittedOn("a").obj(),
				makeWorkload("ns/r2", "q").gpus(4).admittedOn("b").obj(),
			).obj(),
			cuts:  tailAt(5, 1),
			uncut: true,
		},
		"a StrictFIFO queue takes no cut": {
			snapshot: makeSnapshot().cluster("a", "b").queue(queue().strict().obj()).workloads(
				makeWorkload("ns/r1", "q").gpus(4).admittedOn("a").obj(),
				makeWorkload("ns/r2", "q").gpus(4).admittedOn("b").obj(),
			).obj(),
			cuts:  tailAt(5, 1),
			uncut: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			whole := Plan(tc.snapshot)
			tc.snapshot.Cuts = tc.cuts
			got := Plan(tc.snapshot)
			if uncut := len(got.Uncut) > 0; uncut != tc.uncut {
				t.Fatalf("uncut %v, want %v", got.Uncut, tc.uncut)
			}
			got.Uncut = nil
			if diff := cmp.Diff(whole, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("a cut changed what the pass decides for the workloads it has (-whole +cut):\n%s", diff)
			}
		})
	}
}

func incremental(b *queueBuilder) *GlobalQueue {
	q := b.obj()
	q.Incremental = true
	return q
}

// A shape that waited for capacity is not taken to wait for capacity again once a nomination took
// quota: with less quota it may wait for quota instead.
func TestAShapeThatWaitedForCapacityIsScannedAgainAfterANomination(t *testing.T) {
	s := makeSnapshot().cluster("a").gpuFree("a", "A100", 2, 2).
		queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8, "cpu", 4).obj()).workloads(
		makeWorkload("ns/first", "q").gpuPods(1, 4).cpu(1).createdAt(1).obj(),
		makeWorkload("ns/cpus", "q").cpu(4).createdAt(2).obj(),
		makeWorkload("ns/second", "q").gpuPods(1, 4).cpu(1).createdAt(3).obj(),
	).obj()
	reasons := map[string]string{}
	for _, v := range Plan(s).Verdicts {
		reasons[v.Key] = v.Reason
	}
	want := map[string]string{"ns/first": gantry.ReasonWaitingForCapacity, "ns/second": gantry.ReasonWaitingForQuota}
	if diff := cmp.Diff(want, reasons); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
}

func TestLeastOf(t *testing.T) {
	least := Resources{"nvidia.com/gpu": 4000, "cpu": 2000, "memory": 8}
	LeastOf(least, Resources{"nvidia.com/gpu": 2000, "cpu": 3000})
	if want := (Resources{"nvidia.com/gpu": 2000, "cpu": 2000}); !cmp.Equal(least, want) {
		t.Errorf("least %v, want %v", least, want)
	}
}

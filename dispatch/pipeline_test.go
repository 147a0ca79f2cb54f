package dispatch

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Each score, and weighted sums of them, send a workload's copy to the cluster they rank first.
func TestScoresRankTheClustersThatPassEveryFilter(t *testing.T) {
	queue := func(scores ...WeightedScore) *queueBuilder {
		b := makeQueue("q").maxCandidates(1).quota("a", "nvidia.com/gpu", 16).quota("b", "nvidia.com/gpu", 16).quota("c", "nvidia.com/gpu", 16)
		b.q.Scores = scores
		return b
	}
	fleet := func(q *GlobalQueue) *snapshotBuilder {
		return makeSnapshot().cluster("a", "b", "c").queue(q).
			gpuFree("a", "A100", 10, 8).gpuFree("b", "A100", 20, 8).gpuFree("c", "A100", 5, 5)
	}
	running := func(key, cluster string, gpus int) *Workload {
		return makeWorkload(key, "q").gpus(gpus).admittedOn(cluster).obj()
	}
	job := makeWorkload("ns/job", "q").gpuPods(1, 1).obj()
	cases := map[string]struct {
		snapshot *Snapshot
		want     string
	}{
		"Headroom by default: the most quota left": {
			snapshot: fleet(queue().obj()).workloads(running("ns/a", "a", 8), running("ns/b", "b", 4), running("ns/c", "c", 12), job).obj(),
			want:     "b",
		},
		"MostFreeGPUs": {
			snapshot: fleet(queue(WeightedScore{Name: "MostFreeGPUs"}).obj()).workloads(job).obj(),
			want:     "b",
		},
		"BinPacking: the fewest free that still fit": {
			snapshot: fleet(queue(WeightedScore{Name: "BinPacking"}).obj()).workloads(job).obj(),
			want:     "c",
		},
		"Spread: the fewest of the queue's workloads": {
			snapshot: fleet(queue(WeightedScore{Name: "Spread"}).obj()).workloads(
				running("ns/a1", "a", 1), running("ns/a2", "a", 1), running("ns/c1", "c", 1), job).obj(),
			want: "b",
		},
		"Preference: earliest listed": {
			snapshot: fleet(func() *GlobalQueue {
				q := queue(WeightedScore{Name: "Preference"}).obj()
				q.PreferredClusters = []string{"c", "a"}
				return q
			}()).workloads(job).obj(),
			want: "c",
		},
		"weights: MostFreeGPUs x3 outweighs Preference x1": {
			snapshot: fleet(func() *GlobalQueue {
				q := queue(WeightedScore{Name: "Preference", Weight: 1}, WeightedScore{Name: "MostFreeGPUs", Weight: 3}).obj()
				q.PreferredClusters = []string{"c", "a", "b"} // c 1, a 0.5, b 0; free: b 1, a 0.33, c 0
				return q
			}()).workloads(job).obj(),
			want: "b",
		},
		"weights: Preference x3 outweighs MostFreeGPUs x1": {
			snapshot: fleet(func() *GlobalQueue {
				q := queue(WeightedScore{Name: "Preference", Weight: 3}, WeightedScore{Name: "MostFreeGPUs", Weight: 1}).obj()
				q.PreferredClusters = []string{"c", "a", "b"}
				return q
			}()).workloads(job).obj(),
			want: "c",
		},
		"a cluster without a capacity report ranks last on GPU scores": {
			snapshot: makeSnapshot().cluster("a", "b", "c").queue(queue(WeightedScore{Name: "BinPacking"}).obj()).
				gpuFree("a", "A100", 10, 8).gpuFree("b", "A100", 20, 8).workloads(job).obj(),
			want: "a",
		},
		"an unknown score falls back to Headroom": {
			snapshot: fleet(queue(WeightedScore{Name: "Nonesuch"}).obj()).workloads(running("ns/a", "a", 8), running("ns/c", "c", 2), job).obj(),
			want:     "b",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res := Plan(tc.snapshot)
			if len(res.Nominations) != 1 {
				t.Fatalf("nominations %+v, verdicts %+v; want one", res.Nominations, res.Verdicts)
			}
			if diff := cmp.Diff([]string{tc.want}, res.Nominations[0].Clusters); diff != "" {
				t.Errorf("clusters (-want +got):\n%s", diff)
			}
		})
	}
}

// Scores are registered under their own names, and every score the API accepts has one.
func TestEveryScoreOfTheAPIIsRegistered(t *testing.T) {
	for name, s := range scorers {
		if s.name() != name {
			t.Errorf("score registered as %s is named %s", name, s.name())
		}
	}
	for _, name := range []gantry.ScoreName{gantry.ScoreHeadroom, gantry.ScoreMostFreeGPUs, gantry.ScoreBinPacking, gantry.ScoreSpread, gantry.ScorePreference,
		gantry.ScorePrice, gantry.ScoreNearData, gantry.ScoreWithinQuota} {
		if scorers[string(name)] == nil {
			t.Errorf("the API's score %s has no scorer", name)
		}
	}
}

// An incremental queue sends a workload to one cluster first, and to one more each time every cluster
// holding a copy said it cannot admit it now, up to maxCandidates; it stays where it is when there is
// nowhere more to go.
func TestIncrementalDispatch(t *testing.T) {
	queue := func(incremental bool) *GlobalQueue {
		q := makeQueue("q").maxCandidates(3).quota("a", "nvidia.com/gpu", 16).quota("b", "nvidia.com/gpu", 12).quota("c", "nvidia.com/gpu", 8).obj()
		q.Incremental = incremental
		return q
	}
	job := func() *workloadBuilder { return makeWorkload("ns/job", "q").gpus(1) }
	cases := map[string]struct {
		snapshot *Snapshot
		want     []Nomination
	}{
		"one cluster first": {
			snapshot: makeSnapshot().cluster("a", "b", "c").queue(queue(true)).workloads(job().obj()).obj(),
			want:     []Nomination{{Key: "ns/job", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}, Reach: ReachCandidates}},
		},
		"one more once every copy waits": {
			snapshot: makeSnapshot().cluster("a", "b", "c").queue(queue(true)).workloads(
				job().nominated(1, "a").copyWaiting("a", "InsufficientResources", "no room").obj()).obj(),
			want: []Nomination{{Key: "ns/job", Epoch: 2, GlobalQueue: "q", Clusters: []string{"a", "b"}, Reach: ReachWidened}},
		},
		"not while a copy has not answered": {
			snapshot: makeSnapshot().cluster("a", "b", "c").queue(queue(true)).workloads(
				job().nominated(2, "a", "b").copyWaiting("a", "InsufficientResources", "no room").obj()).obj(),
		},
		"not beyond maxCandidates": {
			snapshot: makeSnapshot().cluster("a", "b", "c").queue(queue(true)).workloads(
				job().nominated(3, "a", "b", "c").copyWaiting("a", "InsufficientResources", "no room").
					copyWaiting("b", "InsufficientResources", "no room").copyWaiting("c", "InsufficientResources", "no room").obj()).obj(),
		},
		"not when no other cluster passes the filters": {
			snapshot: makeSnapshot().cluster("a", "b", "c").cordoned("b").cordoned("c").queue(queue(true)).workloads(
				job().nominated(1, "a").copyWaiting("a", "InsufficientResources", "no room").obj()).obj(),
		},
		"all at once otherwise": {
			snapshot: makeSnapshot().cluster("a", "b", "c").queue(queue(false)).workloads(job().obj()).obj(),
			want:     []Nomination{{Key: "ns/job", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a", "b", "c"}, Reach: ReachCandidates}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Plan(tc.snapshot).Nominations); diff != "" {
				t.Errorf("nominations (-want +got):\n%s", diff)
			}
		})
	}
}

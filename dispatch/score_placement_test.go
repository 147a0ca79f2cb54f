package dispatch

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Price, NearData and WithinQuota send a workload's copy to the cluster they rank first, alone or
// weighed against another score.
func TestPlacementScoresRankClusters(t *testing.T) {
	queue := func(scores ...WeightedScore) *queueBuilder {
		b := makeQueue("q").maxCandidates(1).quota("a", "nvidia.com/gpu", 16).quota("b", "nvidia.com/gpu", 16).quota("c", "nvidia.com/gpu", 16)
		b.q.Scores = scores
		return b
	}
	priced := func(b *snapshotBuilder, name string, gpu map[string]float64, cpu float64) *snapshotBuilder {
		c := b.s.Clusters[name]
		c.Price = &Price{GPU: gpu, CPU: cpu, HasCPU: cpu > 0}
		b.s.Clusters[name] = c
		return b
	}
	labelled := func(b *snapshotBuilder, name string, labels map[string]string) *snapshotBuilder {
		c := b.s.Clusters[name]
		c.Labels = labels
		b.s.Clusters[name] = c
		return b
	}
	tiers := func(q *GlobalQueue) *snapshotBuilder { // b is on-prem, cheapest; c has no price
		b := makeSnapshot().cluster("a", "b", "c").queue(q).gpuFree("a", "A100", 20, 8).gpuFree("a", "H100", 20, 8).
			gpuFree("b", "A100", 20, 8).gpuFree("c", "A100", 20, 8)
		b = priced(b, "a", map[string]float64{"A100": 2.5, "H100": 1.0}, 0.05)
		return priced(b, "b", map[string]float64{"": 1.5}, 0.02)
	}
	near := func(q *GlobalQueue) *snapshotBuilder {
		b := makeSnapshot().cluster("a", "b", "c").queue(q)
		b = labelled(b, "a", map[string]string{"region": "us", "storage": "fast"})
		b = labelled(b, "b", map[string]string{"region": "eu"})
		return labelled(b, "c", map[string]string{"region": "eu", "storage": "fast"})
	}
	withData := func(terms ...gantry.LabelTerm) *Workload {
		w := makeWorkload("ns/job", "q").gpuPods(1, 1).obj()
		w.DataLocation = terms
		return w
	}
	job := makeWorkload("ns/job", "q").gpuPods(2, 1).obj()
	cases := map[string]struct {
		snapshot *Snapshot
		want     string
	}{
		"Price: the cheapest per hour, a cluster without a price last": {
			snapshot: tiers(queue(WeightedScore{Name: "Price"}).obj()).workloads(job).obj(),
			want:     "b",
		},
		"Price: the product the job would get there": {
			snapshot: tiers(queue(WeightedScore{Name: "Price"}).obj()).workloads(makeWorkload("ns/h", "q").gpuPods(2, 1, "H100", "A100").obj()).obj(),
			want:     "a",
		},
		"Price counts CPU cores too": {
			snapshot: priced(priced(makeSnapshot().cluster("a", "b", "c").queue(queue(WeightedScore{Name: "Price"}).obj()),
				"a", nil, 0.04), "b", nil, 0.03).workloads(makeWorkload("ns/cpu", "q").cpu(4).obj()).obj(),
			want: "b",
		},
		"NearData: the most terms matched": {
			snapshot: near(queue(WeightedScore{Name: "NearData"}).obj()).workloads(withData(
				gantry.LabelTerm{Key: "region", Value: "eu"}, gantry.LabelTerm{Key: "storage", Value: "fast"})).obj(),
			want: "c",
		},
		"NearData: a job without a data location leaves the order to the rest": {
			snapshot: near(queue(WeightedScore{Name: "NearData"}).obj()).workloads(withData()).obj(),
			want:     "a",
		},
		"NearData x2 outweighs Price x1": {
			snapshot: labelled(tiers(queue(WeightedScore{Name: "NearData", Weight: 2}, WeightedScore{Name: "Price", Weight: 1}).obj()),
				"a", map[string]string{"region": "us"}).workloads(withData(gantry.LabelTerm{Key: "region", Value: "us"})).obj(),
			want: "a",
		},
		"WithinQuota x2: its own quota over borrowing, over Preference x1": {
			snapshot: makeSnapshot().cluster("a", "b").queue(func() *GlobalQueue {
				q := makeQueue("q").maxCandidates(1).cohort("lab").quota("a", "nvidia.com/gpu", 2).quota("b", "nvidia.com/gpu", 8).obj()
				q.Scores, q.PreferredClusters = []WeightedScore{{Name: "WithinQuota", Weight: 2}, {Name: "Preference", Weight: 1}}, []string{"a", "b"}
				return q
			}()).queue(makeQueue("lender").cohort("lab").quota("a", "nvidia.com/gpu", 8).obj()).
				workloads(makeWorkload("ns/job", "q").gpus(4).obj()).obj(),
			want: "b",
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

// A workload's price per hour on a cluster: its GPUs at the price of the product it would get there,
// its CPU cores at the CPU price if it sets one; unknown (NaN) when it prices none of the GPUs it would get.
func TestPerHour(t *testing.T) {
	a100, h100 := GPUCapacity{Product: "A100", Free: 8, LargestFreeOnNode: 8}, GPUCapacity{Product: "H100", Free: 1, LargestFreeOnNode: 1}
	cases := map[string]struct {
		cluster Cluster
		w       *Workload
		want    float64
	}{
		"no price":                          {cluster: Cluster{}, w: makeWorkload("ns/w", "q").gpuPods(1, 1).obj(), want: math.NaN()},
		"the product's own price":           {cluster: Cluster{GPUs: []GPUCapacity{a100}, Price: &Price{GPU: map[string]float64{"A100": 2}}}, w: makeWorkload("ns/w", "q").gpuPods(2, 2, "A100").obj(), want: 8},
		"the price of every other product":  {cluster: Cluster{GPUs: []GPUCapacity{a100}, Price: &Price{GPU: map[string]float64{"": 1.5, "H100": 4}}}, w: makeWorkload("ns/w", "q").gpuPods(1, 2, "A100").obj(), want: 3},
		"the first product with room":       {cluster: Cluster{GPUs: []GPUCapacity{a100, h100}, Price: &Price{GPU: map[string]float64{"A100": 2, "H100": 4}}}, w: makeWorkload("ns/w", "q").gpuPods(1, 2, "H100", "A100").obj(), want: 4},
		"any product: the dearest reported": {cluster: Cluster{GPUs: []GPUCapacity{a100, h100}, Price: &Price{GPU: map[string]float64{"A100": 2, "H100": 4}}}, w: makeWorkload("ns/w", "q").gpuPods(1, 1).obj(), want: 4},
		"a product not priced":              {cluster: Cluster{GPUs: []GPUCapacity{a100}, Price: &Price{GPU: map[string]float64{"H100": 4}}}, w: makeWorkload("ns/w", "q").gpuPods(1, 1, "A100").obj(), want: math.NaN()},
		"GPUs and CPUs": {cluster: Cluster{Price: &Price{GPU: map[string]float64{"": 2}, CPU: 0.25, HasCPU: true}},
			w: makeWorkload("ns/w", "q").gpuPods(1, 1).cpu(4).obj(), want: 3},
		"CPUs not priced cost nothing": {cluster: Cluster{Price: &Price{GPU: map[string]float64{"": 2}}},
			w: makeWorkload("ns/w", "q").gpuPods(1, 1).cpu(4).obj(), want: 2},
		"GPUs not priced": {cluster: Cluster{Price: &Price{CPU: 0.25, HasCPU: true}},
			w: makeWorkload("ns/w", "q").gpuPods(1, 1).cpu(4).obj(), want: math.NaN()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.cluster.PerHour(tc.w)
			if !(got == tc.want || math.IsNaN(got) && math.IsNaN(tc.want)) {
				t.Errorf("PerHour = %v, want %v", got, tc.want)
			}
		})
	}
}

// A winner that takes its queue beyond its own quota on the cluster is recorded as borrowing; one
// within it is not.
func TestAWinnerBeyondItsQueuesQuotaBorrows(t *testing.T) {
	for _, tc := range []struct {
		gpus     int
		borrowed bool
	}{{4, false}, {6, true}} {
		s := makeSnapshot().cluster("a").queue(makeQueue("q").cohort("lab").quota("a", "nvidia.com/gpu", 4).obj()).
			queue(makeQueue("lender").cohort("lab").quota("a", "nvidia.com/gpu", 8).obj()).
			workloads(makeWorkload("ns/w", "q").gpus(tc.gpus).nominated(1, "a").copyAdmitted("a", 1).obj()).obj()
		res := Plan(s)
		if want := []Winner{{Key: "ns/w", Cluster: "a", GlobalQueue: "q", Borrowed: tc.borrowed}}; !cmp.Equal(want, res.Winners) {
			t.Errorf("%d GPUs on a quota of 4: winners %+v, want %+v", tc.gpus, res.Winners, want)
		}
	}
}

// A workload taken back from a lost cluster after it saved work goes, under NearData, to a cluster in
// the region of the one it ran on, where its checkpoint is; without saved work the tie stays as listed.
func TestAFailedOverJobGoesNearItsCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		checkpointedOn string
		want           string
	}{{"a", "b"}, {"", "c"}} {
		q := makeQueue("q").maxCandidates(1).quota("a", "nvidia.com/gpu", 8).quota("c", "nvidia.com/gpu", 8).quota("b", "nvidia.com/gpu", 8).obj()
		q.Scores = []WeightedScore{{Name: "NearData"}}
		s := makeSnapshot().cluster("a", "b", "c").queue(q).obj()
		for name, region := range map[string]string{"a": "eu", "b": "eu", "c": "us"} {
			c := s.Clusters[name]
			c.Labels, c.Fenced = map[string]string{RegionLabel: region}, name == "a"
			s.Clusters[name] = c
		}
		w := makeWorkload("ns/moved", "q").gpus(8).obj()
		w.CheckpointedOn = tc.checkpointedOn
		s.Workloads = []*Workload{w}
		res := Plan(s)
		if len(res.Nominations) != 1 || !cmp.Equal(res.Nominations[0].Clusters, []string{tc.want}) {
			t.Errorf("checkpointed on %q: nominations %+v, want %s", tc.checkpointedOn, res.Nominations, tc.want)
		}
	}
}

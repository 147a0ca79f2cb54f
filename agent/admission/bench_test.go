package admission

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// benchCluster is n 8-GPU nodes, half H100 and half A100, one in ten tainted for a dedicated team, with
// 0, 2, 4, 6 or 8 GPUs (and matching cpu and memory) used by bound pods.
func benchCluster(n int) ([]Node, map[string][]corev1.ResourceList) {
	nodes := make([]Node, n)
	usage := map[string][]corev1.ResourceList{}
	for i := range nodes {
		product := h100
		if i%2 == 1 {
			product = a100
		}
		nodes[i] = gpuNode(fmt.Sprintf("node-%05d", i), 8, product)
		nodes[i].Labels["topology.kubernetes.io/zone"] = fmt.Sprintf("zone-%d", i%3)
		if i%10 == 9 {
			nodes[i].Taints = []corev1.Taint{{Key: "dedicated", Value: "team-a", Effect: corev1.TaintEffectNoSchedule}}
		}
		for range (i / 2) % 5 {
			usage[nodes[i].Name] = append(usage[nodes[i].Name], rl("cpu", "8", "memory", "64Gi", "nvidia.com/gpu", "2"))
		}
	}
	return nodes, usage
}

func benchGang() Gang {
	workers := gpuPods("workers", 64, 4)
	workers.NodeSelector = map[string]string{GPUProductLabel: h100}
	return gang("bench", PodSet{Name: "launcher", Count: 1, Requests: rl("cpu", "2", "memory", "8Gi")}, workers)
}

func BenchmarkFit64PodGang5000Nodes(b *testing.B) {
	nodes, usage := benchCluster(5000)
	s := snapshot(nodes, usage)
	g := benchGang()
	if _, u := s.Fit(g); u != nil {
		b.Fatalf("benchmark gang does not fit: %v", u)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, u := s.Fit(g); u != nil {
			b.Fatal(u)
		}
	}
}

// BenchmarkFit64PodGang5000NodesFirstFit is the same fit on a snapshot that has not yet computed the
// eligible nodes of the gang's pod sets, as the first fit of a pass with new constraints.
func BenchmarkFit64PodGang5000NodesFirstFit(b *testing.B) {
	nodes, usage := benchCluster(5000)
	s := snapshot(nodes, usage)
	g := benchGang()
	b.ReportAllocs()
	for b.Loop() {
		clear(s.eligible)
		if _, u := s.Fit(g); u != nil {
			b.Fatal(u)
		}
	}
}

// BenchmarkFit64PodGang5000NodesUnfit is a gang that does not fit now: the fit and its explanation.
func BenchmarkFit64PodGang5000NodesUnfit(b *testing.B) {
	nodes, usage := benchCluster(5000)
	s := snapshot(nodes, usage)
	g := benchGang()
	g.PodSets[1].Count = 5000 // more 4-GPU pods than the H100 nodes have room for now
	if _, u := s.Fit(g); u == nil || u.Reason != InsufficientResources {
		b.Fatalf("want InsufficientResources, got %v", u)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.Fit(g)
	}
}

// benchGangs is n gangs of 1 to 16 pods of 1, 2, 4 or 8 GPUs, some pinned to a product, some tolerating
// the dedicated taint, some with a launcher pod set, of mixed priorities and ages.
func benchGangs(n int) []Gang {
	r := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	gangs := make([]Gang, n)
	for i := range gangs {
		workers := gpuPods("workers", int32(1+r.IntN(16)), []int{1, 2, 4, 8}[r.IntN(4)])
		switch r.IntN(10) {
		case 0, 1, 2:
			workers.NodeSelector = map[string]string{GPUProductLabel: h100}
		case 3:
			workers.NodeSelector = map[string]string{GPUProductLabel: a100}
		case 4:
			workers.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "team-a", Effect: corev1.TaintEffectNoSchedule}}
		}
		g := Gang{Key: fmt.Sprintf("ns-%d/job-%d", i%20, i), Priority: int32(r.IntN(4)),
			CreationTime: t0.Add(time.Duration(r.IntN(3600)) * time.Second), PodSets: []PodSet{workers}}
		if r.IntN(3) == 0 {
			g.PodSets = append(g.PodSets, PodSet{Name: "launcher", Count: 1, Requests: rl("cpu", "2", "memory", "8Gi")})
		}
		gangs[i] = g
	}
	return gangs
}

func BenchmarkAdmitPass10000Gangs1000Nodes(b *testing.B) {
	nodes, usage := benchCluster(1000)
	gangs := benchGangs(10000)
	admitted := 0
	b.ReportAllocs()
	for b.Loop() {
		// A pass: snapshot the cluster, count the bound pods, decide every pending gang.
		s := snapshot(nodes, usage)
		admitted = 0
		for _, d := range s.Admit(gangs) {
			if d.Admitted {
				admitted++
			}
		}
	}
	b.ReportMetric(float64(admitted), "admitted/op")
}

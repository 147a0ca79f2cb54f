package admission

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// blockLabel is the topology label of benchCluster: 50 blocks of 100 nodes (for 5,000 nodes), each block
// of ten runs of ten consecutive nodes, so that every block has both products and every level of use.
const blockLabel = "example.com/block"

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
		nodes[i].Labels[blockLabel] = fmt.Sprintf("block-%02d", (i/10)%50)
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
		clear(s.groups)
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

// BenchmarkFit5000NodesNodesBack is a gang about to be rejected while nodes are away: 500 of the 2,500
// H100 nodes are cordoned, and the gang's 4-GPU H100 pods fit 4,000 at most on the others, even empty.
// "waits": 4,500 pods, which fit once the cordoned nodes are back; "first of a pass": the same, building
// the cluster with every node back, as the first rejection of a pass does; "rejected": 5,500 pods,
// which do not fit with every node back either.
func BenchmarkFit5000NodesNodesBack(b *testing.B) {
	nodes, usage := benchCluster(5000)
	for i := range nodes {
		if i%10 == 4 {
			nodes[i].Unschedulable = true
			nodes[i].Taints = []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
		}
	}
	s := snapshot(nodes, usage)
	sized := func(count int32) Gang {
		g := benchGang()
		g.PodSets[1].Count = count
		return g
	}
	for _, bc := range []struct {
		name  string
		gang  Gang
		fresh bool
		want  UnfitReason
	}{{"waits", sized(4500), false, InsufficientResources}, {"first of a pass", sized(4500), true, InsufficientResources},
		{"rejected", sized(5500), false, NeverFits}} {
		b.Run(bc.name, func(b *testing.B) {
			if _, u := s.Fit(bc.gang); u == nil || u.Reason != bc.want {
				b.Fatalf("want %s, got %v", bc.want, u)
			}
			b.ReportAllocs()
			for b.Loop() {
				if bc.fresh {
					s.back = nil
				}
				s.Fit(bc.gang)
			}
		})
	}
}

// BenchmarkFit64PodGang5000NodesProducts is a 64-pod gang whose workers prefer H100, else A100: on the
// H100 nodes, and on the A100 nodes once every H100 node is full.
func BenchmarkFit64PodGang5000NodesProducts(b *testing.B) {
	nodes, usage := benchCluster(5000)
	g := benchGang()
	g.PodSets[1].NodeSelector = nil
	g.PodSets[1].GPUProducts = []string{h100, a100}
	h100Full := map[string][]corev1.ResourceList{}
	for _, n := range nodes {
		h100Full[n.Name] = usage[n.Name]
		if n.Labels[GPUProductLabel] == h100 {
			h100Full[n.Name] = []corev1.ResourceList{rl("nvidia.com/gpu", "8")}
		}
	}
	for _, bc := range []struct {
		name  string
		usage map[string][]corev1.ResourceList
		want  string
	}{{"first choice", usage, h100}, {"second choice", h100Full, a100}} {
		b.Run(bc.name, func(b *testing.B) {
			s := snapshot(nodes, bc.usage)
			if p, u := s.Fit(g); u != nil || p[len(p)-1].GPUProduct != bc.want {
				b.Fatalf("want a placement on %s, got %v", bc.want, u)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, u := s.Fit(g); u != nil {
					b.Fatal(u)
				}
			}
		})
	}
}

// BenchmarkFit64PodGang5000Nodes50Blocks is a 64-pod gang that must fit one of 50 blocks of 100 nodes:
// on any product (it fits the tightest block), on H100 else A100 with half the pods (it fits on H100),
// and on H100 else A100 with all 64 pods, which no block holds on one product: every block of both
// products is tried, then the failure explained.
func BenchmarkFit64PodGang5000Nodes50Blocks(b *testing.B) {
	nodes, usage := benchCluster(5000)
	s := snapshot(nodes, usage)
	anyProduct := benchGang()
	anyProduct.PodSets[1].NodeSelector = nil
	anyProduct.TopologyKey = blockLabel
	products := benchGang()
	products.PodSets[1].NodeSelector = nil
	products.PodSets[1].GPUProducts = []string{h100, a100}
	products.TopologyKey = blockLabel
	half := products
	half.PodSets = slices.Clone(products.PodSets)
	half.PodSets[1].Count = 32
	for _, bc := range []struct {
		name string
		gang Gang
		fits bool
	}{{"any product", anyProduct, true}, {"products, fits", half, true}, {"products, unfit", products, false}} {
		b.Run(bc.name, func(b *testing.B) {
			if p, u := s.Fit(bc.gang); (u == nil) != bc.fits || bc.fits && p[0].Domain == "" {
				b.Fatalf("fits %v, want %v: %v", u == nil, bc.fits, u)
			}
			b.ReportAllocs()
			for b.Loop() {
				s.Fit(bc.gang)
			}
		})
	}
}

// BenchmarkSnapshotMemory5000Nodes measures what a snapshot of 5,000 nodes with their bound pods holds
// on the heap (the nodes themselves, built beforehand, not counted), and what the eligibility caches
// add after fits with GPU products and a topology key.
func BenchmarkSnapshotMemory5000Nodes(b *testing.B) {
	nodes, usage := benchCluster(5000)
	g := benchGang()
	g.PodSets[1].NodeSelector = nil
	g.PodSets[1].GPUProducts = []string{h100, a100}
	g.TopologyKey = blockLabel
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var built, cached uint64
	for b.Loop() {
		before := heap()
		s := snapshot(nodes, usage)
		after := heap()
		s.Fit(g)
		s.Fit(benchGang())
		withCaches := heap()
		runtime.KeepAlive(s)
		built, cached = after-before, withCaches-after
	}
	b.ReportMetric(float64(built), "heap-B/snapshot")
	b.ReportMetric(float64(cached), "heap-B/caches")
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
	benchAdmitPass(b, benchGangs(10000), AdmitOptions{})
}

// BenchmarkAdmitPass10000Gangs1000NodesStarvation is the same pass with starvation protection on: the
// gangs were created over the hour before the pass and the timeout is 30 minutes, so that about half of
// them starve if they do not fit, and the nodes they hold are fitted around. The second case adds the
// GPU products and blocks of BenchmarkAdmitPass10000Gangs1000NodesProductsBlocks.
func BenchmarkAdmitPass10000Gangs1000NodesStarvation(b *testing.B) {
	opts := AdmitOptions{Now: time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC), StarvationTimeout: 30 * time.Minute}
	b.Run("selectors", func(b *testing.B) { benchAdmitPass(b, benchGangs(10000), opts) })
	b.Run("products and blocks", func(b *testing.B) { benchAdmitPass(b, productsBlocksGangs(), opts) })
}

// BenchmarkAdmitPass10000Gangs1000NodesProductsBlocks is the same pass where the workers of half the
// gangs list GPU products instead of a nodeSelector (H100 else A100, or the other way) and a third of
// the gangs must fit one block (5 blocks of 200 nodes here).
func BenchmarkAdmitPass10000Gangs1000NodesProductsBlocks(b *testing.B) {
	benchAdmitPass(b, productsBlocksGangs(), AdmitOptions{})
}

func productsBlocksGangs() []Gang {
	gangs := benchGangs(10000)
	for i := range gangs {
		w := &gangs[i].PodSets[0]
		switch i % 4 {
		case 0:
			w.NodeSelector, w.GPUProducts = nil, []string{h100, a100}
		case 1:
			w.NodeSelector, w.GPUProducts = nil, []string{a100, h100}
		}
		if i%3 == 0 {
			gangs[i].TopologyKey = blockLabel
		}
	}
	return gangs
}

func benchAdmitPass(b *testing.B, gangs []Gang, opts AdmitOptions) {
	nodes, usage := benchCluster(1000)
	admitted, held := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		// A pass: snapshot the cluster, count the bound pods, decide every pending gang.
		s := snapshot(nodes, usage)
		admitted, held = 0, 0
		for _, d := range s.AdmitWithOptions(gangs, opts) {
			if d.Admitted {
				admitted++
			} else if d.Unfit.Reason == HeldForStarvingGang {
				held++
			}
		}
	}
	b.ReportMetric(float64(admitted), "admitted/op")
	if opts.StarvationTimeout > 0 {
		b.ReportMetric(float64(held), "held/op")
	}
}

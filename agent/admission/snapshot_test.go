package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReserveAndRelease(t *testing.T) {
	nodes := []Node{gpuNode("a", 8, h100), gpuNode("b", 8, h100)}
	req := rl("cpu", "4", "memory", "32Gi", "nvidia.com/gpu", "4")
	p1 := Placement{{PodSet: "w", Node: "a", Count: 2, Requests: req}}
	p2 := Placement{{PodSet: "w", Node: "b", Count: 1, Requests: req}}

	type freeGPU map[string]int64
	gpus := func(s *Snapshot) freeGPU {
		return freeGPU{"a": freeOf(t, s, "a", gpu), "b": freeOf(t, s, "b", gpu)}
	}
	cases := []struct {
		name string
		do   func(s *Snapshot)
		want freeGPU
	}{
		{"nothing", func(s *Snapshot) {}, freeGPU{"a": 8, "b": 8}},
		{"reserve", func(s *Snapshot) { s.Reserve("g1", p1) }, freeGPU{"a": 0, "b": 8}},
		{"reserve twice counts once", func(s *Snapshot) { s.Reserve("g1", p1); s.Reserve("g1", p1) }, freeGPU{"a": 0, "b": 8}},
		{"reserve again replaces", func(s *Snapshot) { s.Reserve("g1", p1); s.Reserve("g1", p2) }, freeGPU{"a": 8, "b": 4}},
		{"two keys add up", func(s *Snapshot) { s.Reserve("g1", p2); s.Reserve("g2", p2) }, freeGPU{"a": 8, "b": 0}},
		{"release restores", func(s *Snapshot) { s.Reserve("g1", p1); s.Reserve("g2", p2); s.Release("g1") }, freeGPU{"a": 8, "b": 4}},
		{"release unknown key", func(s *Snapshot) { s.Reserve("g1", p1); s.Release("nope") }, freeGPU{"a": 0, "b": 8}},
		{"release twice", func(s *Snapshot) { s.Reserve("g1", p1); s.Release("g1"); s.Release("g1") }, freeGPU{"a": 8, "b": 8}},
		{"unknown node ignored", func(s *Snapshot) {
			s.Reserve("g1", Placement{{PodSet: "w", Node: "gone", Count: 1, Requests: req}})
		}, freeGPU{"a": 8, "b": 8}},
		{"usage and reservation add up", func(s *Snapshot) {
			s.AddUsage("a", rl("nvidia.com/gpu", "2"))
			s.Reserve("g1", p2)
			s.AddUsage("b", rl("nvidia.com/gpu", "1"))
		}, freeGPU{"a": 6, "b": 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSnapshot(nodes)
			tc.do(s)
			if d := cmp.Diff(tc.want, gpus(s)); d != "" {
				t.Errorf("free GPUs (-want +got):\n%s", d)
			}
		})
	}
}

func TestReserveCountsEveryResource(t *testing.T) {
	s := NewSnapshot([]Node{gpuNode("a", 8, h100)})
	before, _ := s.NodeFree("a")
	p := Placement{{PodSet: "w", Node: "a", Count: 2, Requests: rl("cpu", "1500m", "memory", "10Gi", "nvidia.com/gpu", "3")}}
	s.Reserve("g", p)
	got, _ := s.NodeFree("a")
	want := rl("cpu", "61", "memory", "492Gi", "pods", "108", "nvidia.com/gpu", "2")
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("free after reserve (-want +got):\n%s", d)
	}
	if r, ok := s.Reservation("g"); !ok || cmp.Diff(p, r) != "" {
		t.Errorf("Reservation(g) = %v, %v; want %v", r, ok, p)
	}
	s.Release("g")
	after, _ := s.NodeFree("a")
	if d := cmp.Diff(before, after); d != "" {
		t.Errorf("free after release (-before +after):\n%s", d)
	}
	if _, ok := s.Reservation("g"); ok {
		t.Errorf("reservation g still there after release")
	}
}

func TestAddUsage(t *testing.T) {
	s := NewSnapshot([]Node{
		readyNode("a", rl("cpu", "8", "memory", "16Gi", "pods", "10")),
		readyNode("b", rl("cpu", "8", "example.com/fpga", "1")),
	})
	if !s.AddUsage("a", rl("cpu", "250m", "memory", "1Gi")) {
		t.Fatal("AddUsage(a) = false")
	}
	// A resource that node a lacks (but b has) goes below 0 on a; one no node has is ignored.
	s.AddUsage("a", rl("cpu", "1", "example.com/fpga", "1", "example.com/none", "3"))
	if s.AddUsage("gone", rl("cpu", "1")) {
		t.Error("AddUsage(gone) = true for an unknown node")
	}
	got, _ := s.NodeFree("a")
	want := rl("cpu", "6750m", "memory", "15Gi", "pods", "8", "example.com/fpga", "-1")
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("free on a (-want +got):\n%s", d)
	}
	got, _ = s.NodeFree("b")
	want = rl("cpu", "8", "memory", "0", "example.com/fpga", "1") // no pods allocatable: not shown
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("free on b (-want +got):\n%s", d)
	}
	if _, ok := s.NodeFree("gone"); ok {
		t.Error("NodeFree(gone) ok for an unknown node")
	}
}

func TestDuplicateNodeKeepsFirst(t *testing.T) {
	s := NewSnapshot([]Node{gpuNode("a", 8, h100), gpuNode("a", 4, h100)})
	if got := freeOf(t, s, "a", gpu); got != 8 {
		t.Errorf("free GPUs on a = %d, want 8", got)
	}
	if got := s.Summary().Nodes; got != 1 {
		t.Errorf("Summary().Nodes = %d, want 1", got)
	}
}

func TestSummary(t *testing.T) {
	notReady := gpuNode("d", 8, h100)
	notReady.Ready = false
	plain := readyNode("e", rl("cpu", "16", "memory", "64Gi"))
	s := NewSnapshot([]Node{gpuNode("a", 8, h100), gpuNode("b", 8, h100), gpuNode("c", 4, a100), notReady, plain})
	s.AddUsage("a", rl("cpu", "10", "nvidia.com/gpu", "6"))
	s.Reserve("g", Placement{{PodSet: "w", Node: "b", Count: 1, Requests: rl("cpu", "2", "nvidia.com/gpu", "3")}})
	s.AddUsage("c", rl("nvidia.com/gpu", "5")) // overcommitted: counts as 0 free, not -1
	s.AddUsage("e", rl("memory", "4Gi"))

	want := Summary{
		Nodes:      5,
		ReadyNodes: 4,
		Resources: []ResourceCapacity{
			{Name: "cpu", Allocatable: q("208"), Free: q("196"), LargestFreeOnNode: q("64"), LargestFreeNode: "c"},
			{Name: "memory", Allocatable: q("1600Gi"), Free: q("1596Gi"), LargestFreeOnNode: q("512Gi"), LargestFreeNode: "a"},
			{Name: "nvidia.com/gpu", Allocatable: q("20"), Free: q("7"), LargestFreeOnNode: q("5"), LargestFreeNode: "b"},
			// e declares no pods allocatable
			{Name: "pods", Allocatable: q("330"), Free: q("327"), LargestFreeOnNode: q("109"), LargestFreeNode: "a"},
		},
		GPUProducts: []GPUProductCapacity{
			{Product: a100, Nodes: 1, Allocatable: 4, Free: 0, LargestFreeOnNode: 0, LargestFreeNode: "c",
				LargestAllocatableOnNode: 4, Shapes: shapes(0, 0, 0, 0)},
			// 2 free on a and 5 on b: seven 1-GPU pods, 1+2 of 2 GPUs, one of 4.
			{Product: h100, Nodes: 2, Allocatable: 16, Free: 7, LargestFreeOnNode: 5, LargestFreeNode: "b",
				LargestAllocatableOnNode: 8, Shapes: shapes(7, 3, 1, 0)},
		},
	}
	if d := cmp.Diff(want, s.Summary()); d != "" {
		t.Errorf("summary (-want +got):\n%s", d)
	}
}

func TestSummaryGPUShapes(t *testing.T) {
	withPods := func(n Node, pods string) Node {
		n.Allocatable = n.Allocatable.DeepCopy()
		n.Allocatable[corev1.ResourcePods] = resource.MustParse(pods)
		return n
	}
	noPods := func(n Node) Node {
		n.Allocatable = n.Allocatable.DeepCopy()
		delete(n.Allocatable, corev1.ResourcePods)
		return n
	}
	gpus := func(n string) corev1.ResourceList { return rl("nvidia.com/gpu", n) }
	notReady := gpuNode("x", 8, h100)
	notReady.Ready = false
	cases := []struct {
		name  string
		nodes []Node
		usage map[string][]corev1.ResourceList
		want  map[string][]ShapeCount // product -> shapes
	}{{
		name:  "one free 8-GPU node",
		nodes: []Node{gpuNode("a", 8, h100)},
		want:  map[string][]ShapeCount{h100: shapes(8, 4, 2, 1)},
	}, {
		name:  "4 free on each of two nodes hold no 8-GPU pod",
		nodes: []Node{gpuNode("a", 8, h100), gpuNode("b", 8, h100)},
		usage: map[string][]corev1.ResourceList{"a": {gpus("4")}, "b": {gpus("4")}},
		want:  map[string][]ShapeCount{h100: shapes(8, 4, 2, 0)},
	}, {
		name:  "odd holes round down per node",
		nodes: []Node{gpuNode("a", 8, h100), gpuNode("b", 8, h100)},
		usage: map[string][]corev1.ResourceList{"a": {gpus("5")}, "b": {gpus("1")}},
		// 3 and 7 free: 1+3 of 2 GPUs, 0+1 of 4.
		want: map[string][]ShapeCount{h100: shapes(10, 4, 1, 0)},
	}, {
		name:  "pods allocatable caps the pods of a node",
		nodes: []Node{withPods(gpuNode("a", 8, h100), "3")},
		want:  map[string][]ShapeCount{h100: shapes(3, 3, 2, 1)},
	}, {
		name:  "pods already bound take pod slots",
		nodes: []Node{withPods(gpuNode("a", 8, h100), "3")},
		usage: map[string][]corev1.ResourceList{"a": {rl("cpu", "1"), rl("cpu", "1")}},
		want:  map[string][]ShapeCount{h100: shapes(1, 1, 1, 1)},
	}, {
		name:  "no pod slot left",
		nodes: []Node{withPods(gpuNode("a", 8, h100), "1")},
		usage: map[string][]corev1.ResourceList{"a": {rl("cpu", "1")}},
		want:  map[string][]ShapeCount{h100: shapes(0, 0, 0, 0)},
	}, {
		name:  "a node that declares no pods allocatable is not capped",
		nodes: []Node{noPods(gpuNode("a", 8, h100))},
		want:  map[string][]ShapeCount{h100: shapes(8, 4, 2, 1)},
	}, {
		name: "per product; not Ready, overcommitted and unlabelled nodes hold none",
		nodes: []Node{gpuNode("a", 8, a100), gpuNode("b", 4, a100), gpuNode("h", 8, h100), notReady,
			gpuNode("over", 2, h100), gpuNode("plain", 8, "")},
		usage: map[string][]corev1.ResourceList{"over": {gpus("3")}},
		want:  map[string][]ShapeCount{a100: shapes(12, 6, 3, 1), h100: shapes(8, 4, 2, 1)},
	}, {
		name:  "CPU and memory are not considered",
		nodes: []Node{gpuNode("b", 8, h100)},
		usage: map[string][]corev1.ResourceList{"b": {rl("cpu", "64", "memory", "512Gi")}},
		want:  map[string][]ShapeCount{h100: shapes(8, 4, 2, 1)},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string][]ShapeCount{}
			for _, p := range snapshot(tc.nodes, tc.usage).Summary().GPUProducts {
				got[p.Product] = p.Shapes
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("shapes per product (-want +got):\n%s", d)
			}
		})
	}
}

func q(s string) resource.Quantity { return resource.MustParse(s) }

// shapes is the Shapes of a GPUProductCapacity: how many pods of 1, 2, 4 and 8 GPUs fit.
func shapes(one, two, four, eight int32) []ShapeCount {
	return []ShapeCount{{GPUs: 1, Pods: one}, {GPUs: 2, Pods: two}, {GPUs: 4, Pods: four}, {GPUs: 8, Pods: eight}}
}

func TestNodeFromCore(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{GPUProductLabel: h100}},
		Spec: corev1.NodeSpec{
			Unschedulable: true,
			Taints:        []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Allocatable: rl("cpu", "8"),
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
			},
		},
	}
	want := Node{Name: "a", Labels: map[string]string{GPUProductLabel: h100},
		Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}},
		Ready:  true, Unschedulable: true, Allocatable: rl("cpu", "8")}
	if d := cmp.Diff(want, NodeFromCore(n)); d != "" {
		t.Errorf("NodeFromCore (-want +got):\n%s", d)
	}
	n.Status.Conditions[1].Status = corev1.ConditionUnknown
	if NodeFromCore(n).Ready {
		t.Error("Ready with condition Unknown")
	}
	n.Status.Conditions = nil
	if NodeFromCore(n).Ready {
		t.Error("Ready without conditions")
	}
}

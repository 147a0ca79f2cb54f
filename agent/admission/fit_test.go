package admission

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

type fitCase struct {
	name      string
	nodes     []Node
	usage     map[string][]corev1.ResourceList
	gang      Gang
	want      Placement
	wantUnfit *Unfit
}

// runFitCases fits each case's gang and compares placement and explanation; it also checks that Fit
// leaves the snapshot's free capacity as it found it.
func runFitCases(t *testing.T, cases []fitCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := snapshot(tc.nodes, tc.usage)
			before := allFree(s)
			got, unfit := s.Fit(tc.gang)
			if d := cmp.Diff(tc.want, got, ignoreRequests); d != "" {
				t.Errorf("placement (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantUnfit, unfit); d != "" {
				t.Errorf("unfit (-want +got):\n%s", d)
			}
			diffFree(t, before, allFree(s))
		})
	}
}

func TestFitFragmentation(t *testing.T) {
	halfUsed := map[string][]corev1.ResourceList{
		"a": {rl("nvidia.com/gpu", "4")},
		"b": {rl("nvidia.com/gpu", "4")},
	}
	two := []Node{gpuNode("a", 8, h100), gpuNode("b", 8, h100)}
	runFitCases(t, []fitCase{{
		name:  "one 8-GPU pod does not fit two nodes with 4 free each",
		nodes: two, usage: halfUsed,
		gang: gang("g", gpuPods("w", 1, 8)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w", Resource: gpu,
			Message: `pod set "w" needs 1 pod x 8 nvidia.com/gpu on one node; 0 fit now; largest free on one eligible node: 4 (a)`},
	}, {
		name:  "one 8-GPU pod goes to a whole free node elsewhere",
		nodes: append(two, gpuNode("c", 8, h100)), usage: halfUsed,
		gang: gang("g", gpuPods("w", 1, 8)),
		want: Placement{at("w", "c", 1)},
	}, {
		name:  "two 4-GPU pods fit two nodes with 4 free each",
		nodes: two, usage: halfUsed,
		gang: gang("g", gpuPods("w", 2, 4)),
		want: Placement{at("w", "a", 1), at("w", "b", 1)},
	}, {
		name:  "best fit: a small pod goes to the fuller node",
		nodes: two, usage: map[string][]corev1.ResourceList{"b": {rl("nvidia.com/gpu", "4")}},
		gang: gang("g", gpuPods("w", 1, 4)),
		want: Placement{at("w", "b", 1)},
	}, {
		name:  "best fit: fills one node before opening the next",
		nodes: []Node{gpuNode("a", 8, h100), gpuNode("b", 8, h100), gpuNode("c", 8, h100)},
		gang:  gang("g", gpuPods("w", 4, 2)),
		want:  Placement{at("w", "a", 4)},
	}, {
		name:  "best fit: leaves the whole node free for a later 8-GPU pod",
		nodes: []Node{gpuNode("a", 8, h100), gpuNode("b", 8, h100)},
		usage: map[string][]corev1.ResourceList{"b": {rl("nvidia.com/gpu", "2")}},
		gang:  gang("g", gpuPods("w", 3, 2)),
		want:  Placement{at("w", "b", 3)},
	}})
}

func TestFitGangAllOrNothing(t *testing.T) {
	three := []Node{gpuNode("a", 8, h100), gpuNode("b", 8, h100), gpuNode("c", 8, h100)}
	runFitCases(t, []fitCase{{
		name:  "3 pods x 8 GPU with 2 free nodes",
		nodes: three,
		usage: map[string][]corev1.ResourceList{"c": {rl("nvidia.com/gpu", "8")}},
		gang:  gang("g", gpuPods("w", 3, 8)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w", Resource: gpu,
			Message: `pod set "w" needs 3 pods x 8 nvidia.com/gpu on one node each; 2 fit now; largest free on one eligible node: 8 (a)`},
	}, {
		name:  "3 pods x 8 GPU with 3 free nodes",
		nodes: three,
		gang:  gang("g", gpuPods("w", 3, 8)),
		want:  Placement{at("w", "a", 1), at("w", "b", 1), at("w", "c", 1)},
	}, {
		name:  "3 pods x 8 GPU on a cluster of 2 nodes never fits",
		nodes: three[:2],
		gang:  gang("g", gpuPods("w", 3, 8)),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "w", Resource: gpu,
			Message: `pod set "w" needs 3 pods x 8 nvidia.com/gpu on one node each; even with all 2 eligible nodes empty only 2 fit`},
	}, {
		name:  "second pod set does not fit: nothing of the first is kept",
		nodes: three,
		usage: map[string][]corev1.ResourceList{"c": {rl("nvidia.com/gpu", "8")}},
		gang:  gang("g", gpuPods("workers", 2, 8), PodSet{Name: "launcher", Count: 1, Requests: rl("cpu", "1", "nvidia.com/gpu", "1")}),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "launcher", Resource: gpu,
			Message: `pod set "launcher" needs 1 pod x 1 nvidia.com/gpu on one node; 0 fit now (it fits alone, but not beside pod set(s) "workers" of the same gang); largest free on one eligible node: 8 (a)`},
	}, {
		name:  "several pod sets placed together",
		nodes: three,
		gang:  gang("g", PodSet{Name: "launcher", Count: 1, Requests: rl("cpu", "1")}, gpuPods("workers", 2, 8)),
		// Best fit puts the launcher beside a worker rather than on the empty node.
		want: Placement{at("launcher", "a", 1), at("workers", "a", 1), at("workers", "b", 1)},
	}, {
		name:  "empty gang fits with no placement",
		nodes: three,
		gang:  gang("g"),
	}, {
		name:  "pod set of no pods is left out",
		nodes: three,
		gang:  gang("g", gpuPods("none", 0, 8), gpuPods("w", 1, 8)),
		want:  Placement{at("w", "a", 1)},
	}})
}

func TestFitLargestPodSetFirst(t *testing.T) {
	// Placed first by best fit, the small pod would take node a's cpu and leave the big pod no room.
	nodes := []Node{
		readyNode("a", rl("cpu", "64", "nvidia.com/gpu", "8")),
		readyNode("b", rl("cpu", "70")),
	}
	runFitCases(t, []fitCase{{
		name:  "big pod set placed first although listed last",
		nodes: nodes,
		gang: gang("g",
			PodSet{Name: "small", Count: 1, Requests: rl("cpu", "4")},
			PodSet{Name: "big", Count: 1, Requests: rl("cpu", "62", "nvidia.com/gpu", "8")}),
		want: Placement{at("small", "b", 1), at("big", "a", 1)},
	}})
}

func TestFitGPUProduct(t *testing.T) {
	nodes := []Node{gpuNode("a", 8, a100), gpuNode("b", 8, h100), gpuNode("c", 8, h100)}
	usage := map[string][]corev1.ResourceList{"b": {rl("nvidia.com/gpu", "4")}}
	onProduct := func(p string) PodSet {
		ps := gpuPods("w", 2, 4)
		ps.NodeSelector = map[string]string{GPUProductLabel: p}
		return ps
	}
	runFitCases(t, []fitCase{{
		name:  "H100 only",
		nodes: nodes, usage: usage,
		gang: gang("g", onProduct(h100)),
		want: Placement{at("w", "b", 1), at("w", "c", 1)},
	}, {
		name:  "A100 only",
		nodes: nodes, usage: usage,
		gang: gang("g", onProduct(a100)),
		want: Placement{at("w", "a", 2)},
	}, {
		name:  "any product",
		nodes: nodes, usage: usage,
		gang: gang("g", gpuPods("w", 2, 4)),
		want: Placement{at("w", "a", 1), at("w", "b", 1)},
	}, {
		name:  "product absent from the cluster",
		nodes: nodes, usage: usage,
		gang: gang("g", onProduct("NVIDIA-B200")),
		wantUnfit: &Unfit{Reason: NoEligibleNode, PodSet: "w",
			Message: `pod set "w" has no eligible node among 3: 3 not matching the nodeSelector (no Ready schedulable node has nvidia.com/gpu.product=NVIDIA-B200)`},
	}, {
		name:  "too few GPUs of the product",
		nodes: nodes, usage: usage,
		gang: gang("g", func() PodSet { ps := onProduct(a100); ps.Count = 3; return ps }()),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "w", Resource: gpu,
			Message: `pod set "w" needs 3 pods x 4 nvidia.com/gpu on one node each; even with all 1 eligible nodes empty only 2 fit`},
	}})
}

func TestFitMIG(t *testing.T) {
	migNode := func(name string) Node {
		n := readyNode(name, rl("cpu", "32", "memory", "256Gi", "nvidia.com/mig-1g.10gb", "7", "nvidia.com/gpu", "0"))
		n.Labels = map[string]string{GPUProductLabel: "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"}
		return n
	}
	migPods := func(count int32) PodSet {
		return PodSet{Name: "m", Count: count, Requests: rl("cpu", "1", "memory", "8Gi", "nvidia.com/mig-1g.10gb", "1")}
	}
	usage := map[string][]corev1.ResourceList{"b": {rl("nvidia.com/mig-1g.10gb", "4")}}
	runFitCases(t, []fitCase{{
		name:  "8 MIG slices over two nodes, fuller node first",
		nodes: []Node{migNode("a"), migNode("b")}, usage: usage,
		gang: gang("g", migPods(8)),
		want: Placement{at("m", "a", 5), at("m", "b", 3)},
	}, {
		name:  "11 MIG slices do not fit 10 free",
		nodes: []Node{migNode("a"), migNode("b")}, usage: usage,
		gang: gang("g", migPods(11)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "m", Resource: mig,
			Message: `pod set "m" needs 11 pods x 1 nvidia.com/mig-1g.10gb on one node each; 10 fit now; largest free on one eligible node: 7 (a)`},
	}, {
		name:  "MIG slice on full-GPU nodes never fits",
		nodes: []Node{gpuNode("a", 8, a100), migNode("b")},
		gang: gang("g", func() PodSet {
			ps := migPods(1)
			ps.NodeSelector = map[string]string{GPUProductLabel: a100}
			return ps
		}()),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "m", Resource: mig,
			Message: `pod set "m" needs 1 pod x 1 nvidia.com/mig-1g.10gb on one node; no eligible node has that much allocatable; largest on one eligible node: 0 (a)`},
	}, {
		name:  "full GPU on MIG nodes never fits",
		nodes: []Node{migNode("a"), migNode("b")},
		gang:  gang("g", gpuPods("w", 1, 1)),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "w", Resource: gpu,
			Message: `pod set "w" needs 1 pod x 1 nvidia.com/gpu on one node; no eligible node has that much allocatable; largest on one eligible node: 0 (a)`},
	}})
}

func TestFitTaints(t *testing.T) {
	tainted := func(name string, taints ...corev1.Taint) Node {
		n := gpuNode(name, 8, h100)
		n.Taints = taints
		return n
	}
	noSchedule := corev1.Taint{Key: "dedicated", Value: "training", Effect: corev1.TaintEffectNoSchedule}
	noExecute := corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}
	prefer := corev1.Taint{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}
	tolerating := func(tols ...corev1.Toleration) PodSet {
		ps := gpuPods("w", 1, 8)
		ps.Tolerations = tols
		return ps
	}
	runFitCases(t, []fitCase{{
		name:  "untolerated NoSchedule node skipped, PreferNoSchedule node used",
		nodes: []Node{tainted("a", noSchedule), tainted("b", prefer)},
		gang:  gang("g", tolerating()),
		want:  Placement{at("w", "b", 1)},
	}, {
		name:  "Equal toleration",
		nodes: []Node{tainted("a", noSchedule), tainted("b", prefer)},
		gang: gang("g", tolerating(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual,
			Value: "training", Effect: corev1.TaintEffectNoSchedule})),
		want: Placement{at("w", "a", 1)},
	}, {
		name:  "Equal toleration with another value does not tolerate",
		nodes: []Node{tainted("a", noSchedule)},
		gang: gang("g", tolerating(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual,
			Value: "inference", Effect: corev1.TaintEffectNoSchedule})),
		wantUnfit: &Unfit{Reason: NoEligibleNode, PodSet: "w",
			Message: `pod set "w" has no eligible node among 1: 1 with an untolerated taint (e.g. dedicated=training:NoSchedule on a)`},
	}, {
		name:  "Exists toleration of every effect",
		nodes: []Node{tainted("a", noSchedule, noExecute)},
		gang:  gang("g", tolerating(corev1.Toleration{Operator: corev1.TolerationOpExists})),
		want:  Placement{at("w", "a", 1)},
	}, {
		name:  "NoExecute must be tolerated too",
		nodes: []Node{tainted("a", noSchedule, noExecute)},
		gang: gang("g", tolerating(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoSchedule})),
		wantUnfit: &Unfit{Reason: NoEligibleNode, PodSet: "w",
			Message: `pod set "w" has no eligible node among 1: 1 with an untolerated taint (e.g. maintenance:NoExecute on a)`},
	}, {
		name:  "toleration for the wrong effect",
		nodes: []Node{tainted("a", noExecute)},
		gang: gang("g", tolerating(corev1.Toleration{Key: "maintenance", Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoSchedule})),
		wantUnfit: &Unfit{Reason: NoEligibleNode, PodSet: "w",
			Message: `pod set "w" has no eligible node among 1: 1 with an untolerated taint (e.g. maintenance:NoExecute on a)`},
	}, {
		name:  "only PreferNoSchedule",
		nodes: []Node{tainted("a", prefer)},
		gang:  gang("g", tolerating()),
		want:  Placement{at("w", "a", 1)},
	}})
}

func TestFitNodeReadiness(t *testing.T) {
	notReady := gpuNode("a", 8, h100)
	notReady.Ready = false
	cordoned := gpuNode("b", 8, h100)
	cordoned.Unschedulable = true
	runFitCases(t, []fitCase{{
		name:  "only the Ready schedulable node is used",
		nodes: []Node{notReady, cordoned, gpuNode("c", 8, h100)},
		gang:  gang("g", gpuPods("w", 1, 8)),
		want:  Placement{at("w", "c", 1)},
	}, {
		name:  "no Ready schedulable node: it waits for them to be back",
		nodes: []Node{notReady, cordoned},
		gang:  gang("g", gpuPods("w", 1, 8)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w",
			Message: `the gang would fit once these nodes are back: a (not Ready); as the cluster is now: ` +
				`pod set "w" has no eligible node among 2: 1 not Ready, 1 unschedulable (cordoned)`},
	}, {
		name: "empty cluster",
		gang: gang("g", gpuPods("w", 1, 8)),
		wantUnfit: &Unfit{Reason: NoEligibleNode, PodSet: "w",
			Message: `pod set "w" has no eligible node: the cluster has no nodes`},
	}})
}

func TestFitRequiredAffinity(t *testing.T) {
	labelled := func(name, zone, gen string) Node {
		n := gpuNode(name, 8, h100)
		n.Labels = map[string]string{"zone": zone, "gen": gen}
		if zone == "" {
			delete(n.Labels, "zone")
		}
		return n
	}
	nodes := []Node{labelled("a", "z1", "3"), labelled("b", "z2", "5"), labelled("c", "", "7")}
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	with := func(terms ...corev1.NodeSelectorTerm) Gang {
		ps := gpuPods("w", 1, 8)
		ps.RequiredAffinity = &corev1.NodeSelector{NodeSelectorTerms: terms}
		return gang("g", ps)
	}
	expr := func(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: reqs}
	}
	cases := []struct {
		name string
		gang Gang
		want string // node, or "" for no eligible node
	}{
		{"In", with(expr(req("zone", corev1.NodeSelectorOpIn, "z2", "z9"))), "b"},
		{"NotIn", with(expr(req("zone", corev1.NodeSelectorOpNotIn, "z1"))), "b"},
		{"Exists", with(expr(req("zone", corev1.NodeSelectorOpExists))), "a"},
		{"DoesNotExist", with(expr(req("zone", corev1.NodeSelectorOpDoesNotExist))), "c"},
		{"Gt", with(expr(req("gen", corev1.NodeSelectorOpGt, "5"))), "c"},
		{"Lt", with(expr(req("gen", corev1.NodeSelectorOpLt, "5"))), "a"},
		{"expressions of a term are ANDed", with(expr(req("gen", corev1.NodeSelectorOpGt, "3"), req("zone", corev1.NodeSelectorOpExists))), "b"},
		{"terms are ORed", with(expr(req("zone", corev1.NodeSelectorOpIn, "z9")), expr(req("gen", corev1.NodeSelectorOpIn, "7"))), "c"},
		{"matchFields metadata.name", with(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "b")}}), "b"},
		{"empty term matches nothing", with(corev1.NodeSelectorTerm{}), ""},
		{"no term matches", with(expr(req("zone", corev1.NodeSelectorOpIn, "z9"))), ""},
		{"invalid term matches nothing", with(expr(req("gen", corev1.NodeSelectorOpGt, "x"))), ""},
		{"invalid term beside a valid one", with(expr(req("gen", corev1.NodeSelectorOpGt, "x")), expr(req("zone", corev1.NodeSelectorOpIn, "z1"))), "a"},
	}
	var fc []fitCase
	for _, c := range cases {
		f := fitCase{name: c.name, nodes: nodes, gang: c.gang}
		if c.want != "" {
			f.want = Placement{at("w", c.want, 1)}
		} else {
			f.wantUnfit = &Unfit{Reason: NoEligibleNode, PodSet: "w",
				Message: `pod set "w" has no eligible node among 3: 3 not matching the required node affinity`}
		}
		fc = append(fc, f)
	}
	runFitCases(t, fc)
}

func TestFitResourceAbsentFromNode(t *testing.T) {
	nodes := []Node{
		readyNode("a", rl("cpu", "16", "memory", "64Gi")),
		readyNode("b", rl("cpu", "16", "memory", "64Gi", "example.com/fpga", "2")),
	}
	fpga := func(count int32, q string) Gang {
		return gang("g", PodSet{Name: "f", Count: count, Requests: rl("cpu", "1", "example.com/fpga", q)})
	}
	runFitCases(t, []fitCase{{
		name:  "only the node with the resource",
		nodes: nodes,
		gang:  fpga(2, "1"),
		want:  Placement{at("f", "b", 2)},
	}, {
		name:  "absent means 0",
		nodes: nodes,
		gang:  fpga(3, "1"),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "f", Resource: "example.com/fpga",
			Message: `pod set "f" needs 3 pods x 1 example.com/fpga on one node each; even with all 2 eligible nodes empty only 2 fit`},
	}, {
		name:  "resource no node offers",
		nodes: nodes,
		gang:  gang("g", PodSet{Name: "x", Count: 1, Requests: rl("cpu", "1", "example.com/quantum", "1")}),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "x", Resource: "example.com/quantum",
			Message: `pod set "x" needs 1 example.com/quantum per pod, but no node in the cluster offers example.com/quantum`},
	}, {
		name:  "zero request of a resource no node offers",
		nodes: nodes,
		gang:  gang("g", PodSet{Name: "x", Count: 1, Requests: rl("cpu", "1", "example.com/quantum", "0")}),
		want:  Placement{at("x", "a", 1)},
	}, {
		name:  "ephemeral-storage counts",
		nodes: []Node{readyNode("a", rl("cpu", "16", "ephemeral-storage", "100Gi")), readyNode("b", rl("cpu", "16", "ephemeral-storage", "500Gi"))},
		usage: map[string][]corev1.ResourceList{"a": {rl("ephemeral-storage", "50Gi")}},
		gang:  gang("g", PodSet{Name: "s", Count: 1, Requests: rl("cpu", "1", "ephemeral-storage", "80Gi")}),
		want:  Placement{at("s", "b", 1)},
	}, {
		name:  "memory is the blocker",
		nodes: []Node{readyNode("a", rl("cpu", "16", "memory", "64Gi")), readyNode("b", rl("cpu", "16", "memory", "64Gi"))},
		usage: map[string][]corev1.ResourceList{"a": {rl("memory", "40Gi")}, "b": {rl("memory", "32Gi")}},
		gang:  gang("g", PodSet{Name: "m", Count: 1, Requests: rl("cpu", "1", "memory", "48Gi")}),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "m", Resource: "memory",
			Message: `pod set "m" needs 1 pod x 48Gi memory on one node; 0 fit now; largest free on one eligible node: 32Gi (b)`},
	}, {
		name:  "cpu in millicores",
		nodes: []Node{readyNode("a", rl("cpu", "2"))},
		usage: map[string][]corev1.ResourceList{"a": {rl("cpu", "1600m")}},
		gang:  gang("g", PodSet{Name: "c", Count: 2, Requests: rl("cpu", "250m")}),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "c", Resource: "cpu",
			Message: `pod set "c" needs 2 pods x 250m cpu on one node each; 1 fit now; largest free on one eligible node: 400m (a)`},
	}})
}

func TestFitPodsAllocatable(t *testing.T) {
	nodes := []Node{
		readyNode("a", rl("cpu", "64", "pods", "2")),
		readyNode("b", rl("cpu", "64", "pods", "110")),
		readyNode("c", rl("cpu", "64")), // no pods allocatable: no limit
	}
	small := func(count int32) Gang {
		return gang("g", PodSet{Name: "p", Count: count, Requests: rl("cpu", "100m")})
	}
	runFitCases(t, []fitCase{{
		name:  "node a holds 2 pods",
		nodes: nodes[:2],
		gang:  small(3),
		want:  Placement{at("p", "a", 2), at("p", "b", 1)},
	}, {
		name:  "bound pods take pod slots",
		nodes: nodes[:2],
		usage: map[string][]corev1.ResourceList{"a": {rl("cpu", "1"), rl("cpu", "1")}},
		gang:  small(1),
		want:  Placement{at("p", "b", 1)},
	}, {
		name:  "no pod slot left",
		nodes: nodes[:1],
		usage: map[string][]corev1.ResourceList{"a": {rl("cpu", "1"), rl("cpu", "1")}},
		gang:  small(1),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "p", Resource: "pods",
			Message: `pod set "p" needs 1 pod; 0 fit now; most free pod slots on one eligible node: 0 (a)`},
	}, {
		name:  "node without pods allocatable takes many pods",
		nodes: nodes[2:],
		gang:  small(600),
		want:  Placement{at("p", "c", 600)},
	}, {
		name:  "pods request in Requests is ignored",
		nodes: nodes[:1],
		gang:  gang("g", PodSet{Name: "p", Count: 2, Requests: rl("cpu", "100m", "pods", "5")}),
		want:  Placement{at("p", "a", 2)},
	}})
}

func TestFitNeverFitsOnePod(t *testing.T) {
	nodes := []Node{
		readyNode("a", rl("cpu", "16", "nvidia.com/gpu", "8")),
		readyNode("b", rl("cpu", "64", "nvidia.com/gpu", "4")),
	}
	runFitCases(t, []fitCase{{
		name:  "each node lacks something else",
		nodes: nodes,
		gang:  gang("g", PodSet{Name: "w", Count: 1, Requests: rl("cpu", "32", "nvidia.com/gpu", "8")}),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "w", Resource: gpu,
			Message: `pod set "w": no eligible node could hold one pod (8 nvidia.com/gpu, 32 cpu) even if empty; of 2 eligible nodes too small: nvidia.com/gpu on 1, cpu on 1`},
	}, {
		name:  "more GPUs than any node",
		nodes: nodes,
		gang:  gang("g", PodSet{Name: "w", Count: 2, Requests: rl("nvidia.com/gpu", "16")}),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "w", Resource: gpu,
			Message: `pod set "w" needs 2 pods x 16 nvidia.com/gpu on one node each; no eligible node has that much allocatable; largest on one eligible node: 8 (a)`},
	}, {
		name:  "node allows no pods",
		nodes: []Node{readyNode("a", rl("cpu", "16", "pods", "0"))},
		gang:  gang("g", PodSet{Name: "w", Count: 1, Requests: rl("cpu", "1")}),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "w", Resource: "pods",
			Message: `pod set "w": no eligible node allows any pod (pods allocatable 0 on all 1)`},
	}})
}

func TestFitInvalidGang(t *testing.T) {
	nodes := []Node{gpuNode("a", 8, h100)}
	runFitCases(t, []fitCase{{
		name:  "duplicate pod set names",
		nodes: nodes,
		gang:  gang("g", gpuPods("w", 1, 1), gpuPods("w", 1, 1)),
		wantUnfit: &Unfit{Reason: InvalidGang, PodSet: "w",
			Message: `gang "g" has two pod sets named "w"`},
	}, {
		name:  "negative count",
		nodes: nodes,
		gang:  gang("g", gpuPods("w", -1, 1)),
		wantUnfit: &Unfit{Reason: InvalidGang, PodSet: "w",
			Message: `pod set "w" has a negative count -1`},
	}, {
		name:  "empty GPU product",
		nodes: nodes,
		gang:  gang("g", preferring(gpuPods("w", 1, 1), h100, "")),
		wantUnfit: &Unfit{Reason: InvalidGang, PodSet: "w",
			Message: `pod set "w" lists an empty GPU product`},
	}, {
		name:  "repeated GPU product",
		nodes: nodes,
		gang:  gang("g", preferring(gpuPods("w", 1, 1), h100, a100, h100)),
		wantUnfit: &Unfit{Reason: InvalidGang, PodSet: "w",
			Message: `pod set "w" lists GPU product NVIDIA-H100-80GB-HBM3 twice`},
	}, {
		name:  "GPU products of a pod set of no pods are checked too",
		nodes: nodes,
		gang:  gang("g", preferring(gpuPods("w", 0, 1), a100, a100)),
		wantUnfit: &Unfit{Reason: InvalidGang, PodSet: "w",
			Message: `pod set "w" lists GPU product NVIDIA-A100-SXM4-80GB twice`},
	}, {
		name:  "negative request",
		nodes: nodes,
		gang:  gang("g", PodSet{Name: "w", Count: 1, Requests: rl("cpu", "-1")}),
		wantUnfit: &Unfit{Reason: InvalidGang, PodSet: "w", Resource: "cpu",
			Message: `pod set "w" requests a negative amount of cpu: -1`},
	}})
}

func TestFitPlacementCarriesRequests(t *testing.T) {
	s := NewSnapshot([]Node{gpuNode("a", 8, h100), gpuNode("b", 8, h100)})
	ps := gpuPods("w", 2, 8)
	got, unfit := s.Fit(gang("g", ps))
	if unfit != nil {
		t.Fatalf("unfit: %v", unfit)
	}
	want := Placement{
		{PodSet: "w", Node: "a", Count: 1, Requests: rl("cpu", "4", "memory", "32Gi", "nvidia.com/gpu", "8")},
		{PodSet: "w", Node: "b", Count: 1, Requests: rl("cpu", "4", "memory", "32Gi", "nvidia.com/gpu", "8")},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("placement (-want +got):\n%s", d)
	}
	// The placement holds a copy: changing the gang afterwards does not change it.
	ps.Requests[gpu] = rl("x", "1")["x"]
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("placement changed with the gang (-want +got):\n%s", d)
	}
	if n := got.Pods("w"); n != 2 {
		t.Errorf("Pods(w) = %d, want 2", n)
	}
}

func TestFitIsDeterministic(t *testing.T) {
	var nodes []Node
	for _, name := range []string{"n3", "n1", "n4", "n0", "n2"} {
		nodes = append(nodes, gpuNode(name, 8, h100))
	}
	want := Placement{at("w", "n0", 2), at("w", "n1", 2), at("w", "n2", 1)}
	for i := range 20 {
		// Same nodes in another order: same placement.
		nodes[0], nodes[i%len(nodes)] = nodes[i%len(nodes)], nodes[0]
		got, unfit := NewSnapshot(nodes).Fit(gang("g", gpuPods("w", 5, 4)))
		if unfit != nil {
			t.Fatalf("unfit: %v", unfit)
		}
		if d := cmp.Diff(want, got, ignoreRequests); d != "" {
			t.Fatalf("run %d: placement (-want +got):\n%s", i, d)
		}
	}
}

func TestRankerBestKeepsTheBest(t *testing.T) {
	// Ties on the score are broken by the free amount of the next demand, then by node.
	free := make([]int64, 0, 2*64)
	var cands []candidate
	for i := range 64 {
		free = append(free, 0, int64(i*7%5))
		cands = append(cands, candidate{score: int64(i * 13 % 6), node: int32(i), k: 1})
	}
	rk := ranker{free: free, w: 2, rest: []demand{{k: 1, r: 1}}}
	want := slices.Clone(cands)
	slices.SortFunc(want, rk.compare)
	for _, m := range []int{1, 2, 5, 17, 63} {
		got := rk.best(slices.Clone(cands), m)
		slices.SortFunc(got, rk.compare)
		if d := cmp.Diff(want[:m], got, cmp.AllowUnexported(candidate{})); d != "" {
			t.Errorf("best %d (-want +got):\n%s", m, d)
		}
	}
}

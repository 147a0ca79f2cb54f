package admission

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
)

const zoneLabel = "topology.kubernetes.io/zone"

// zoned is an 8-GPU node of product in zone ("" for no zone label).
func zoned(name, zone, product string) Node {
	n := gpuNode(name, 8, product)
	if zone != "" {
		n.Labels[zoneLabel] = zone
	}
	return n
}

// inZone is g with topology key zoneLabel.
func inZone(g Gang) Gang { return withTopology(g, zoneLabel) }

func withTopology(g Gang, key string) Gang {
	g.TopologyKey = key
	return g
}

// inDomain is an assignment in domain of a pod set that chose product (or none); compare with
// ignoreRequests.
func inDomain(podSet, node string, count int32, product, domain string) Assignment {
	return Assignment{PodSet: podSet, Node: node, Count: count, GPUProduct: product, Domain: domain}
}

func TestFitTopologyDomain(t *testing.T) {
	// Zones a and b hold two 8-GPU pods each, zone c four.
	abc := []Node{
		zoned("a1", "a", h100), zoned("a2", "a", h100),
		zoned("b1", "b", h100), zoned("b2", "b", h100),
		zoned("c1", "c", h100), zoned("c2", "c", h100), zoned("c3", "c", h100), zoned("c4", "c", h100),
	}
	// Zone east has more nodes than west, but is it fuller?
	east := []Node{zoned("e1", "east", h100), zoned("e2", "east", h100), zoned("e3", "east", h100)}
	west := []Node{zoned("w1", "west", h100), zoned("w2", "west", h100)}
	eastWest := append(append([]Node{}, east...), west...)
	runFitCases(t, []fitCase{{
		name:  "4 pods go to the one zone that holds all 4",
		nodes: abc,
		gang:  inZone(gang("g", gpuPods("w", 4, 8))),
		want: Placement{inDomain("w", "c1", 1, "", "c"), inDomain("w", "c2", 1, "", "c"),
			inDomain("w", "c3", 1, "", "c"), inDomain("w", "c4", 1, "", "c")},
	}, {
		name:  "without a topology key the same gang spreads over zones",
		nodes: abc[:4],
		gang:  gang("g", gpuPods("w", 4, 8)),
		want:  Placement{at("w", "a1", 1), at("w", "a2", 1), at("w", "b1", 1), at("w", "b2", 1)},
	}, {
		name:  "never split 2+2 over two zones",
		nodes: abc[:4],
		gang:  inZone(gang("g", gpuPods("w", 4, 8))),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "w", Resource: gpu,
			Message: `no topology.kubernetes.io/zone domain could hold the gang even with its nodes empty (2 with eligible nodes for every pod set); closest, a: pod set "w" needs 4 pods x 8 nvidia.com/gpu on one node each; even with all 2 eligible nodes empty only 2 fit`},
	}, {
		name:  "the zone that could hold it is half full",
		nodes: abc, usage: full("c1", "c2"),
		gang: inZone(gang("g", gpuPods("w", 4, 8))),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w", Resource: gpu,
			Message: `no topology.kubernetes.io/zone domain holds the whole gang now (3 tried); closest, c: pod set "w" needs 4 pods x 8 nvidia.com/gpu on one node each; 2 fit now; largest free on one eligible node: 8 (c3)`},
	}, {
		name:  "tightest zone first: west has less free than east",
		nodes: eastWest,
		usage: map[string][]corev1.ResourceList{"e1": {rl("nvidia.com/gpu", "4")}},
		gang:  inZone(gang("g", gpuPods("w", 1, 8))),
		want:  Placement{inDomain("w", "w1", 1, "", "west")},
	}, {
		name:  "tightest zone first: the bigger zone when it is fuller",
		nodes: eastWest, usage: full("e1", "e2"),
		gang: inZone(gang("g", gpuPods("w", 1, 8))),
		want: Placement{inDomain("w", "e3", 1, "", "east")},
	}, {
		name:  "tightest zone that fits: east is fuller but too full",
		nodes: eastWest, usage: full("e1", "e2"),
		gang: inZone(gang("g", gpuPods("w", 2, 8))),
		want: Placement{inDomain("w", "w1", 1, "", "west"), inDomain("w", "w2", 1, "", "west")},
	}, {
		name:  "equally tight zones: by value",
		nodes: abc[:4],
		gang:  inZone(gang("g", gpuPods("w", 2, 4))),
		want:  Placement{inDomain("w", "a1", 2, "", "a")},
	}, {
		name:  "every pod set of the gang in the one domain",
		nodes: eastWest,
		gang: inZone(gang("g", PodSet{Name: "launcher", Count: 1, Requests: rl("cpu", "1")},
			gpuPods("workers", 2, 8))),
		want: Placement{inDomain("launcher", "w1", 1, "", "west"),
			inDomain("workers", "w1", 1, "", "west"), inDomain("workers", "w2", 1, "", "west")},
	}, {
		name:  "nodes without the key are not eligible",
		nodes: append([]Node{zoned("x", "", h100)}, west...), usage: full("w1", "w2"),
		gang: inZone(gang("g", gpuPods("w", 1, 8))),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w", Resource: gpu,
			Message: `no topology.kubernetes.io/zone domain holds the whole gang now (1 tried); closest, west: pod set "w" needs 1 pod x 8 nvidia.com/gpu on one node; 0 fit now; largest free on one eligible node: 0 (w1)`},
	}, {
		name: "an empty value counts as no label",
		nodes: func() []Node {
			n := zoned("x", "", h100)
			n.Labels[zoneLabel] = ""
			return []Node{n}
		}(),
		gang: inZone(gang("g", gpuPods("w", 1, 8))),
		wantUnfit: &Unfit{Reason: NoEligibleNode, PodSet: "w",
			Message: `pod set "w" has no eligible node among 1: 1 without the topology label topology.kubernetes.io/zone`},
	}, {
		name:  "no node has the key",
		nodes: abc,
		gang:  withTopology(gang("g", gpuPods("w", 1, 8)), "example.com/rack"),
		wantUnfit: &Unfit{Reason: NoEligibleNode, PodSet: "w",
			Message: `pod set "w" has no eligible node among 8: 8 without the topology label example.com/rack`},
	}, {
		name:  "pod sets whose eligible nodes share no domain",
		nodes: abc,
		gang: inZone(gang("g",
			PodSet{Name: "x", Count: 1, Requests: rl("cpu", "1"), NodeSelector: map[string]string{zoneLabel: "a"}},
			PodSet{Name: "y", Count: 1, Requests: rl("cpu", "1"), RequiredAffinity: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneLabel, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"}}},
			}}}})),
		wantUnfit: &Unfit{Reason: NoEligibleNode, PodSet: "x",
			Message: `no topology.kubernetes.io/zone domain has eligible nodes for every pod set: pod set "x" in a, pod set "y" in b, c`},
	}})
}

func TestFitTopologyAndProducts(t *testing.T) {
	// Zone a has three H100 nodes, zone b two A100 nodes, zone c one of each.
	nodes := []Node{
		zoned("a1", "a", h100), zoned("a2", "a", h100), zoned("a3", "a", h100),
		zoned("b1", "b", a100), zoned("b2", "b", a100),
		zoned("c1", "c", h100), zoned("c2", "c", a100),
	}
	runFitCases(t, []fitCase{{
		name:  "the preferred product before the tightest zone",
		nodes: nodes,
		gang:  inZone(gang("g", preferring(gpuPods("w", 2, 8), h100, a100))),
		want:  Placement{inDomain("w", "a1", 1, h100, "a"), inDomain("w", "a2", 1, h100, "a")},
	}, {
		name:  "the next product when no zone holds the gang on the first",
		nodes: nodes, usage: full("a1", "a2"),
		gang: inZone(gang("g", preferring(gpuPods("w", 2, 8), h100, a100))),
		want: Placement{inDomain("w", "b1", 1, a100, "b"), inDomain("w", "b2", 1, a100, "b")},
	}, {
		name:  "pod sets of different products in one zone",
		nodes: nodes,
		gang:  inZone(gang("g", preferring(gpuPods("x", 1, 8), h100), preferring(gpuPods("y", 1, 8), a100))),
		want:  Placement{inDomain("x", "c1", 1, h100, "c"), inDomain("y", "c2", 1, a100, "c")},
	}, {
		name:  "no zone holds it on any product",
		nodes: nodes, usage: full("a1", "a2", "b1"),
		gang: inZone(gang("g", preferring(gpuPods("w", 2, 8), h100, a100))),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w", Resource: gpu,
			Message: `no topology.kubernetes.io/zone domain holds the whole gang now (3 tried); closest, a: pod set "w" needs 2 pods x 8 nvidia.com/gpu (NVIDIA-H100-80GB-HBM3) on one node each; 1 fit now; largest free on one eligible node: 8 (a3); other GPU products there: NVIDIA-A100-SXM4-80GB: no eligible node`},
	}, {
		name:  "no zone could ever hold it on any product",
		nodes: nodes,
		gang:  inZone(gang("g", preferring(gpuPods("w", 4, 8), h100, a100))),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "w", Resource: gpu,
			Message: `no topology.kubernetes.io/zone domain could hold the gang even with its nodes empty (3 with eligible nodes for every pod set); closest, a: pod set "w" needs 4 pods x 8 nvidia.com/gpu (NVIDIA-H100-80GB-HBM3) on one node each; even with all 3 eligible nodes empty only 3 fit; other GPU products there: NVIDIA-A100-SXM4-80GB: no eligible node`},
	}})
}

func TestReserveAndReleaseWithProductsAndDomains(t *testing.T) {
	nodes := []Node{zoned("h1", "a", h100), zoned("h2", "a", h100), zoned("a1", "b", a100), zoned("a2", "b", a100)}
	job := func(key string) Gang { return inZone(gang(key, preferring(gpuPods("w", 2, 8), h100, a100))) }
	onH100 := Placement{inDomain("w", "h1", 1, h100, "a"), inDomain("w", "h2", 1, h100, "a")}
	onA100 := Placement{inDomain("w", "a1", 1, a100, "b"), inDomain("w", "a2", 1, a100, "b")}
	gpus := func(s *Snapshot) map[string]int64 {
		out := map[string]int64{}
		for _, n := range nodes {
			out[n.Name] = freeOf(t, s, n.Name, gpu)
		}
		return out
	}
	all := func(v int64) map[string]int64 { return map[string]int64{"h1": v, "h2": v, "a1": v, "a2": v} }

	s := NewSnapshot(nodes)
	got := s.Admit([]Gang{job("g1"), job("g2"), job("g3")})
	want := []Decision{
		{Key: "g1", Admitted: true, Placement: onH100},
		{Key: "g2", Admitted: true, Placement: onA100},
		{Key: "g3", Unfit: &Unfit{Reason: InsufficientResources}},
	}
	onlyReason := cmpopts.IgnoreFields(Unfit{}, "Message", "PodSet", "Resource")
	if d := cmp.Diff(want, got, ignoreRequests, onlyReason); d != "" {
		t.Fatalf("decisions (-want +got):\n%s", d)
	}
	if d := cmp.Diff(all(0), gpus(s)); d != "" {
		t.Errorf("free GPUs after admitting (-want +got):\n%s", d)
	}
	// Reserving the same placement again counts it once.
	s.Reserve("g1", got[0].Placement)
	if d := cmp.Diff(all(0), gpus(s)); d != "" {
		t.Errorf("free GPUs after reserving g1 again (-want +got):\n%s", d)
	}
	// The reservation keeps the products and domain, and a second pass admits it as it was.
	if r, _ := s.Reservation("g2"); cmp.Diff(onA100, r, ignoreRequests) != "" {
		t.Errorf("reservation of g2 = %v, want %v", r, onA100)
	}
	again := s.Admit([]Gang{job("g2")})
	if d := cmp.Diff([]Decision{{Key: "g2", Admitted: true, Placement: onA100}}, again, ignoreRequests); d != "" {
		t.Errorf("g2 admitted again (-want +got):\n%s", d)
	}
	s.Release("g1")
	if d := cmp.Diff(map[string]int64{"h1": 8, "h2": 8, "a1": 0, "a2": 0}, gpus(s)); d != "" {
		t.Errorf("free GPUs after releasing g1 (-want +got):\n%s", d)
	}
	// g3 now takes the H100 zone that g1 gave back.
	if p, u := s.Fit(job("g3")); u != nil || cmp.Diff(onH100, p, ignoreRequests) != "" {
		t.Errorf("g3 after release: %v, %v; want %v", p, u, onH100)
	}
	s.Release("g2")
	s.Release("g2")
	if d := cmp.Diff(all(8), gpus(s)); d != "" {
		t.Errorf("free GPUs after releasing all (-want +got):\n%s", d)
	}
}

func TestFitMessagesAreActionable(t *testing.T) {
	// node-1..node-6 full, node-7 with 4 GPUs free, node-8 with 2.
	var nodes []Node
	usage := map[string][]corev1.ResourceList{}
	for i, used := range []string{"8", "8", "8", "8", "8", "8", "4", "6"} {
		name := "node-" + string(rune('1'+i))
		nodes = append(nodes, gpuNode(name, 8, h100))
		usage[name] = []corev1.ResourceList{rl("nvidia.com/gpu", used)}
	}
	manyProducts := func(n int) []string {
		var ps []string
		for i := range n {
			ps = append(ps, strings.Repeat("X", 60)+"-"+string(rune('a'+i)))
		}
		return append(ps, h100)
	}
	cases := []struct {
		name     string
		gang     Gang
		reason   UnfitReason
		message  string   // the whole message, if set
		contains []string // else parts it must contain
	}{{
		name:    "fragmented GPUs name the largest hole and its node",
		gang:    gang("g", preferring(gpuPods("main", 2, 8), h100)),
		reason:  InsufficientResources,
		message: `pod set "main" needs 2 pods x 8 nvidia.com/gpu (NVIDIA-H100-80GB-HBM3) on one node each; 0 fit now; largest free on one eligible node: 4 (node-7)`,
	}, {
		name:   "many products are counted, not all listed",
		gang:   gang("g", preferring(gpuPods("main", 2, 8), manyProducts(20)...)),
		reason: InsufficientResources,
		contains: []string{`(NVIDIA-H100-80GB-HBM3)`, `largest free on one eligible node: 4 (node-7)`,
			`-c: no eligible node and 17 more`},
	}, {
		name:     "a product that is not a label value is quoted, on one line",
		gang:     gang("g", preferring(gpuPods("main", 1, 8), "H100\nrm -rf")),
		reason:   NoEligibleNode,
		contains: []string{`nvidia.com/gpu.product="H100\nrm -rf"`},
	}, {
		name:     "a huge pod set name is cut",
		gang:     gang("g", preferring(gpuPods(strings.Repeat("p", 3000), 1, 8), h100)),
		reason:   InsufficientResources,
		contains: []string{`pod set "ppp`, `...`},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, u := snapshot(nodes, usage).Fit(tc.gang)
			if u == nil {
				t.Fatal("fits")
			}
			if u.Reason != tc.reason {
				t.Errorf("reason %s, want %s: %s", u.Reason, tc.reason, u.Message)
			}
			if tc.message != "" && u.Message != tc.message {
				t.Errorf("message\n%s\nwant\n%s", u.Message, tc.message)
			}
			for _, c := range tc.contains {
				if !strings.Contains(u.Message, c) {
					t.Errorf("message %q does not contain %q", u.Message, c)
				}
			}
			if strings.ContainsAny(u.Message, "\n\r") || len(u.Message) > maxMessageLen {
				t.Errorf("message not one bounded line (%d bytes): %q", len(u.Message), u.Message)
			}
		})
	}
}

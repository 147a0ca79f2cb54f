package admission

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// away returns n not Ready (with the taints Kubernetes adds to a node it cannot reach) or cordoned
// (with the taint that goes with it), as state says: "not Ready", "cordoned" or "both".
func away(n Node, state string) Node {
	n.Taints = append([]corev1.Taint(nil), n.Taints...)
	if state == "not Ready" || state == "both" {
		n.Ready = false
		n.Taints = append(n.Taints,
			corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
			corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute})
	}
	if state == "cordoned" || state == "both" {
		n.Unschedulable = true
		n.Taints = append(n.Taints, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	}
	return n
}

func labelled(n Node, kv ...string) Node {
	l := map[string]string{}
	for k, v := range n.Labels {
		l[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	n.Labels = l
	return n
}

// TestFitNodesBack checks that a gang is rejected for good only if it would not fit either with every
// node back: Ready, uncordoned, without the taints Kubernetes lifts by itself, and empty.
func TestFitNodesBack(t *testing.T) {
	a, b, c := gpuNode("a", 8, h100), gpuNode("b", 8, h100), gpuNode("c", 8, h100)
	full := map[string][]corev1.ResourceList{"a": {rl("nvidia.com/gpu", "8")}}
	dedicated := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	onB := gpuPods("w", 1, 8)
	onB.NodeSelector = map[string]string{"pool": "b"}
	runFitCases(t, []fitCase{{
		name:  "a cordoned node the gang needs: it waits, naming the node",
		nodes: []Node{a, away(b, "cordoned")},
		gang:  gang("g", gpuPods("w", 2, 8)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w", Resource: gpu,
			Message: `the gang would fit once these nodes are back: b (cordoned); as the cluster is now: ` +
				`pod set "w" needs 2 pods x 8 nvidia.com/gpu on one node each; even with all 1 eligible nodes empty only 1 fit`},
	}, {
		name:  "nodes not Ready after a network blip: it waits, naming them",
		nodes: []Node{away(a, "not Ready"), away(b, "both"), c},
		gang:  gang("g", gpuPods("w", 3, 8)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w", Resource: gpu,
			Message: `the gang would fit once these nodes are back: a (not Ready), b (not Ready, cordoned); as the cluster is now: ` +
				`pod set "w" needs 3 pods x 8 nvidia.com/gpu on one node each; even with all 1 eligible nodes empty only 1 fit`},
	}, {
		name:  "the only node matching the selector is cordoned: it waits",
		nodes: []Node{a, away(labelled(b, "pool", "b"), "cordoned")},
		gang:  gang("g", onB),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w",
			Message: `the gang would fit once these nodes are back: b (cordoned); as the cluster is now: ` +
				`pod set "w" has no eligible node among 2: 1 unschedulable (cordoned), 1 not matching the nodeSelector (no Ready schedulable node has pool=b)`},
	}, {
		name:  "a taint of the cordon that lingers after the node is uncordoned: it waits",
		nodes: []Node{func() Node { n := away(b, "cordoned"); n.Unschedulable = false; return n }()},
		gang:  gang("g", gpuPods("w", 1, 8)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w",
			Message: `the gang would fit once these nodes are back: b (tainted node.kubernetes.io/unschedulable); as the cluster is now: ` +
				`pod set "w" has no eligible node among 1: 1 with an untolerated taint (e.g. node.kubernetes.io/unschedulable:NoSchedule on b)`},
	}, {
		name:  "the only node of the GPU product is not Ready: it waits",
		nodes: []Node{gpuNode("x", 8, a100), away(b, "not Ready")},
		gang:  gang("g", preferring(gpuPods("w", 1, 8), h100)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w",
			Message: `the gang would fit once these nodes are back: b (not Ready); as the cluster is now: ` +
				`pod set "w" has no eligible node among 2: 1 not Ready, 1 not of its GPU products (no Ready schedulable node has nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3)`},
	}, {
		name:  "a topology domain that is whole only with its cordoned node: it waits",
		nodes: []Node{zoned("a", "z1", h100), away(zoned("b", "z1", h100), "cordoned"), zoned("c", "z2", h100)},
		gang:  inZone(gang("g", gpuPods("w", 2, 8))),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w", Resource: gpu,
			Message: `the gang would fit once these nodes are back: b (cordoned); as the cluster is now: ` +
				`no topology.kubernetes.io/zone domain could hold the gang even with its nodes empty (2 with eligible nodes for every pod set); ` +
				`closest, z1: pod set "w" needs 2 pods x 8 nvidia.com/gpu on one node each; even with all 1 eligible nodes empty only 1 fit`},
	}, {
		// Pods end: the rule counts the nodes that are here empty too, as NeverFits always did.
		name:  "a busy node beside a cordoned one: it waits",
		nodes: []Node{a, away(b, "cordoned")}, usage: full,
		gang: gang("g", gpuPods("w", 2, 8)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w", Resource: gpu,
			Message: `the gang would fit once these nodes are back: b (cordoned); as the cluster is now: ` +
				`pod set "w" needs 2 pods x 8 nvidia.com/gpu on one node each; even with all 1 eligible nodes empty only 1 fit`},
	}, {
		name:  "too big even with every node back: rejected",
		nodes: []Node{a, away(b, "cordoned")},
		gang:  gang("g", gpuPods("w", 3, 8)),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "w", Resource: gpu,
			Message: `pod set "w" needs 3 pods x 8 nvidia.com/gpu on one node each; even with all 1 eligible nodes empty only 1 fit`},
	}, {
		name:  "all or nothing: pod sets that fit the nodes back only one by one are rejected",
		nodes: []Node{a, away(b, "cordoned")},
		gang:  gang("g", gpuPods("workers", 2, 8), gpuPods("launcher", 1, 8)),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "workers", Resource: gpu,
			Message: `pod set "workers" needs 2 pods x 8 nvidia.com/gpu on one node each; even with all 1 eligible nodes empty only 1 fit`},
	}, {
		name:  "a taint a person set stays when the node is back: rejected",
		nodes: []Node{func() Node { n := away(b, "cordoned"); n.Taints = append(n.Taints, dedicated); return n }()},
		gang:  gang("g", gpuPods("w", 1, 8)),
		wantUnfit: &Unfit{Reason: NoEligibleNode, PodSet: "w",
			Message: `pod set "w" has no eligible node among 1: 1 unschedulable (cordoned)`},
	}, {
		name:  "a node not Ready without the selector's label: rejected",
		nodes: []Node{a, away(b, "not Ready")},
		gang:  gang("g", onB),
		wantUnfit: &Unfit{Reason: NoEligibleNode, PodSet: "w",
			Message: `pod set "w" has no eligible node among 2: 1 not Ready, 1 not matching the nodeSelector (no Ready schedulable node has pool=b)`},
	}})
}

// TestNodesBackOnlyForRejections checks that the cluster with every node back is built only for a gang
// about to be rejected while some node is away, and once per snapshot.
func TestNodesBackOnlyForRejections(t *testing.T) {
	nodes := []Node{gpuNode("a", 8, h100), away(gpuNode("b", 8, h100), "cordoned")}
	s := snapshot(nodes, map[string][]corev1.ResourceList{"a": {rl("nvidia.com/gpu", "4")}})
	if _, u := s.Fit(gang("fits", gpuPods("w", 1, 4))); u != nil {
		t.Fatalf("fits: %v", u)
	}
	if _, u := s.Fit(gang("waits", gpuPods("w", 1, 8))); u == nil || u.Reason != InsufficientResources {
		t.Fatalf("waits: %v, want InsufficientResources", u)
	}
	if s.back != nil {
		t.Fatal("built the cluster with every node back for gangs that fit or wait for capacity")
	}
	if _, u := s.Fit(gang("needs b", gpuPods("w", 2, 8))); u == nil || u.Reason != InsufficientResources {
		t.Fatalf("needs b: %v, want InsufficientResources", u)
	}
	back := s.back
	if back == nil {
		t.Fatal("the cluster with every node back was not built for a gang about to be rejected")
	}
	if _, u := s.Fit(gang("never", gpuPods("w", 3, 8))); u == nil || u.Reason != NeverFits {
		t.Fatalf("never: %v, want NeverFits", u)
	}
	if s.back != back {
		t.Error("the cluster with every node back was built twice")
	}

	here := snapshot(nodes[:1], nil)
	if _, u := here.Fit(gang("never", gpuPods("w", 2, 8))); u == nil || u.Reason != NeverFits {
		t.Fatalf("never: %v, want NeverFits", u)
	}
	if here.back != nil {
		t.Error("built the cluster with every node back although no node is away")
	}
}

// TestAdmitNodesBackDoNotStarve checks that a gang waiting for nodes to come back holds nothing for
// itself, however long it waited: holding the nodes that are here would not make it fit.
func TestAdmitNodesBackDoNotStarve(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewSnapshot([]Node{gpuNode("a", 8, h100), away(gpuNode("b", 8, h100), "cordoned")})
	big := gang("big", gpuPods("w", 2, 8))
	big.CreationTime = t0
	small := gang("small", gpuPods("w", 1, 1))
	small.CreationTime = t0.Add(time.Minute)
	got := s.AdmitWithOptions([]Gang{big, small}, AdmitOptions{Now: t0.Add(time.Hour), StarvationTimeout: time.Minute})
	var reasons []string
	for _, d := range got {
		r := "Admitted"
		if !d.Admitted {
			r = string(d.Unfit.Reason)
		}
		reasons = append(reasons, d.Key+": "+r)
	}
	if diff := cmp.Diff([]string{"big: InsufficientResources", "small: Admitted"}, reasons); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
}

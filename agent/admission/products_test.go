package admission

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// preferring is ps listing GPU products, most preferred first.
func preferring(ps PodSet, products ...string) PodSet {
	ps.GPUProducts = products
	return ps
}

// onProduct is an assignment of a pod set that chose product; compare with ignoreRequests.
func onProduct(podSet, node string, count int32, product string) Assignment {
	return Assignment{PodSet: podSet, Node: node, Count: count, GPUProduct: product}
}

// full is usage that takes all 8 GPUs of each node.
func full(nodes ...string) map[string][]corev1.ResourceList {
	u := map[string][]corev1.ResourceList{}
	for _, n := range nodes {
		u[n] = []corev1.ResourceList{rl("nvidia.com/gpu", "8")}
	}
	return u
}

func TestFitGPUProductPreference(t *testing.T) {
	nodes := []Node{gpuNode("a1", 8, a100), gpuNode("a2", 8, a100), gpuNode("h1", 8, h100), gpuNode("h2", 8, h100)}
	unlabelled := gpuNode("plain", 8, "")
	runFitCases(t, []fitCase{{
		name:  "H100 only goes to H100 nodes",
		nodes: nodes,
		gang:  gang("g", preferring(gpuPods("w", 2, 8), h100)),
		want:  Placement{onProduct("w", "h1", 1, h100), onProduct("w", "h2", 1, h100)},
	}, {
		name:  "H100 only is never placed on A100 nodes, even when the H100 nodes are full",
		nodes: nodes, usage: full("h1"),
		gang: gang("g", preferring(gpuPods("w", 2, 8), h100)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w", Resource: gpu,
			Message: `pod set "w" needs 2 pods x 8 nvidia.com/gpu (NVIDIA-H100-80GB-HBM3) on one node each; 1 fit now; largest free on one eligible node: 8 (h2)`},
	}, {
		name:  "H100, else A100: H100 when it fits",
		nodes: nodes,
		gang:  gang("g", preferring(gpuPods("w", 2, 8), h100, a100)),
		want:  Placement{onProduct("w", "h1", 1, h100), onProduct("w", "h2", 1, h100)},
	}, {
		name:  "H100, else A100: A100 when the H100 nodes are full",
		nodes: nodes, usage: full("h2"),
		gang: gang("g", preferring(gpuPods("w", 2, 8), h100, a100)),
		want: Placement{onProduct("w", "a1", 1, a100), onProduct("w", "a2", 1, a100)},
	}, {
		name:  "the order of preference counts: A100 first though H100 is free",
		nodes: nodes,
		gang:  gang("g", preferring(gpuPods("w", 2, 8), a100, h100)),
		want:  Placement{onProduct("w", "a1", 1, a100), onProduct("w", "a2", 1, a100)},
	}, {
		name:  "all pods of a pod set use one product: never 1 on H100 and 1 on A100",
		nodes: nodes, usage: full("h2", "a2"),
		gang: gang("g", preferring(gpuPods("w", 2, 8), h100, a100)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w", Resource: gpu,
			Message: `pod set "w" needs 2 pods x 8 nvidia.com/gpu (NVIDIA-H100-80GB-HBM3) on one node each; 1 fit now; largest free on one eligible node: 8 (h1); other GPU products: NVIDIA-A100-SXM4-80GB: 1 fit now`},
	}, {
		name:  "a product absent from the cluster",
		nodes: nodes,
		gang:  gang("g", preferring(gpuPods("w", 1, 8), "NVIDIA-B200")),
		wantUnfit: &Unfit{Reason: NoEligibleNode, PodSet: "w",
			Message: `pod set "w" has no eligible node among 4: 4 not of its GPU products (no Ready schedulable node has nvidia.com/gpu.product=NVIDIA-B200)`},
	}, {
		name:  "an absent product is skipped for the next",
		nodes: nodes,
		gang:  gang("g", preferring(gpuPods("w", 1, 8), "NVIDIA-B200", h100)),
		want:  Placement{onProduct("w", "h1", 1, h100)},
	}, {
		name:  "a node without the product label never matches a pod set that lists products",
		nodes: append([]Node{unlabelled}, nodes...), usage: full("h1", "h2"),
		gang: gang("g", preferring(gpuPods("w", 1, 8), h100)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w", Resource: gpu,
			Message: `pod set "w" needs 1 pod x 8 nvidia.com/gpu (NVIDIA-H100-80GB-HBM3) on one node; 0 fit now; largest free on one eligible node: 0 (h1)`},
	}, {
		name:  "a node without the product label takes a pod set that lists none",
		nodes: append([]Node{unlabelled}, nodes...), usage: full("a1", "a2", "h1", "h2"),
		gang: gang("g", gpuPods("w", 1, 8)),
		want: Placement{at("w", "plain", 1)},
	}, {
		name:  "NeverFits only when no product could ever hold it",
		nodes: nodes,
		gang:  gang("g", preferring(gpuPods("w", 3, 8), "NVIDIA-B200", h100, a100)),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "w", Resource: gpu,
			// H100 and A100 hold as many: the message is about the preferred one.
			Message: `pod set "w" needs 3 pods x 8 nvidia.com/gpu (NVIDIA-H100-80GB-HBM3) on one node each; even with all 2 eligible nodes empty only 2 fit; other GPU products: NVIDIA-B200: no eligible node, NVIDIA-A100-SXM4-80GB: at most 2 fit even if empty`},
	}, {
		name:  "one product never fits, another would if its nodes were free: InsufficientResources",
		nodes: append(nodes, gpuNode("a3", 8, a100)), usage: full("a3"),
		gang: gang("g", preferring(gpuPods("w", 3, 8), h100, a100)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "w", Resource: gpu,
			Message: `pod set "w" needs 3 pods x 8 nvidia.com/gpu (NVIDIA-A100-SXM4-80GB) on one node each; 2 fit now; largest free on one eligible node: 8 (a1); other GPU products: NVIDIA-H100-80GB-HBM3: at most 2 fit even if empty`},
	}, {
		name:  "the nodeSelector narrows the products further",
		nodes: nodes,
		gang: gang("g", func() PodSet {
			ps := preferring(gpuPods("w", 1, 8), h100, a100)
			ps.NodeSelector = map[string]string{GPUProductLabel: a100}
			return ps
		}()),
		want: Placement{onProduct("w", "a1", 1, a100)},
	}, {
		name:  "a pod set of no pods does not choose",
		nodes: nodes,
		gang:  gang("g", preferring(gpuPods("none", 0, 8), "NVIDIA-B200"), preferring(gpuPods("w", 1, 8), h100)),
		want:  Placement{onProduct("w", "h1", 1, h100)},
	}, {
		name:  "a pod set listing no products beside one that does",
		nodes: nodes,
		gang:  gang("g", PodSet{Name: "launcher", Count: 1, Requests: rl("cpu", "1")}, preferring(gpuPods("w", 1, 8), a100)),
		want:  Placement{at("launcher", "a1", 1), onProduct("w", "a1", 1, a100)},
	}})
}

func TestFitGPUProductCombinations(t *testing.T) {
	nodes := []Node{gpuNode("a1", 8, a100), gpuNode("h1", 8, h100)}
	both := func(name string) PodSet { return preferring(gpuPods(name, 1, 8), h100, a100) }
	// absentFirst lists n absent products, then present ones.
	absentFirst := func(name string, n int, present ...string) PodSet {
		var ps []string
		for i := range n {
			ps = append(ps, fmt.Sprintf("absent-%d", i))
		}
		return preferring(gpuPods(name, 1, 8), append(ps, present...)...)
	}
	runFitCases(t, []fitCase{{
		// (H100, H100) does not fit; the next combination changes the last pod set: (H100, A100).
		name:  "the first pod set's preference changes slowest",
		nodes: nodes,
		gang:  gang("g", both("x"), both("y")),
		want:  Placement{onProduct("x", "h1", 1, h100), onProduct("y", "a1", 1, a100)},
	}, {
		name:  "combinations are in the gang's order of pod sets, not the order of placement",
		nodes: nodes,
		gang:  gang("g", preferring(gpuPods("small", 1, 1), h100, a100), preferring(gpuPods("big", 1, 8), h100, a100)),
		want:  Placement{onProduct("small", "h1", 1, h100), onProduct("big", "a1", 1, a100)},
	}, {
		name:  "combinations past the cap are not tried",
		nodes: nodes,
		// 5 x 5 x 5 = 125 combinations; the only one with products in the cluster is the last.
		gang: gang("g", absentFirst("p0", 4, h100), absentFirst("p1", 4, h100), absentFirst("p2", 4, a100)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "p0",
			Message: `the gang could fit only with GPU product combinations past the first 64 of 125, which are not tried`},
	}, {
		name:  "the cap is named when it cut the search",
		nodes: nodes,
		// 2 x 9 x 8 = 144 combinations; within the first 64, p0 uses A100 and so does p2.
		gang: gang("g", preferring(gpuPods("p0", 1, 8), a100, h100),
			preferring(gpuPods("p1", 1, 8), h100, "absent-0", "absent-1", "absent-2", "absent-3", "absent-4", "absent-5", "absent-6", "absent-7"),
			absentFirst("p2", 7, a100)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "p2", Resource: gpu,
			Message: `pod set "p2" needs 1 pod x 8 nvidia.com/gpu (NVIDIA-A100-SXM4-80GB) on one node; 0 fit now (it fits alone, but not beside pod set(s) "p0", "p1" of the same gang); largest free on one eligible node: 8 (a1); other GPU products: absent-0: no eligible node, absent-1: no eligible node, absent-2: no eligible node and 4 more; only the first 64 of 144 GPU product combinations were tried`},
	}})
}

func TestFitExtendedResources(t *testing.T) {
	const migProduct = "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"
	amdNode := func(name string) Node {
		return readyNode(name, rl("cpu", "64", "memory", "512Gi", "amd.com/gpu", "8"))
	}
	migNode := func(name string, slices string) Node {
		n := readyNode(name, rl("cpu", "32", "memory", "256Gi", "nvidia.com/mig-1g.10gb", slices))
		n.Labels = map[string]string{GPUProductLabel: migProduct}
		return n
	}
	amdPods := func(count int32, gpus string) PodSet {
		return PodSet{Name: "r", Count: count, Requests: rl("cpu", "4", "amd.com/gpu", gpus)}
	}
	migPods := func(count int32) PodSet {
		return PodSet{Name: "m", Count: count, Requests: rl("cpu", "1", "nvidia.com/mig-1g.10gb", "1")}
	}
	runFitCases(t, []fitCase{{
		name:  "amd.com/gpu: best fit over two nodes",
		nodes: []Node{amdNode("a"), amdNode("b")},
		usage: map[string][]corev1.ResourceList{"b": {rl("amd.com/gpu", "4")}},
		gang:  gang("g", amdPods(3, "4")),
		want:  Placement{at("r", "a", 2), at("r", "b", 1)},
	}, {
		name:  "amd.com/gpu: fragmentation",
		nodes: []Node{amdNode("a"), amdNode("b")},
		usage: map[string][]corev1.ResourceList{"a": {rl("amd.com/gpu", "4")}, "b": {rl("amd.com/gpu", "4")}},
		gang:  gang("g", amdPods(1, "8")),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "r", Resource: "amd.com/gpu",
			Message: `pod set "r" needs 1 pod x 8 amd.com/gpu on one node; 0 fit now; largest free on one eligible node: 4 (a)`},
	}, {
		name:  "amd.com/gpu: more than any node has",
		nodes: []Node{amdNode("a")},
		gang:  gang("g", amdPods(1, "16")),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "r", Resource: "amd.com/gpu",
			Message: `pod set "r" needs 1 pod x 16 amd.com/gpu on one node; no eligible node has that much allocatable; largest on one eligible node: 8 (a)`},
	}, {
		name:  "MIG slices of a MIG product, fuller node first",
		nodes: []Node{migNode("m1", "7"), migNode("m2", "7"), gpuNode("h1", 8, h100)},
		usage: map[string][]corev1.ResourceList{"m2": {rl("nvidia.com/mig-1g.10gb", "5")}},
		gang:  gang("g", preferring(migPods(4), migProduct)),
		want:  Placement{onProduct("m", "m1", 2, migProduct), onProduct("m", "m2", 2, migProduct)},
	}, {
		name:  "MIG slices short",
		nodes: []Node{migNode("m1", "7"), migNode("m2", "7")},
		usage: map[string][]corev1.ResourceList{"m1": {rl("nvidia.com/mig-1g.10gb", "6")}, "m2": {rl("nvidia.com/mig-1g.10gb", "6")}},
		gang:  gang("g", preferring(migPods(3), migProduct)),
		wantUnfit: &Unfit{Reason: InsufficientResources, PodSet: "m", Resource: mig,
			Message: `pod set "m" needs 3 pods x 1 nvidia.com/mig-1g.10gb (NVIDIA-A100-SXM4-80GB-MIG-1g.10gb) on one node each; 2 fit now; largest free on one eligible node: 1 (m1)`},
	}, {
		name:  "MIG slices on full-GPU products never fit",
		nodes: []Node{migNode("m1", "7"), gpuNode("h1", 8, h100)},
		gang:  gang("g", preferring(migPods(1), h100)),
		wantUnfit: &Unfit{Reason: NeverFits, PodSet: "m", Resource: mig,
			Message: `pod set "m" needs 1 pod x 1 nvidia.com/mig-1g.10gb (NVIDIA-H100-80GB-HBM3) on one node; no eligible node has that much allocatable; largest on one eligible node: 0 (h1)`},
	}})
}

package admission

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const (
	gpu  = corev1.ResourceName("nvidia.com/gpu")
	mig  = corev1.ResourceName("nvidia.com/mig-1g.10gb")
	h100 = "NVIDIA-H100-80GB-HBM3"
	a100 = "NVIDIA-A100-SXM4-80GB"
)

// rl builds a ResourceList from name, quantity pairs: rl("cpu", "500m", "nvidia.com/gpu", "8").
func rl(kv ...string) corev1.ResourceList {
	if len(kv)%2 != 0 {
		panic("rl needs pairs")
	}
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// readyNode is a Ready schedulable node with the given allocatable.
func readyNode(name string, alloc corev1.ResourceList) Node {
	return Node{Name: name, Ready: true, Allocatable: alloc}
}

// gpuNode is a Ready node with 64 cpu, 512Gi memory, 110 pods and gpus GPUs of product.
func gpuNode(name string, gpus int, product string) Node {
	n := readyNode(name, rl("cpu", "64", "memory", "512Gi", "pods", "110", "nvidia.com/gpu", fmt.Sprint(gpus)))
	if product != "" {
		n.Labels = map[string]string{GPUProductLabel: product}
	}
	return n
}

func gpuPods(name string, count int32, gpus int) PodSet {
	return PodSet{Name: name, Count: count, Requests: rl("cpu", "4", "memory", "32Gi", "nvidia.com/gpu", fmt.Sprint(gpus))}
}

func gang(key string, sets ...PodSet) Gang { return Gang{Key: key, PodSets: sets} }

// at is an assignment without its requests; compare with ignoreRequests.
func at(podSet, node string, count int32) Assignment {
	return Assignment{PodSet: podSet, Node: node, Count: count}
}

var ignoreRequests = cmpopts.IgnoreFields(Assignment{}, "Requests")

// snapshot builds a snapshot of nodes with usage: node name -> requests of the bound pods on it.
func snapshot(nodes []Node, usage map[string][]corev1.ResourceList) *Snapshot {
	s := NewSnapshot(nodes)
	for n, pods := range usage {
		for _, r := range pods {
			if !s.AddUsage(n, r) {
				panic("unknown node " + n)
			}
		}
	}
	return s
}

// freeOf returns the free amount of one resource on a node, in the snapshot's units.
func freeOf(t *testing.T, s *Snapshot, node string, name corev1.ResourceName) int64 {
	t.Helper()
	f, ok := s.NodeFree(node)
	if !ok {
		t.Fatalf("node %s unknown", node)
	}
	q := f[name]
	return amount(name, q)
}

// allFree is every node's free capacity, to show that something changed nothing.
func allFree(s *Snapshot) map[string]corev1.ResourceList {
	out := map[string]corev1.ResourceList{}
	for _, n := range s.nodes {
		out[n.Name], _ = s.NodeFree(n.Name)
	}
	return out
}

func diffFree(t *testing.T, before, after map[string]corev1.ResourceList) {
	t.Helper()
	if d := cmp.Diff(before, after); d != "" {
		t.Errorf("free capacity changed (-before +after):\n%s", d)
	}
}

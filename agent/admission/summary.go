package admission

import (
	"cmp"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Summary is what the cluster can hold, for the agent to publish to the hub. It covers the nodes that are
// Ready and schedulable; Free is what bound pods and reservations leave (never below 0 on a node).
type Summary struct {
	// Nodes counts all nodes; ReadyNodes those Ready and schedulable.
	Nodes      int32
	ReadyNodes int32
	// Resources per resource name, sorted by name: every resource in the allocatable of a Ready
	// schedulable node. "pods" counts only nodes that declare it.
	Resources []ResourceCapacity
	// GPUProducts per value of the node label nvidia.com/gpu.product, sorted by product, with the
	// node's nvidia.com/gpu and how many pods of common GPU counts fit now.
	GPUProducts []GPUProductCapacity
}

// ResourceCapacity is the allocatable and free amount of one resource.
type ResourceCapacity struct {
	Name        corev1.ResourceName
	Allocatable resource.Quantity
	Free        resource.Quantity
	// LargestFreeOnNode is the most free on one node, LargestFreeNode that node (first by name).
	LargestFreeOnNode resource.Quantity
	LargestFreeNode   string
}

// GPUProductCapacity counts the GPUs (nvidia.com/gpu) of one product.
type GPUProductCapacity struct {
	Product string
	// Nodes counts the Ready schedulable nodes labelled with the product.
	Nodes             int32
	Allocatable       int64
	Free              int64
	LargestFreeOnNode int64
	LargestFreeNode   string
	// LargestAllocatableOnNode is the most GPUs one node has at all: a pod needing more never fits.
	LargestAllocatableOnNode int64
	// Shapes has one entry per count of CommonGPUShapes, in that order: how many pods asking for exactly
	// that many GPUs fit now on the product's nodes, so that a dispatcher can tell four free GPUs on one
	// node from four scattered over four nodes.
	Shapes []ShapeCount
}

// CommonGPUShapes are the GPU counts per pod that Summary counts room for. Do not change it.
var CommonGPUShapes = []int64{1, 2, 4, 8}

// ShapeCount is how many pods, each asking for GPUs nvidia.com/gpu and nothing else, fit now: the sum
// over the product's Ready schedulable nodes of floor(free GPUs / GPUs), capped on a node that declares a
// "pods" allocatable by its free pods. CPU, memory and every other resource are not considered: a pod
// that also asks for them may fit fewer times.
type ShapeCount struct {
	GPUs int64
	Pods int32
}

func newProductCapacity(product string) *GPUProductCapacity {
	p := &GPUProductCapacity{Product: product, Shapes: make([]ShapeCount, len(CommonGPUShapes))}
	for j, k := range CommonGPUShapes {
		p.Shapes[j].GPUs = k
	}
	return p
}

// addNode counts one node of the product with alloc GPUs allocatable, free of them free and room for
// freePods more pods.
func (p *GPUProductCapacity) addNode(name string, alloc, free, freePods int64) {
	p.Allocatable += alloc
	p.Free += free
	p.LargestAllocatableOnNode = max(p.LargestAllocatableOnNode, alloc)
	if free > p.LargestFreeOnNode || p.LargestFreeNode == "" {
		p.LargestFreeOnNode, p.LargestFreeNode = free, name
	}
	for j := range p.Shapes {
		if k := p.Shapes[j].GPUs; k > 0 {
			p.Shapes[j].Pods = int32(min(math.MaxInt32, int64(p.Shapes[j].Pods)+min(free/k, freePods)))
		}
	}
}

// Summary returns the capacity of the cluster per resource and per GPU product, with the room for pods of
// each of CommonGPUShapes per product.
func (s *Snapshot) Summary() Summary {
	w := s.width
	sum := Summary{Nodes: int32(len(s.nodes))}
	type acc struct {
		present           bool
		alloc, free, best int64
		bestNode          string
	}
	res := make([]acc, w)
	products := map[string]*GPUProductCapacity{}
	gpu, hasGPU := s.resIndex[GPUResource]
	for i := range s.nodes {
		n := &s.nodes[i]
		if !n.usable {
			continue
		}
		sum.ReadyNodes++
		base := i * w
		for name := range n.Allocatable {
			res[s.resIndex[name]].present = true
		}
		for k := range w {
			a := s.alloc[base+k]
			if k == podsIndex && a == unlimited {
				continue
			}
			f := max(0, s.free[base+k])
			r := &res[k]
			r.alloc = satAdd(r.alloc, a)
			r.free = satAdd(r.free, f)
			if f > r.best || r.bestNode == "" {
				r.best, r.bestNode = f, n.Name
			}
		}
		product, ok := n.Labels[GPUProductLabel]
		if !ok {
			continue
		}
		p := products[product]
		if p == nil {
			p = newProductCapacity(product)
			products[product] = p
		}
		p.Nodes++
		if hasGPU {
			// free pods is about unlimited on a node that declares none.
			p.addNode(n.Name, s.alloc[base+gpu], max(0, s.free[base+gpu]), max(0, s.free[base+podsIndex]))
		}
	}
	for k, name := range s.resNames {
		r := res[k]
		if !r.present {
			continue
		}
		sum.Resources = append(sum.Resources, ResourceCapacity{
			Name:              name,
			Allocatable:       quantity(name, r.alloc),
			Free:              quantity(name, r.free),
			LargestFreeOnNode: quantity(name, r.best),
			LargestFreeNode:   r.bestNode,
		})
	}
	slices.SortFunc(sum.Resources, func(a, b ResourceCapacity) int { return cmp.Compare(a.Name, b.Name) })
	for _, p := range products {
		sum.GPUProducts = append(sum.GPUProducts, *p)
	}
	slices.SortFunc(sum.GPUProducts, func(a, b GPUProductCapacity) int { return cmp.Compare(a.Product, b.Product) })
	return sum
}

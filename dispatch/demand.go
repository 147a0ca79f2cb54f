package dispatch

import (
	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// RequestsOf sums the requests of all pods of all pod sets of a workload.
func RequestsOf(spec *gantry.WorkloadSpec) Resources { return spec.MilliRequests() }

// GPUDemandOf is what a workload needs of nvidia.com/gpu: in total, for its largest pod, and the products
// that pod accepts (its gpuProducts, else the product its nodeSelector names).
func GPUDemandOf(spec *gantry.WorkloadSpec) GPUDemand {
	var d GPUDemand
	for i := range spec.PodSets {
		ps := &spec.PodSets[i]
		q, ok := ps.Requests[gantry.GPUResource]
		if !ok || q.Value() <= 0 {
			continue
		}
		d.Total += q.Value() * int64(ps.Count)
		if q.Value() > d.PerPod {
			d.PerPod = q.Value()
			d.Products = ps.GPUProducts
			if p, ok := ps.NodeSelector[gantry.GPUProductLabel]; ok && len(ps.GPUProducts) == 0 {
				d.Products = []string{p}
			}
		}
	}
	return d
}

// GPUCapacityOf is a cluster's reported free GPUs per product; nil when it reports none.
func GPUCapacityOf(c *gantry.CapacitySummary) []GPUCapacity {
	if c == nil || len(c.GPUProducts) == 0 {
		return nil
	}
	out := make([]GPUCapacity, len(c.GPUProducts))
	for i, g := range c.GPUProducts {
		out[i] = GPUCapacity{Product: g.Product, Allocatable: g.Allocatable, Free: g.Free,
			LargestFreeOnNode: g.LargestFreeOnNode, LargestAllocatableOnNode: g.LargestAllocatableOnNode}
	}
	return out
}

// ResourceRoomOf is a cluster's reported room per resource; nil when it reports none.
func ResourceRoomOf(c *gantry.CapacitySummary) []ResourceRoom {
	if c == nil || len(c.Resources) == 0 {
		return nil
	}
	out := make([]ResourceRoom, len(c.Resources))
	for i, r := range c.Resources {
		out[i] = ResourceRoom{Name: r.Name, Allocatable: r.Allocatable.MilliValue(), Free: r.Free.MilliValue(),
			LargestFreeOnNode: r.LargestFreeOnNode.MilliValue(), Admitted: AdmittedNotReported}
		if r.Admitted != nil {
			out[i].Admitted = r.Admitted.MilliValue()
		}
	}
	return out
}

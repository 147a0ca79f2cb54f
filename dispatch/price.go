package dispatch

import (
	"maps"
	"math"

	corev1 "k8s.io/api/core/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Price is what an hour of a cluster's GPUs and CPUs costs, read once from its WorkerCluster.
type Price struct {
	// GPU is the price of an hour of one GPU by product; the entry "" prices every product not listed.
	GPU map[string]float64
	// CPU is the price of an hour of one CPU core, when HasCPU.
	CPU    float64
	HasCPU bool
}

// Equal says whether two prices are the same (both nil, or the same prices).
func (p *Price) Equal(o *Price) bool {
	if p == nil || o == nil {
		return p == o
	}
	return maps.Equal(p.GPU, o.GPU) && p.CPU == o.CPU && p.HasCPU == o.HasCPU
}

// PriceOf reads a WorkerCluster's spec.price; nil when it sets none.
func PriceOf(p *gantry.ClusterPrice) *Price {
	if p == nil {
		return nil
	}
	out := &Price{GPU: make(map[string]float64, len(p.GPU))}
	for _, g := range p.GPU {
		out.GPU[g.Product] = g.PerHour.Value()
	}
	if p.CPU != nil {
		out.CPU, out.HasCPU = p.CPU.Value(), true
	}
	return out
}

// PerGPUHour is the price of an hour of one GPU of the product; NaN when the cluster prices none.
func (p *Price) PerGPUHour(product string) float64 {
	if p == nil {
		return math.NaN()
	}
	if v, ok := p.GPU[product]; ok {
		return v
	}
	if v, ok := p.GPU[""]; ok {
		return v
	}
	return math.NaN()
}

// PerHour is what the workload would cost for an hour on the cluster: its GPUs at the price of the
// product it would get there (GPUPriceThere), and its CPU cores at the CPU price where the cluster sets
// one. NaN when the cluster sets no price, or prices none of the GPUs the workload would get: it would
// seem cheap for what it does not say.
func (c Cluster) PerHour(w *Workload) float64 {
	if c.Price == nil {
		return math.NaN()
	}
	var cost float64
	if w.GPU.Total > 0 {
		cost += float64(w.GPU.Total) * c.GPUPriceThere(w.GPU)
	}
	if cpu := w.Requests[corev1.ResourceCPU]; cpu > 0 && c.Price.HasCPU {
		cost += float64(cpu) / 1000 * c.Price.CPU
	}
	return cost
}

// GPUPriceThere is the price of an hour of one GPU of the demand on the cluster. For a demand that names
// products, that of the first product the cluster's last report has room for, or else of the first the
// cluster prices. For one that names none, that of a GPU without a product named when the cluster sets
// it, or else of its dearest product reported: the agent may place it on any.
func (c Cluster) GPUPriceThere(d GPUDemand) float64 {
	if len(d.Products) > 0 {
		if r := c.ProductRank(d); c.GPUs != nil && r < len(d.Products) {
			return c.Price.PerGPUHour(d.Products[r])
		}
		for _, p := range d.Products {
			if v := c.Price.PerGPUHour(p); !math.IsNaN(v) {
				return v
			}
		}
		return math.NaN()
	}
	if c.Price == nil {
		return math.NaN()
	}
	if v, ok := c.Price.GPU[""]; ok {
		return v
	}
	dearest, priced := 0.0, false
	for _, g := range c.GPUs {
		if v := c.Price.PerGPUHour(g.Product); !math.IsNaN(v) {
			dearest, priced = max(dearest, v), true
		}
	}
	if !priced {
		return math.NaN()
	}
	return dearest
}

// MatchedTerms counts the terms of a data location the cluster's labels carry (the NearData score).
func (c Cluster) MatchedTerms(terms []gantry.LabelTerm) int {
	n := 0
	for _, t := range terms {
		if v, ok := c.Labels[t.Key]; ok && v == t.Value {
			n++
		}
	}
	return n
}

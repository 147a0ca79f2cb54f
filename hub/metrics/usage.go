package metrics

import (
	"time"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch/accounting"
)

// usageKey is a series of the GPU-time counters.
type usageKey struct{ namespace, queue, globalQueue, cluster, product string }

// collectUsage exports the GPU-time counters: what each namespace's Usage counts and what its runs add
// that it does not count yet (accounting.Summarize), so that they only grow. Without PerQueue the
// namespace and the Queue are left out (empty), and the series summed over them.
func (c *Collector) collectUsage(objs *objects, now time.Time, emit emitFunc) {
	namespaces := map[string]*accounting.Namespace{}
	clusters := accounting.ClustersOf(objs.clusters)
	at := func(ns string) *accounting.Namespace {
		if namespaces[ns] == nil {
			namespaces[ns] = &accounting.Namespace{Clusters: clusters, Now: now}
		}
		return namespaces[ns]
	}
	for i := range objs.usages {
		at(objs.usages[i].Namespace).Usage = &objs.usages[i].Status
	}
	for i := range objs.workloads {
		if wl := &objs.workloads[i]; len(wl.Status.Runs) > 0 {
			at(wl.Namespace).Workloads = append(at(wl.Namespace).Workloads, wl)
		}
	}
	sums := map[usageKey]*gantry.UsageEntry{}
	for name, ns := range namespaces {
		for _, e := range accounting.Summarize(*ns, time.Time{}) {
			k := usageKey{globalQueue: e.GlobalQueue, cluster: e.Cluster, product: e.GPUProduct}
			if c.src.PerQueue {
				k.namespace, k.queue = name, e.Queue
			}
			sum := sums[k]
			if sum == nil {
				sum = &gantry.UsageEntry{}
				sums[k] = sum
			}
			sum.Add(e)
		}
	}
	for k, e := range sums {
		labels := []string{k.namespace, k.queue, k.globalQueue, k.cluster, k.product}
		emit(gpuSecondsDesc, float64(e.GPUSeconds), labels...)
		emit(borrowedGPUSecondsDesc, float64(e.BorrowedGPUSeconds), labels...)
		emit(lostGPUSecondsDesc, float64(e.LostGPUSeconds), labels...)
		if e.Cost != "" {
			emit(gpuCostDesc, float64(e.Cost.Micros())/1e6, labels...)
			emit(lostGPUCostDesc, float64(e.LostCost.Micros())/1e6, labels...)
		}
	}
}

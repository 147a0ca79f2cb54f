package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// The GPU-time counters add what the namespaces' Usages count and their runs not counted yet (a running
// one up to now), summed over namespaces and Queues unless the operator exports per Queue.
func TestCollectUsage(t *testing.T) {
	usage := func(ns string, gpuSeconds int64) gantry.Usage {
		return gantry.Usage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gantry.UsageName}, Status: gantry.UsageStatus{
			Totals: []gantry.UsageEntry{{Queue: "q", GlobalQueue: "gpu", Cluster: "w1", GPUProduct: "A100", GPUSeconds: gpuSeconds, LostGPUSeconds: 100, Cost: "1.5", LostCost: "0.5"}}}}
	}
	running := gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "r"}, Spec: gantry.WorkloadSpec{QueueName: "q"},
		Status: gantry.WorkloadStatus{Runs: []gantry.Run{{Cluster: "w1", Epoch: 1, GlobalQueue: "gpu", GPUs: 2, GPUProduct: "A100",
			Borrowed: true, Started: metav1.NewTime(now.Add(-time.Minute))}}}}
	objs := objects{usages: []gantry.Usage{usage("a", 1000), usage("b", 2000)}, workloads: []gantry.Workload{running}}
	counters := func(samples ...string) string {
		var b strings.Builder
		last := ""
		for _, s := range samples {
			if name := s[:strings.Index(s, "{")]; name != last {
				fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n", name, helps[name], name)
				last = name
			}
			b.WriteString(s + "\n")
		}
		return b.String()
	}
	names := []string{"gantry_hub_gpu_seconds_total", "gantry_hub_borrowed_gpu_seconds_total", "gantry_hub_lost_gpu_seconds_total", "gantry_hub_gpu_cost_total"}
	sum := counters(`gantry_hub_gpu_seconds_total{cluster="w1",global_queue="gpu",namespace="",product="A100",queue=""} 3120`,
		`gantry_hub_borrowed_gpu_seconds_total{cluster="w1",global_queue="gpu",namespace="",product="A100",queue=""} 120`,
		`gantry_hub_lost_gpu_seconds_total{cluster="w1",global_queue="gpu",namespace="",product="A100",queue=""} 200`,
		`gantry_hub_gpu_cost_total{cluster="w1",global_queue="gpu",namespace="",product="A100",queue=""} 3`)
	if err := testutil.CollectAndCompare(NewCollector(sourceOf(objs)), strings.NewReader(sum), names...); err != nil {
		t.Error(err)
	}
	src := sourceOf(objs)
	src.PerQueue = true
	perQueue := counters(`gantry_hub_gpu_seconds_total{cluster="w1",global_queue="gpu",namespace="a",product="A100",queue="q"} 1000`,
		`gantry_hub_gpu_seconds_total{cluster="w1",global_queue="gpu",namespace="b",product="A100",queue="q"} 2120`)
	if err := testutil.CollectAndCompare(NewCollector(src), strings.NewReader(perQueue), "gantry_hub_gpu_seconds_total"); err != nil {
		t.Error(err)
	}
}

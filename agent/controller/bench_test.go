package controller

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/agent/admission"
	"github.com/gantry-dev/gantry/agent/agenttest"
)

// cluster5000 is a worker of 5,000 GPU nodes (two products, 50 racks), 4 running pods a node, and 500
// copies: 250 admitted and 250 waiting. The nodes carry the labels and conditions real nodes do, so that
// the memory measured is close to what the agent's node and pod caches hold.
func cluster5000() Input {
	in := Input{Jobs: map[types.NamespacedName]client.Object{}, Placements: map[types.UID]admission.Placement{}, Now: now}
	for i := range 5000 {
		product := "NVIDIA-A100-SXM4-80GB"
		if i%2 == 1 {
			product = "NVIDIA-H100-80GB-HBM3"
		}
		n := agenttest.MakeNode(fmt.Sprintf("node-%04d", i)).
			Allocatable("cpu", "128", "memory", "1Ti", "ephemeral-storage", "2Ti").GPUs(8, product).
			Label("topology.kubernetes.io/zone", fmt.Sprintf("zone-%d", i%3)).
			Label("example.com/rack", fmt.Sprintf("rack-%02d", i%50)).
			Label("kubernetes.io/arch", "amd64").Label("kubernetes.io/os", "linux").
			Label("node.kubernetes.io/instance-type", "gpu-8x").Label("nvidia.com/gpu.count", "8").Obj()
		n.Status.Capacity = n.Status.Allocatable.DeepCopy()
		for _, t := range []corev1.NodeConditionType{"MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"} {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse,
				Reason: "KubeletHasSufficient" + string(t), Message: "kubelet has sufficient resources"})
		}
		in.Nodes = append(in.Nodes, n)
		for j := range 4 {
			in.Pods = append(in.Pods, gpuPod(fmt.Sprintf("p-%04d-%d", i, j), fmt.Sprintf("other-%d", i), "1").
				Node(n.Name).Phase(corev1.PodRunning).Obj())
		}
	}
	for i := range 500 {
		c := copyOf(fmt.Sprintf("c-%03d", i), i, int32(1+i%16), "8")
		if i < 250 {
			c = c.Admitted()
		}
		in.Copies = append(in.Copies, c.Obj())
	}
	return in
}

// BenchmarkDecidePass5000Nodes is one admission pass of the agent over a 5,000-node cluster. It reports
// the heap the cluster's objects take (what the agent's caches hold) and the pass's own allocations.
func BenchmarkDecidePass5000Nodes(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	in := cluster5000()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		plan := Decide(in)
		if len(plan.Updates) == 0 {
			b.Fatal("the pass decided nothing")
		}
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "cluster-MiB") // after ResetTimer, which drops metrics
	runtime.KeepAlive(in)
}

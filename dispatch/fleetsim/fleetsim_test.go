package fleetsim

import (
	"testing"
	"time"

	"github.com/gantry-dev/gantry/dispatch"
)

func queue(name string, clusters ...Cluster) *dispatch.GlobalQueue {
	q := &dispatch.GlobalQueue{Name: name, MaxCandidates: 2, Quota: map[string]dispatch.Resources{}}
	for _, c := range clusters {
		q.Clusters = append(q.Clusters, c.Name)
		q.Quota[c.Name] = dispatch.Resources{"nvidia.com/gpu": int64(c.Nodes*c.GPUsPerNode) * 1000}
	}
	return q
}

// A gang that does not fit beside a running one starts when that one ends, on the cluster that frees;
// a job whose pods no node of one cluster can hold waits for the other.
func TestRunPlaysJobsThroughPlan(t *testing.T) {
	small := Cluster{Name: "small", Nodes: 1, GPUsPerNode: 4, Product: "A100", Price: &dispatch.Price{GPU: map[string]float64{"A100": 2}}}
	big := Cluster{Name: "big", Nodes: 2, GPUsPerNode: 8, Product: "H100"}
	fleet := Fleet{Clusters: []Cluster{small, big}, Queues: []*dispatch.GlobalQueue{queue("q", small, big)}}
	trace := []Job{
		{Name: "first", Queue: "q", Run: 10 * time.Minute, Pods: 2, GPUsPerPod: 8},
		{Name: "second", Queue: "q", Arrive: time.Minute, Run: 5 * time.Minute, Pods: 1, GPUsPerPod: 8},
		{Name: "third", Queue: "q", Arrive: 2 * time.Minute, Run: 30 * time.Minute, Pods: 1, GPUsPerPod: 4},
	}
	got := Run(fleet, trace, Options{})
	if len(got) != 3 {
		t.Fatalf("outcomes %+v", got)
	}
	first, second, third := got[0], got[1], got[2]
	if first.Cluster != "big" || first.Started > 5*time.Second || first.Ended != first.Started+10*time.Minute {
		t.Errorf("first: %+v; want on big at once, for 10m", first)
	}
	if second.Cluster != "big" || second.Started < first.Ended || second.Started > first.Ended+5*time.Second {
		t.Errorf("second: %+v; want on big once first ended at %v", second, first.Ended)
	}
	if third.Cluster != "small" || third.Wait() > 5*time.Second {
		t.Errorf("third: %+v; want on small at once", third)
	}
	if want := 0.5 * 4 * 2; third.Cost < want*0.99 || third.Cost > want*1.01 || third.GPUHours < 1.99 || third.GPUHours > 2.01 {
		t.Errorf("third: cost %.3f, GPU-hours %.3f; want %.1f and 2", third.Cost, third.GPUHours, want)
	}
}

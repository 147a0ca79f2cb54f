package dispatch

import (
	"fmt"
	"testing"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// WhatIf says where a job submitted now would go, why each other cluster would not take it, what it
// would preempt, and leaves the snapshot as it was.
func TestWhatIf(t *testing.T) {
	queue := makeQueue("q").maxCandidates(1).quota("a", "nvidia.com/gpu", 8).quota("b", "nvidia.com/gpu", 16).
		preempts(lower, never, never).obj()
	s := makeSnapshot().cluster("a", "b").queue(queue).gpuFree("b", "A100", 2, 2).workloads(
		makeWorkload("ns/running", "q").gpus(8).admittedOn("a").obj(),
		makeWorkload("ns/waiting", "q").gpus(4).createdAt(1).obj()).obj()
	s.Now = t0.Add(60e9)
	before := fmt.Sprintf("%+v", s.Workloads)

	p := WhatIf(s, makeWorkload("ns/ask", "q").gpuPods(1, 4).obj())
	if p.Nomination != nil || p.Verdict == nil || p.Verdict.Reason != gantry.ReasonWaitingForCapacity {
		t.Errorf("nomination %+v, verdict %+v; want it waiting for capacity", p.Nomination, p.Verdict)
	}
	if p.Position != 1 || p.Pending != 2 || p.AheadOfShape != 1 {
		t.Errorf("position %d of %d, %d of its shape ahead; want first of 2 (created before ns/waiting)", p.Position, p.Pending, p.AheadOfShape)
	}
	if len(p.Clusters) != 2 {
		t.Fatalf("clusters %+v", p.Clusters)
	}
	a, b := p.Clusters[0], p.Clusters[1]
	if a.Name != "a" || a.LeftOut != gantry.ReasonWaitingForQuota || a.Used["nvidia.com/gpu"] != 8000 || a.Quota["nvidia.com/gpu"] != 8000 || a.WithinQuota {
		t.Errorf("a: %+v; want left out for quota, 8 of 8 used", a)
	}
	if b.Name != "b" || b.LeftOut != gantry.ReasonWaitingForCapacity || !b.WithinQuota || len(b.GPUs) != 1 {
		t.Errorf("b: %+v; want left out for capacity (2 GPUs free), within quota", b)
	}
	if _, ok := a.Scores["Headroom"]; !ok {
		t.Errorf("no Headroom score: %+v", a.Scores)
	}

	if after := fmt.Sprintf("%+v", s.Workloads); after != before || len(s.Workloads) != 2 {
		t.Errorf("the snapshot changed:\n%s\n%s", before, after)
	}

	// Where only a has the GPUs, a job of higher priority would preempt what runs there.
	onA := makeQueue("q").quota("a", "nvidia.com/gpu", 8).preempts(lower, never, never).obj()
	p = WhatIf(makeSnapshot().cluster("a").queue(onA).workloads(makeWorkload("ns/running", "q").gpus(8).admittedOn("a").obj()).obj(),
		makeWorkload("ns/urgent", "q").gpus(8).priority(10).obj())
	if len(p.Preemptions) != 1 || p.Preemptions[0].Victim != "ns/running" || p.Preemptions[0].Cluster != "a" {
		t.Errorf("preemptions %+v; want ns/running on a", p.Preemptions)
	}

	p = WhatIf(makeSnapshot().cluster("a", "b").queue(queue).obj(), makeWorkload("ns/fits", "q").gpus(4).obj())
	if p.Nomination == nil || len(p.Nomination.Clusters) != 1 || p.Verdict != nil {
		t.Errorf("on an empty fleet: nomination %+v, verdict %+v", p.Nomination, p.Verdict)
	}
}

// BenchmarkWhatIf10kWorkloads100Clusters: one prediction over the fleet of
// BenchmarkPlan10kWorkloads100Clusters costs about one pass (32 ms against 30 ms on this machine).
func BenchmarkWhatIf10kWorkloads100Clusters(b *testing.B) {
	s := benchSnapshot(10, Resources{"nvidia.com/gpu": 64_000, "cpu": 512_000, "memory": 4 << 40 * 1000}, nil)
	ask := makeWorkload("ns/ask", s.Workloads[0].GlobalQueue).gpus(8).obj()
	b.ReportAllocs()
	for b.Loop() {
		WhatIf(s, ask)
	}
}

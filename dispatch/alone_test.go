package dispatch

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func TestFitsAlone(t *testing.T) {
	cluster := func(rooms ...ResourceRoom) *Cluster { return &Cluster{Name: "a", Resources: rooms} }
	cpu := func(alloc, free, largest int64) ResourceRoom {
		return ResourceRoom{Name: "cpu", Allocatable: alloc * 1000, Free: free * 1000, LargestFreeOnNode: largest * 1000, Admitted: AdmittedNotReported}
	}
	cases := map[string]struct {
		w      *Workload
		c      *Cluster
		flying Resources
		want   bool
	}{
		"room beyond the margin":              {w: makeWorkload("ns/w", "q").cpu(10).obj(), c: cluster(cpu(100, 60, 20)), want: true},
		"exactly the margin left":             {w: makeWorkload("ns/w", "q").cpu(10).obj(), c: cluster(cpu(100, 20, 20)), want: true},
		"less than the margin left":           {w: makeWorkload("ns/w", "q").cpu(10).obj(), c: cluster(cpu(100, 19, 20)), want: false},
		"copies in flight take the room":      {w: makeWorkload("ns/w", "q").cpu(10).obj(), c: cluster(cpu(100, 60, 20)), flying: Resources{"cpu": 41000}, want: false},
		"in flight elsewhere is no matter":    {w: makeWorkload("ns/w", "q").cpu(10).obj(), c: cluster(cpu(100, 60, 20)), flying: Resources{"memory": 1 << 40}, want: true},
		"larger than any node's free":         {w: makeWorkload("ns/w", "q").cpu(30).obj(), c: cluster(cpu(100, 90, 20)), want: false},
		"a resource the report does not name": {w: makeWorkload("ns/w", "q").cpu(1).gpus(1).obj(), c: cluster(cpu(100, 90, 20)), want: false},
		"no report":                           {w: makeWorkload("ns/w", "q").cpu(1).obj(), c: cluster(), want: false},
		"no requests":                         {w: makeWorkload("ns/w", "q").obj(), c: cluster(cpu(100, 90, 20)), want: false},
		"GPU products named": {w: makeWorkload("ns/w", "q").gpuPods(1, 1, "H100").obj(),
			c: cluster(ResourceRoom{Name: "nvidia.com/gpu", Allocatable: 32000, Free: 32000, LargestFreeOnNode: 8000}), want: false},
		"GPUs of any product": {w: makeWorkload("ns/w", "q").gpuPods(1, 1).obj(),
			c: cluster(ResourceRoom{Name: "nvidia.com/gpu", Allocatable: 32000, Free: 32000, LargestFreeOnNode: 8000}), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := fitsAlone(tc.w, tc.c, tc.flying); got != tc.want {
				t.Errorf("fitsAlone = %v, want %v", got, tc.want)
			}
		})
	}
}

// A queue that sends copies to maxCandidates clusters sends a workload to its best cluster alone while
// that one's report has room for it with the margin, counting the copies in flight there; otherwise to
// maxCandidates. A workload sent alone whose copy waits goes wide.
func TestAWorkloadGoesAloneWhereItHasRoom(t *testing.T) {
	queue := func() *GlobalQueue {
		return makeQueue("q").quota("a", "cpu", 1000).quota("b", "cpu", 1000).obj()
	}
	roomy := func() *snapshotBuilder {
		return makeSnapshot().cluster("a", "b").room("a", "cpu", 100, 100, 50).room("b", "cpu", 100, 100, 50).queue(queue())
	}
	job := func(key string, sec int) *workloadBuilder { return makeWorkload(key, "q").cpu(40).createdAt(sec) }
	cases := map[string]struct {
		snapshot *Snapshot
		want     []Nomination
		verdicts []Verdict
	}{
		"alone where the report has room": {
			snapshot: roomy().workloads(job("ns/j", 1).obj()).obj(),
			want:     []Nomination{{Key: "ns/j", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}, Reach: ReachAlone}},
		},
		"to both where the best has too little": {
			snapshot: makeSnapshot().cluster("a", "b").room("a", "cpu", 100, 45, 45).room("b", "cpu", 100, 45, 45).queue(queue()).
				workloads(job("ns/j", 1).obj()).obj(),
			want: []Nomination{{Key: "ns/j", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a", "b"}, Reach: ReachCandidates}},
		},
		"to both without reports": {
			snapshot: makeSnapshot().cluster("a", "b").queue(queue()).workloads(job("ns/j", 1).obj()).obj(),
			want:     []Nomination{{Key: "ns/j", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a", "b"}, Reach: ReachCandidates}},
		},
		"a burst counts what the pass sent": {
			snapshot: roomy().workloads(job("ns/1", 1).obj(), job("ns/2", 2).obj(), job("ns/3", 3).obj(), job("ns/4", 4).obj(),
				job("ns/5", 5).obj()).obj(),
			want: []Nomination{
				{Key: "ns/1", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}, Reach: ReachAlone},
				{Key: "ns/2", Epoch: 1, GlobalQueue: "q", Clusters: []string{"b"}, Reach: ReachAlone},
				{Key: "ns/3", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}, Reach: ReachAlone},
				{Key: "ns/4", Epoch: 1, GlobalQueue: "q", Clusters: []string{"b"}, Reach: ReachAlone},
				{Key: "ns/5", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a", "b"}, Reach: ReachCandidates},
			},
		},
		"nominated workloads are in flight": {
			snapshot: roomy().workloads(job("ns/old-a", 1).cpu(45).nominated(1, "a").obj(), job("ns/old-b", 2).cpu(45).nominated(1, "b").obj(),
				makeWorkload("ns/new", "q").cpu(50).createdAt(3).obj()).obj(),
			want: []Nomination{{Key: "ns/new", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a", "b"}, Reach: ReachCandidates}},
		},
		"a copy sent alone that waits goes wide": {
			snapshot: roomy().workloads(job("ns/j", 1).nominated(1, "a").copyWaiting("a", "InsufficientResources", "no room").obj()).obj(),
			want:     []Nomination{{Key: "ns/j", Epoch: 2, GlobalQueue: "q", Clusters: []string{"a", "b"}, Reach: ReachWidened}},
		},
		"nowhere wider: it waits where it is, told why": {
			snapshot: roomy().cordoned("b").workloads(job("ns/j", 1).nominated(1, "a").copyWaiting("a", "InsufficientResources", "no room").obj()).obj(),
			verdicts: []Verdict{{Key: "ns/j", Reason: gantry.ReasonWaitingForAdmission,
				Message: "waiting for a to admit; a: InsufficientResources: no room"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res := Plan(tc.snapshot)
			if diff := cmp.Diff(tc.want, res.Nominations); diff != "" {
				t.Errorf("nominations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.verdicts, res.Verdicts); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
		})
	}
}

// What a cluster's report does not count yet is taken there: the workloads won there beyond what the
// report says its admitted copies ask for. a ranks first (b's quota is half used), and its report shows
// room for the new job alone unless the old one, won on a, is not in it.
func TestWhatTheReportDoesNotCountIsTaken(t *testing.T) {
	snapshot := func(admitted int) *Snapshot {
		b := makeSnapshot().cluster("a", "b").room("a", "cpu", 100, 100, 50).room("b", "cpu", 100, 100, 50).
			queue(makeQueue("q").quota("a", "cpu", 1000).quota("b", "cpu", 1000).obj()).
			workloads(makeWorkload("ns/old", "q").cpu(55).createdAt(1).admittedOn("a").obj(),
				makeWorkload("ns/busy", "q").cpu(500).createdAt(1).admittedOn("b").obj(),
				makeWorkload("ns/new", "q").cpu(40).createdAt(2).obj())
		if admitted >= 0 {
			b = b.admittedReported("a", "cpu", admitted)
		}
		return b.obj()
	}
	cases := map[string]struct {
		admitted int // -1: not reported
		want     Nomination
	}{
		"won since the report: not alone":           {admitted: 0, want: Nomination{Clusters: []string{"a", "b"}, Reach: ReachCandidates}},
		"won before the report: alone":              {admitted: 55, want: Nomination{Clusters: []string{"a"}, Reach: ReachAlone}},
		"more in the report, finished since: alone": {admitted: 80, want: Nomination{Clusters: []string{"a"}, Reach: ReachAlone}},
		"part of it since the report: not alone":    {admitted: 1, want: Nomination{Clusters: []string{"a", "b"}, Reach: ReachCandidates}},
		"an agent that does not say: the margin":    {admitted: -1, want: Nomination{Clusters: []string{"a"}, Reach: ReachAlone}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want := tc.want
			want.Key, want.Epoch, want.GlobalQueue = "ns/new", 1, "q"
			if diff := cmp.Diff([]Nomination{want}, Plan(snapshot(tc.admitted)).Nominations); diff != "" {
				t.Errorf("nominations (-want +got):\n%s", diff)
			}
		})
	}
}

package accounting

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

var t0 = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }

// run is a run of gpus GPUs on w1 in the epoch, from start to end (nil: still running).
func run(epoch, gpus int64, start time.Duration, end *metav1.Time) gantry.Run {
	return gantry.Run{Cluster: "w1", Epoch: epoch, GlobalQueue: "gq", GPUs: gpus, Started: metav1.Time{Time: t0.Add(start)}, Ended: end, Outcome: gantry.ReasonJobSucceeded}
}

func workloadWith(uid string, accounted int64, runs ...gantry.Run) *gantry.Workload {
	wl := &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)},
		Spec: gantry.WorkloadSpec{QueueName: "q"}}
	wl.Status.Runs, wl.Status.AccountedEpoch = runs, accounted
	return wl
}

var fleet = map[string]Cluster{"w1": {Price: &dispatch.Price{GPU: map[string]float64{"A100": 2.5}}, Products: []string{"A100"}}}

func entry(gpuSeconds int64, cost gantry.Amount) gantry.UsageEntry {
	return gantry.UsageEntry{Queue: "q", GlobalQueue: "gq", Cluster: "w1", GPUProduct: "A100", GPUSeconds: gpuSeconds, Cost: cost}
}

func TestAccount(t *testing.T) {
	lost := run(1, 4, 0, at(30*time.Minute))
	lost.TakenBack, lost.Borrowed, lost.Outcome = true, true, gantry.ReasonPreempted
	deleting := func(wl *gantry.Workload, finalizers ...string) *gantry.Workload {
		wl.DeletionTimestamp, wl.Finalizers = at(time.Hour), finalizers
		return wl
	}
	cases := map[string]struct {
		ns        Namespace
		want      *gantry.UsageStatus
		wantMarks map[types.UID]int64
		release   []types.UID
	}{
		"a closed run is counted, priced, in flight until its Workload says so": {
			ns: Namespace{Workloads: []*gantry.Workload{workloadWith("a", 0, run(1, 2, 0, at(time.Hour)))}},
			want: &gantry.UsageStatus{Totals: []gantry.UsageEntry{entry(7200, "5")},
				Days:     []gantry.DayUsage{{Day: "2026-12-07", Entries: []gantry.UsageEntry{entry(7200, "5")}}},
				InFlight: []gantry.AccountedRuns{{WorkloadUID: "a", Epoch: 1}}},
			wantMarks: map[types.UID]int64{"a": 1},
		},
		"a running run is not counted yet": {
			ns:   Namespace{Workloads: []*gantry.Workload{workloadWith("a", 0, run(1, 2, 0, nil))}},
			want: &gantry.UsageStatus{},
		},
		"a run over midnight is split between its days": {
			ns: Namespace{Workloads: []*gantry.Workload{workloadWith("a", 0, run(1, 1, 13*time.Hour, at(16*time.Hour)))}},
			want: &gantry.UsageStatus{Totals: []gantry.UsageEntry{entry(3*3600, "7.5")},
				Days: []gantry.DayUsage{{Day: "2026-12-07", Entries: []gantry.UsageEntry{entry(3600, "2.5")}},
					{Day: "2026-12-08", Entries: []gantry.UsageEntry{entry(2*3600, "5")}}},
				InFlight: []gantry.AccountedRuns{{WorkloadUID: "a", Epoch: 1}}},
			wantMarks: map[types.UID]int64{"a": 1},
		},
		"a run taken back is lost; a borrowing one borrowed": {
			ns: Namespace{Workloads: []*gantry.Workload{workloadWith("a", 0, lost, run(2, 4, time.Hour, nil))}},
			want: &gantry.UsageStatus{Totals: []gantry.UsageEntry{{Queue: "q", GlobalQueue: "gq", Cluster: "w1", GPUProduct: "A100",
				GPUSeconds: 7200, BorrowedGPUSeconds: 7200, LostGPUSeconds: 7200, Cost: "5", LostCost: "5"}},
				Days: []gantry.DayUsage{{Day: "2026-12-07", Entries: []gantry.UsageEntry{{Queue: "q", GlobalQueue: "gq", Cluster: "w1", GPUProduct: "A100",
					GPUSeconds: 7200, BorrowedGPUSeconds: 7200, LostGPUSeconds: 7200, Cost: "5", LostCost: "5"}}}},
				InFlight: []gantry.AccountedRuns{{WorkloadUID: "a", Epoch: 1}}},
			wantMarks: map[types.UID]int64{"a": 1},
		},
		"a run taken back loses only what it did since its last checkpoint": {
			ns: Namespace{Workloads: []*gantry.Workload{func() *gantry.Workload {
				r := run(1, 4, 0, at(50*time.Minute))
				r.TakenBack, r.Checkpointed = true, at(40*time.Minute)
				return workloadWith("a", 0, r)
			}(), func() *gantry.Workload { // every 15 minutes: saved at 45
				r := run(1, 4, 0, at(50*time.Minute))
				r.TakenBack = true
				wl := workloadWith("b", 0, r)
				wl.Spec.CheckpointInterval = &metav1.Duration{Duration: 15 * time.Minute}
				return wl
			}()}},
			want: &gantry.UsageStatus{Totals: []gantry.UsageEntry{{Queue: "q", GlobalQueue: "gq", Cluster: "w1", GPUProduct: "A100",
				GPUSeconds: 2 * 4 * 3000, LostGPUSeconds: 4*600 + 4*300, Cost: "16.666666", LostCost: "2.5"}},
				Days: []gantry.DayUsage{{Day: "2026-12-07", Entries: []gantry.UsageEntry{{Queue: "q", GlobalQueue: "gq", Cluster: "w1", GPUProduct: "A100",
					GPUSeconds: 2 * 4 * 3000, LostGPUSeconds: 4*600 + 4*300, Cost: "16.666666", LostCost: "2.5"}}}},
				InFlight: []gantry.AccountedRuns{{WorkloadUID: "a", Epoch: 1}, {WorkloadUID: "b", Epoch: 1}}},
			wantMarks: map[types.UID]int64{"a": 1, "b": 1},
		},
		"in flight, not marked yet: marked again, not counted again": {
			ns: Namespace{Usage: &gantry.UsageStatus{Totals: []gantry.UsageEntry{entry(7200, "5")}, InFlight: []gantry.AccountedRuns{{WorkloadUID: "a", Epoch: 1}}},
				Workloads: []*gantry.Workload{workloadWith("a", 0, run(1, 2, 0, at(time.Hour)))}},
			want:      nil,
			wantMarks: map[types.UID]int64{"a": 1},
		},
		"marked: forgotten in flight": {
			ns: Namespace{Usage: &gantry.UsageStatus{Totals: []gantry.UsageEntry{entry(7200, "5")}, InFlight: []gantry.AccountedRuns{{WorkloadUID: "a", Epoch: 1}}},
				Workloads: []*gantry.Workload{workloadWith("a", 1, run(1, 2, 0, at(time.Hour)))}},
			want: &gantry.UsageStatus{Totals: []gantry.UsageEntry{entry(7200, "5")}},
		},
		"a Workload gone: forgotten in flight": {
			ns:   Namespace{Usage: &gantry.UsageStatus{InFlight: []gantry.AccountedRuns{{WorkloadUID: "gone", Epoch: 3}}}},
			want: &gantry.UsageStatus{},
		},
		"a deleted Workload goes once counted and let go by its controller": {
			ns: Namespace{Usage: &gantry.UsageStatus{}, Workloads: []*gantry.Workload{
				deleting(workloadWith("done", 1, run(1, 2, 0, at(time.Hour))), gantry.UsageFinalizer),
				deleting(workloadWith("held", 1, run(1, 2, 0, at(time.Hour))), gantry.UsageFinalizer, gantry.WorkloadFinalizer),
				deleting(workloadWith("never-ran", 0), gantry.UsageFinalizer)}},
			release: []types.UID{"done", "never-ran"},
		},
		"days past retention go": { // now is 2026-12-08: 90 days back to 2026-09-10
			ns:   Namespace{Usage: &gantry.UsageStatus{Days: []gantry.DayUsage{{Day: "2026-09-09"}, {Day: "2026-09-10"}}}},
			want: &gantry.UsageStatus{Days: []gantry.DayUsage{{Day: "2026-09-10"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.ns.Clusters, tc.ns.Now = fleet, t0.Add(24*time.Hour)
			p := Account(tc.ns)
			if diff := cmp.Diff(tc.want, p.Usage, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMarks, p.Marks, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("marks (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.release, p.Release, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("release (-want +got):\n%s", diff)
			}
		})
	}
}

// Summarize adds to what the Usage counts the runs it does not count yet, up to now; a run moving into
// the Usage's count changes nothing of the sum, and days before since are left out.
func TestSummarize(t *testing.T) {
	now := t0.Add(3 * time.Hour)
	wl := workloadWith("a", 0, run(1, 2, 0, at(time.Hour)), run(2, 1, 2*time.Hour, nil))
	ns := Namespace{Workloads: []*gantry.Workload{wl}, Clusters: fleet, Now: now}
	want := []gantry.UsageEntry{entry(7200+3600, "7.5")}
	if diff := cmp.Diff(want, Summarize(ns, time.Time{})); diff != "" {
		t.Fatalf("nothing counted yet (-want +got):\n%s", diff)
	}
	for step := range 2 { // the Usage counts the closed run; then the Workload says so
		p := Account(ns)
		if p.Usage != nil {
			ns.Usage = p.Usage
		}
		for uid, e := range p.Marks {
			if uid == wl.UID {
				wl.Status.AccountedEpoch = e
			}
		}
		if diff := cmp.Diff(want, Summarize(ns, time.Time{})); diff != "" {
			t.Fatalf("after step %d (-want +got):\n%s", step, diff)
		}
	}
	ns.Usage.Days = append([]gantry.DayUsage{{Day: "2026-12-01", Entries: []gantry.UsageEntry{entry(100, "1")}}}, ns.Usage.Days...)
	ns.Usage.Totals[0].GPUSeconds += 100
	if got := Summarize(ns, t0.Add(-24*time.Hour)); len(got) != 1 || got[0].GPUSeconds != 7200+3600 {
		t.Errorf("since the day before: %+v, want the runs of today only", got)
	}
	if got := Summarize(ns, time.Time{}); len(got) != 1 || got[0].GPUSeconds != 7200+3600+100 {
		t.Errorf("all: %+v, want the totals", got)
	}
}

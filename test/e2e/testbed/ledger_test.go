package testbed

import (
	"strings"
	"testing"
	"time"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestCheckOneRun(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pod := func(cluster, epoch, name string, s int, node string, phase corev1.PodPhase, deleted bool) PodRecord {
		return PodRecord{Cluster: cluster, Epoch: epoch, Name: name, WorkloadUID: "w", NodeName: node, Phase: phase,
			Deleted: deleted, Seen: t0.Add(time.Duration(s) * time.Second)}
	}
	cases := map[string]struct {
		pods []PodRecord
		want string
	}{
		"one run": {pods: []PodRecord{
			pod("w1", "1", "a", 0, "", corev1.PodPending, false),
			pod("w1", "1", "a", 1, "n1", corev1.PodRunning, false),
			pod("w1", "1", "a", 2, "n1", corev1.PodSucceeded, false),
		}},
		"evicted, then run elsewhere": {pods: []PodRecord{
			pod("w1", "1", "a", 0, "n1", corev1.PodRunning, false),
			pod("w1", "1", "a", 1, "n1", corev1.PodRunning, true),
			pod("w2", "2", "b", 2, "n2", corev1.PodRunning, false),
		}},
		"two places at once": {pods: []PodRecord{
			pod("w1", "1", "a", 0, "n1", corev1.PodRunning, false),
			pod("w2", "2", "b", 1, "n2", corev1.PodRunning, false),
			pod("w1", "1", "a", 2, "n1", corev1.PodRunning, true),
		}, want: "live on w2 in epoch 2 while 1 pod(s) live on w1"},
		"unbound pods of another epoch do not run": {pods: []PodRecord{
			pod("w1", "1", "a", 0, "n1", corev1.PodRunning, false),
			pod("w2", "2", "b", 1, "", corev1.PodPending, false),
		}},
		"completed twice": {pods: []PodRecord{
			pod("w1", "1", "a", 0, "n1", corev1.PodSucceeded, false),
			pod("w2", "2", "b", 1, "n2", corev1.PodSucceeded, false),
		}, want: "ran to completion in 2 places"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := CheckOneRun(tc.pods)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected breach: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckQuota(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pod := func(cluster, name string, s int, gpus int64, phase corev1.PodPhase, deleted bool) PodRecord {
		return PodRecord{Cluster: cluster, Name: name, WorkloadUID: name, NodeName: "n", Phase: phase, GPUs: gpus,
			Deleted: deleted, Seen: t0.Add(time.Duration(s) * time.Second)}
	}
	quota := map[string]int64{"w1": 8}
	cases := map[string]struct {
		pods []PodRecord
		want string
	}{
		"within quota, one after another": {pods: []PodRecord{
			pod("w1", "a", 0, 8, corev1.PodRunning, false),
			pod("w1", "a", 1, 8, corev1.PodSucceeded, false),
			pod("w1", "b", 2, 8, corev1.PodRunning, false),
		}},
		"a finished pod frees its GPUs, a deleted one too": {pods: []PodRecord{
			pod("w1", "a", 0, 4, corev1.PodRunning, false),
			pod("w1", "b", 1, 4, corev1.PodRunning, false),
			pod("w1", "a", 2, 4, corev1.PodRunning, true),
			pod("w1", "c", 3, 4, corev1.PodRunning, false),
		}},
		"over quota for an instant": {pods: []PodRecord{
			pod("w1", "a", 0, 4, corev1.PodRunning, false),
			pod("w1", "b", 1, 8, corev1.PodRunning, false),
			pod("w1", "a", 2, 4, corev1.PodSucceeded, false),
		}, want: "w1: live pods use 12 GPUs"},
		"a cluster without quota": {pods: []PodRecord{
			pod("w2", "a", 0, 1, corev1.PodRunning, false),
		}, want: "w2: live pods use 1 GPUs"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := CheckQuota(tc.pods, quota)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected breach: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckHubHistory(t *testing.T) {
	job := func(uid string, terminal batchv1.JobConditionType) HubRecord {
		return HubRecord{Kind: "Job", Namespace: "ns", Name: "j", UID: uid, Terminal: terminal}
	}
	wl := func(epoch int64, winner string) HubRecord {
		return HubRecord{Kind: "Workload", Namespace: "ns", Name: "w", UID: "w1", Epoch: epoch, Winner: winner}
	}
	cases := map[string]struct {
		records []HubRecord
		want    string
	}{
		"a job runs and completes": {records: []HubRecord{job("u", ""), job("u", batchv1.JobComplete), job("u", batchv1.JobComplete)}},
		"completed, then failed": {records: []HubRecord{job("u", batchv1.JobComplete), job("u", batchv1.JobFailed)},
			want: "was Complete, then \"Failed\""},
		"completed, then not finished again": {records: []HubRecord{job("u", batchv1.JobComplete), job("u", "")},
			want: "was Complete, then \"\""},
		"a resubmitted job of the same name is another job": {records: []HubRecord{job("u", batchv1.JobFailed), job("v", batchv1.JobComplete)}},
		"evicted and won elsewhere in a new epoch":          {records: []HubRecord{wl(1, "w1"), wl(1, ""), wl(2, "w2")}},
		"two winners in one epoch": {records: []HubRecord{wl(1, "w1"), wl(1, ""), wl(1, "w2")},
			want: "has winners w1 and w2 in epoch 1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := CheckHubHistory(tc.records)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected breach: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestGangBound(t *testing.T) {
	pod := func(cluster, uid, name, node string, deleted bool) PodRecord {
		return PodRecord{Cluster: cluster, WorkloadUID: uid, Name: name, NodeName: node, Deleted: deleted}
	}
	records := []PodRecord{
		pod("w1", "g", "a", "", false),
		pod("w1", "g", "b", "", false),
		pod("w1", "g", "a", "n1", false),
		pod("w2", "g", "x", "n9", false), // another cluster
		pod("w1", "other", "o", "n2", false),
		pod("w1", "g", "b", "n2", false),
		pod("w1", "g", "a", "n1", true),
	}
	if last, most := GangBound(records, "w1", "g"); last != 1 || most != 2 {
		t.Errorf("GangBound = %d now, %d at most; want 1 and 2", last, most)
	}
	if last, most := GangBound(records[:3], "w1", "g"); last != 1 || most != 1 {
		t.Errorf("GangBound of the first records = %d, %d; want 1 and 1", last, most)
	}
	if last, most := GangBound(records, "w3", "g"); last != 0 || most != 0 {
		t.Errorf("GangBound on a cluster without the gang = %d, %d; want 0 and 0", last, most)
	}
}

// Runs keeps each run of each Workload once, as last written, also when a later write left it out.
func TestRuns(t *testing.T) {
	open := gantry.Run{Cluster: "w1", Epoch: 1, GPUs: 8}
	closed := open
	closed.Outcome, closed.TakenBack = gantry.ReasonPreempted, true
	second := gantry.Run{Cluster: "w2", Epoch: 2, GPUs: 8}
	records := []HubRecord{
		{Kind: "Workload", UID: "a", Queue: "q", Runs: []gantry.Run{open}},
		{Kind: "Workload", UID: "a", Queue: "q", Runs: []gantry.Run{closed, second}},
		{Kind: "Workload", UID: "a", Queue: "q", Runs: []gantry.Run{second}},
		{Kind: "Workload", UID: "b", Queue: "q", Runs: []gantry.Run{open}},
		{Kind: "Job", UID: "j"},
	}
	got := Runs(records)
	want := []LedgerRun{{WorkloadUID: "a", Queue: "q", Run: closed}, {WorkloadUID: "a", Queue: "q", Run: second}, {WorkloadUID: "b", Queue: "q", Run: open}}
	if len(got) != len(want) {
		t.Fatalf("runs %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].WorkloadUID != want[i].WorkloadUID || got[i].Epoch != want[i].Epoch || got[i].Outcome != want[i].Outcome || got[i].TakenBack != want[i].TakenBack {
			t.Errorf("run %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

package view

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	visibility "github.com/gantry-dev/gantry/apis/visibility/v1beta1"
)

// whatIf is a job of 4 GPUs in GlobalQueue gpus of two clusters: worker-1, with room by borrowing, and
// worker-2, out of quota.
func whatIf(change func(w *visibility.WhatIf)) *visibility.WhatIf {
	q := resource.MustParse
	gpus := func(n string) corev1.ResourceList { return corev1.ResourceList{"nvidia.com/gpu": q(n)} }
	w := &visibility.WhatIf{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train"}, JobKind: "Job", Workload: "job-train",
		Queue: "gpu", GlobalQueue: "gpus", Requests: corev1.ResourceList{"cpu": q("8"), "memory": q("32Gi"), "nvidia.com/gpu": q("4")},
		PositionInGlobalQueue: 3, PendingInGlobalQueue: 3,
		Clusters: []visibility.WhatIfCluster{
			{Name: "worker-1", Candidate: true, Quota: gpus("8"), Used: gpus("6"), Ceiling: gpus("12"), PerHour: "4.00", DataTermsMatched: 1,
				Scores: []visibility.WhatIfScore{{Name: "Headroom", Value: "0.5"}, {Name: "Price", Value: "-4"}},
				GPUs:   []visibility.WhatIfGPUs{{Product: "NVIDIA-A100", Allocatable: 8, Free: 6, LargestFreeOnNode: 4}}},
			{Name: "worker-2", Reason: "WaitingForQuota", Quota: corev1.ResourceList{"nvidia.com/gpu": q("8"), "cpu": q("64")},
				Used: gpus("6"), Reserved: gpus("2"), Ceiling: corev1.ResourceList{"nvidia.com/gpu": q("8"), "cpu": q("64")},
				Scores: []visibility.WhatIfScore{{Name: "Headroom", Value: "0"}, {Name: "Price"}},
				GPUs:   []visibility.WhatIfGPUs{{Product: "NVIDIA-H100", Allocatable: 8, Free: 8, LargestFreeOnNode: 8}}},
		}}
	change(w)
	return w
}

const whatIfTable = `
Clusters of GlobalQueue gpus, in its order:
CLUSTER    CANDIDATE             QUOTA cpu     QUOTA nvidia.com/gpu   GPUS FREE                            PER HOUR   DATA   SCORES
worker-1   yes, borrowing        -             6+0/8 ≤ 12             NVIDIA-A100 6 of 8 (4 on one node)   4.00       1      Headroom=0.5 Price=-4
worker-2   no: WaitingForQuota   0+0/64 ≤ 64   6+2/8 ≤ 8              NVIDIA-H100 8 of 8                   -          0      Headroom=0 Price=?
QUOTA: used (admitted workloads) + reserved (nominated ones) / the GlobalQueue's quota ≤ the most it may use there, borrowing included.
borrowing: it would run beyond the GlobalQueue's own quota there, on what its cohort lends.
PER HOUR: what an hour of the job would cost there, at the cluster's prices.
DATA: how many of the job's data location labels the cluster carries.
SCORES: the raw value of each of the GlobalQueue's scores there (? where it knows none); higher ranks first.
`

// whatIfCase changes whatIf's answer and says the text it makes.
type whatIfCase struct {
	change func(w *visibility.WhatIf)
	want   string
}

// whatIfHead are the lines of whatIf's answer above its decision.
const whatIfHead = `Job:        Job team-a/train, as Workload job-train
Queue:      gpu, GlobalQueue gpus; priority 0; position 3 of 3 pending
Requests:   cpu 8, memory 32Gi, nvidia.com/gpu 4
`

func checkWhatIfText(t *testing.T, cases map[string]whatIfCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := WhatIfText(whatIf(tc.change))
			if diff := cmp.Diff(strings.Split(tc.want, "\n"), strings.Split(got, "\n")); diff != "" {
				t.Errorf("text (-want +got):\n%s\ngot:\n%s", diff, got)
			}
		})
	}
}

func TestWhatIfTextDecisions(t *testing.T) {
	minutes := func(n int) *metav1.Duration { return &metav1.Duration{Duration: time.Duration(n) * time.Minute} }
	sixHours := metav1.Duration{Duration: 6 * time.Hour}
	head := whatIfHead
	checkWhatIfText(t, map[string]whatIfCase{
		"dispatched now": {
			change: func(w *visibility.WhatIf) {
				w.Decision, w.Nominated = visibility.DecisionDispatch, []string{"worker-1", "worker-3"}
				// A forecast is for a job that waits.
				w.Forecast = &visibility.StartForecast{Known: true, Likely: minutes(1), Ahead: 1, Window: sixHours}
			},
			want: head + "Decision:   Dispatch now, a copy to each of worker-1, worker-3 (in the queue's order of preference)\n" + whatIfTable,
		},
		"preempting": {
			change: func(w *visibility.WhatIf) {
				w.Decision = visibility.DecisionPreempt
				w.Preemptions = []visibility.WhatIfPreemption{{Namespace: "team-b", Name: "job-x", Cluster: "worker-1"},
					{Namespace: "team-c", Name: "job-y", Cluster: "worker-1"}}
			},
			want: head + `Decision:   Preempt 2 workloads, and be dispatched once they are gone
Preempts:   Workload team-b/job-x on worker-1
            Workload team-c/job-y on worker-1
` + whatIfTable,
		},
		"waiting, with a forecast": {
			change: func(w *visibility.WhatIf) {
				w.Decision, w.Reason, w.Message = visibility.DecisionWait, "WaitingForCapacity", "no cluster has 4 nvidia.com/gpu free on one node"
				w.Forecast = &visibility.StartForecast{Known: true, Early: minutes(4), Likely: minutes(12), Late: minutes(25), Coverage: 80,
					StartsPerHour: "9.5", Ahead: 2, Window: sixHours}
			},
			want: head + `Decision:   Wait (WaitingForCapacity): no cluster has 4 nvidia.com/gpu free on one node
Forecast:   most likely in 12m; 80% likely between 4m and 25m, if the queue goes on as it did
            (GlobalQueue gpus starts 9.5 jobs of 3 to 4 GPUs an hour, as its runs of the last 6h tell; this one is number 2 in line among them)
` + whatIfTable,
		},
		"waiting, with no forecast, the queue having started no job of its size": {
			change: func(w *visibility.WhatIf) {
				w.Decision, w.Reason, w.Message = visibility.DecisionWait, "WaitingForQuota", "waiting for quota of GlobalQueue gpus"
				w.Forecast = &visibility.StartForecast{Ahead: 1, Window: sixHours}
				w.Clusters = []visibility.WhatIfCluster{{Name: "worker-2", Reason: "WaitingForQuota", WithinQuota: false}}
			},
			want: head + `Decision:   Wait (WaitingForQuota): waiting for quota of GlobalQueue gpus
Forecast:   none: GlobalQueue gpus started no job of 3 to 4 GPUs in the last 6h; this one is number 1 in line among them

Clusters of GlobalQueue gpus, in its order:
CLUSTER    CANDIDATE
worker-2   no: WaitingForQuota
`,
		},
	})
}

func TestWhatIfTextOtherAnswers(t *testing.T) {
	head := whatIfHead
	checkWhatIfText(t, map[string]whatIfCase{
		"the jobs of its size each cluster started lately": {
			change: func(w *visibility.WhatIf) {
				w.Decision, w.Nominated = visibility.DecisionDispatch, []string{"worker-1"}
				w.Clusters = []visibility.WhatIfCluster{{Name: "worker-1", Candidate: true, WithinQuota: true, StartedRecently: 2},
					{Name: "worker-2", Reason: "WaitingForCapacity"}}
			},
			want: head + `Decision:   Dispatch to worker-1 now

Clusters of GlobalQueue gpus, in its order:
CLUSTER    CANDIDATE                STARTED
worker-1   yes                      2
worker-2   no: WaitingForCapacity   0
STARTED: the jobs of 3 to 4 GPUs the GlobalQueue started there in the last 6h.
`,
		},
		"a queue that names no GlobalQueue": {
			change: func(w *visibility.WhatIf) {
				w.Name, w.GenerateName = "train-whatif", "train-"
				w.GlobalQueue, w.PositionInGlobalQueue, w.PendingInGlobalQueue, w.Clusters = "", 0, 0, nil
				w.Decision, w.Reason, w.Message = visibility.DecisionWait, "QueueNotFound", "no GlobalQueue"
			},
			want: `Job:        Job team-a/train-<generated>, as Workload job-train
Queue:      gpu (it names no GlobalQueue); priority 0
Requests:   cpu 8, memory 32Gi, nvidia.com/gpu 4
Decision:   Wait (QueueNotFound): no GlobalQueue
`,
		},
	})
}

func TestSizeClass(t *testing.T) {
	for gpus, want := range map[int64]string{0: "without GPUs", 1: "of 1 GPU", 2: "of 2 GPUs", 3: "of 3 to 4 GPUs", 4: "of 3 to 4 GPUs",
		5: "of 5 to 8 GPUs", 8: "of 5 to 8 GPUs", 9: "of 9 to 16 GPUs"} {
		if got := sizeClass(gpus); got != want {
			t.Errorf("sizeClass(%d) = %q, want %q", gpus, got, want)
		}
	}
}

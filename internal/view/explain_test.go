package view

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/jobkind"
)

// fleetFacts: GlobalQueue gpus over w1 (quota 16 GPUs, 8 used, 4 reserved; 24 of 32 A100s free) and w2
// (quota 32 GPUs, nothing used; 2 of 32 H100s free, at most 2 on one node).
func fleetFacts(wl *gantry.Workload) Facts {
	q := resource.MustParse
	connected := []metav1.Condition{
		{Type: gantry.ClusterConnected, Status: "True", Reason: gantry.ReasonConnected},
		{Type: gantry.ClusterAgentReady, Status: "True", Reason: gantry.ReasonAgentReporting}}
	cluster := func(name, product string, free, largest int64) *gantry.WorkerCluster {
		return &gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: gantry.WorkerClusterStatus{
			Conditions: connected, Capacity: &gantry.CapacitySummary{GPUProducts: []gantry.GPUProductCapacity{
				{Product: product, Allocatable: 32, Free: free, LargestFreeOnNode: largest, LargestAllocatableOnNode: 8}}}}}
	}
	qa := queue(wl.Namespace, wl.Spec.QueueName, "gpus")
	return Facts{
		Workload: wl, Queue: &qa, Now: t0.Add(time.Hour),
		GlobalQueue: &gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: "gpus"},
			Spec: gantry.GlobalQueueSpec{Clusters: []gantry.ClusterQuota{
				{Name: "w1", Quota: corev1.ResourceList{gantry.GPUResource: q("16")}},
				{Name: "w2", Quota: corev1.ResourceList{gantry.GPUResource: q("32")}}}},
			Status: gantry.GlobalQueueStatus{Usage: []gantry.ClusterUsage{
				{Name: "w1", Admitted: corev1.ResourceList{gantry.GPUResource: q("8")}, Reserved: corev1.ResourceList{gantry.GPUResource: q("4")}}}}},
		Clusters: map[string]*gantry.WorkerCluster{"w1": cluster("w1", "A100", 24, 8), "w2": cluster("w2", "H100", 2, 2)},
		Position: Position{GlobalQueue: "gpus", Index: 2, Of: 5},
	}
}

func TestExplain(t *testing.T) {
	waiting := func(reason, msg string) *gantry.Workload {
		return with(workload("team-a", "train", "qa", 0, 2, 4), pending(reason, msg))
	}
	for name, tc := range map[string]struct {
		facts Facts
		want  []string
	}{
		"blocked by quota on one cluster, by capacity on the other": {
			facts: fleetFacts(waiting(gantry.ReasonWaitingForCapacity, "waiting for GPUs")),
			want: []string{
				"Job team-a/train (Workload job-train)",
				"  Queue:     qa, GlobalQueue gpus",
				"  Demand:    main: 2 × {cpu 1, nvidia.com/gpu 4}; in all cpu 2, nvidia.com/gpu 8",
				"State: Pending (WaitingForCapacity) for 50m",
				"  Position 2 of 5 pending in GlobalQueue gpus (higher priority first, then older first).",
				"  w1  blocked by quota: needs nvidia.com/gpu 8, 4 left of 16 (8 used, 4 reserved)",
				"  w2  blocked by capacity: quota allows it, but the last capacity report has no room",
				"      capacity: needs 8 nvidia.com/gpu, 4 on one node; reported H100 2 free of 32, at most 2 on one node",
			},
		},
		"in a cohort, quota may be borrowed": {
			facts: func() Facts {
				f := fleetFacts(waiting(gantry.ReasonWaitingForCapacity, "waiting for GPUs"))
				f.GlobalQueue.Spec.Cohort = "research"
				return f
			}(),
			want: []string{
				"Job team-a/train (Workload job-train)",
				"  Queue:     qa, GlobalQueue gpus",
				"  Demand:    main: 2 × {cpu 1, nvidia.com/gpu 4}; in all cpu 2, nvidia.com/gpu 8",
				"State: Pending (WaitingForCapacity) for 50m",
				"  Position 2 of 5 pending in GlobalQueue gpus (higher priority first, then older first).",
				"  w1  blocked by quota: needs nvidia.com/gpu 8, 4 left of 16 (8 used, 4 reserved); beyond its quota it runs only on what cohort research lends here",
				"  w2  blocked by capacity: quota allows it, but the last capacity report has no room",
				"      capacity: needs 8 nvidia.com/gpu, 4 on one node; reported H100 2 free of 32, at most 2 on one node",
			},
		},
		"a missing queue": {
			facts: func() Facts {
				f := fleetFacts(waiting(gantry.ReasonQueueNotFound, "Queue team-a/qa does not exist"))
				f.Queue, f.GlobalQueue = nil, nil
				return f
			}(),
			want: []string{
				"  Queue:     qa (no such Queue in namespace team-a)",
				"State: Pending (QueueNotFound) for 50m",
				"  Queue team-a/qa does not exist",
				"  To do: create the Queue in this namespace, or fix the job's label gantry.dev/queue-name.",
			},
		},
		"nominated, with the agent's words; a rejection; a cordoned cluster": {
			facts: func() Facts {
				wl := waiting(gantry.ReasonWaitingForAdmission, "waiting for w2 to admit; w2: InsufficientResources: 0/4 nodes have 4 nvidia.com/gpu free")
				wl.Status.DispatchEpoch, wl.Status.NominatedClusters = 3, []string{"w2"}
				wl.Status.RejectedClusters = []gantry.RejectedCluster{{Name: "w1", Reason: gantry.ReasonNeverFits,
					Message: "no node has 4 nvidia.com/gpu", Time: metav1.NewTime(t0.Add(30 * time.Minute))}}
				f := fleetFacts(wl)
				f.GlobalQueue.Spec.Clusters = append(f.GlobalQueue.Spec.Clusters, gantry.ClusterQuota{Name: "w3"}, gantry.ClusterQuota{Name: "w4"})
				f.Clusters["w3"] = &gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "w3"}, Spec: gantry.WorkerClusterSpec{Cordoned: true},
					Status: gantry.WorkerClusterStatus{Conditions: f.Clusters["w1"].Status.Conditions}}
				return f
			}(),
			want: []string{
				"  w1  rejected by its agent 30m ago: NeverFits: no node has 4 nvidia.com/gpu",
				"  w2  has a copy of epoch 3; its agent says InsufficientResources: 0/4 nodes have 4 nvidia.com/gpu free",
				"  w3  unavailable: cordoned",
				"  w4  no WorkerCluster of that name",
				"  Dispatch epoch 3: copies on w2",
			},
		},
		"ranked by price and data: what each cluster costs and how near the data it is": {
			facts: func() Facts {
				wl := waiting(gantry.ReasonWaitingForCapacity, "waiting for GPUs")
				wl.Spec.DataLocation = []gantry.LabelTerm{{Key: "topology.kubernetes.io/region", Value: "eu-west"}}
				f := fleetFacts(wl)
				f.GlobalQueue.Spec.Dispatch.Scores = []gantry.DispatchScore{{Name: gantry.ScorePrice, Weight: 2}, {Name: gantry.ScoreNearData}}
				f.Clusters["w1"].Labels = map[string]string{"topology.kubernetes.io/region": "eu-west"}
				f.Clusters["w1"].Spec.Price = &gantry.ClusterPrice{GPU: []gantry.GPUPrice{{Product: "A100", PerHour: "2.5"}}}
				f.Clusters["w2"].Spec.Price = &gantry.ClusterPrice{GPU: []gantry.GPUPrice{{PerHour: "1.25"}}, CPU: ptr.To(gantry.Amount("0.05"))}
				return f
			}(),
			want: []string{
				"  Data:      near clusters labelled topology.kubernetes.io/region=eu-west",
				"Clusters of GlobalQueue gpus, ranked by Price×2, NearData×1:",
				"  w1  blocked by quota: needs nvidia.com/gpu 8, 4 left of 16 (8 used, 4 reserved)",
				"      placement: costs 20.00 an hour; carries 1 of the labels of its data",
				"  w2  blocked by capacity: quota allows it, but the last capacity report has no room",
				"      placement: costs 10.10 an hour; carries 0 of the labels of its data",
			},
		},
		"running, after an eviction": {
			facts: func() Facts {
				wl := with(workload("team-a", "train", "qa", 0, 2, 4), won("w2", true))
				wl.Status.Evictions = []gantry.Eviction{{Cluster: "w1", Epoch: 1, Reason: gantry.ReasonPlacementTimeout,
					Message: "1 of 2 pods not placed in 5m", Time: metav1.NewTime(t0.Add(5 * time.Minute))}}
				wl.Status.Admission.PodGroup = "train-1a2b3c4d"
				f := fleetFacts(wl)
				f.Job = &batchv1.Job{Status: batchv1.JobStatus{Active: 2, StartTime: ptr.To(metav1.NewTime(t0.Add(11 * time.Minute)))}}
				return f
			}(),
			want: []string{
				"State: Running on w2",
				"  Job: running; 2 active (0 ready), 0 succeeded, 0 failed",
				"  Evicted from w1 (epoch 1) 55m ago: PlacementTimeout: 1 of 2 pods not placed in 5m",
				"  Won by w2 in epoch 2, 50m ago; GPU product H100; its scheduler binds the gang whole (PodGroup train-1a2b3c4d); quota of GlobalQueue gpus",
				"  Job created on w2 50m ago",
			},
		},
		"admitted where its Job is not taken": {
			facts: func() Facts {
				wl := with(workload("team-a", "train", "qa", 0, 2, 4), won("w2", false))
				wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: gantry.WorkloadJobCreated, Status: "False",
					Reason: gantry.ReasonWorkerRefusing, Message: `w2 does not take the Job: jobs "train" is forbidden: exceeded quota`,
					LastTransitionTime: metav1.NewTime(t0.Add(49 * time.Minute))})
				return fleetFacts(wl)
			}(),
			want: []string{
				"State: Admitted on w2",
				`  Its Job is not created there (WorkerRefusing, for 11m): w2 does not take the Job: jobs "train" is forbidden: exceeded quota`,
			},
		},
		"the Workload of an earlier job of the name, kept while its cluster is unreachable": {
			facts: func() Facts {
				wl := with(workload("team-a", "train", "qa", 0, 2, 4), won("w2", true))
				wl.DeletionTimestamp = ptr.To(metav1.NewTime(t0.Add(40 * time.Minute)))
				f := fleetFacts(wl)
				f.Successor = &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "new",
					CreationTimestamp: metav1.NewTime(t0.Add(50 * time.Minute))}}
				return f
			}(),
			want: []string{
				"Job team-a/train (Workload job-train)",
				"  Note:      this is the story of an earlier Job of this name; the one on the hub now was submitted 10m ago and gets its own Workload once this one is gone",
			},
		},
		"stopped while it waits: no clusters judged, how to resume": {
			facts: func() Facts {
				wl := waiting(gantry.ReasonStopped, dispatch.StoppedMessage("", "team-a/job-train"))
				wl.Spec.Stopped = true
				return fleetFacts(wl)
			}(),
			want: []string{
				"State: Pending (Stopped) for 50m",
				"  stopped by its owner (annotation gantry.dev/stopped on the Job): it is not dispatched until it is resumed: kubectl gantry resume job/train -n team-a",
				"  To do: its owner stopped it (annotation gantry.dev/stopped); resume it with kubectl gantry resume job/train -n team-a, and it takes its place in its queue again.",
			},
		},
		"stopped while it runs: being taken back": {
			facts: func() Facts {
				wl := with(workload("team-a", "train", "qa", 0, 2, 4), won("w2", true))
				wl.Spec.Stopped = true
				return fleetFacts(wl)
			}(),
			want: []string{
				"State: Running on w2",
				"  Stopping: its owner stopped it: its Job on w2 is deleted, pods first, then it waits until it is resumed.",
				"  To do: its owner stopped it (annotation gantry.dev/stopped); resume it with kubectl gantry resume job/train -n team-a, and it takes its place in its queue again.",
			},
		},
		"a Queue the reader may not read is not called missing": {
			facts: func() Facts {
				f := fleetFacts(waiting(gantry.ReasonWaitingForQuota, "waiting for quota"))
				f.Queue, f.GlobalQueue, f.Unreadable = nil, nil, []string{"Queues"}
				return f
			}(),
			want: []string{"  Queue:     qa (you may not read Queues)", "Left out: you may not read Queues on the hub."},
		},
		"what the reader may not read": {
			facts: func() Facts {
				f := fleetFacts(waiting(gantry.ReasonWaitingForQuota, "waiting for quota"))
				f.Clusters, f.Unreadable = nil, []string{"WorkerClusters"}
				return f
			}(),
			want: []string{
				"  w1  blocked by quota: needs nvidia.com/gpu 8, 4 left of 16 (8 used, 4 reserved)",
				"  w2  quota and the last capacity report leave room: it can be nominated on its turn",
				"Left out: you may not read WorkerClusters on the hub.",
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := Explain(tc.facts)
			got := e.Lines(tc.facts.Now)
			for _, line := range tc.want {
				if !hasLine(got, line) {
					t.Errorf("no line %q in:\n%s", line, strings.Join(got, "\n"))
				}
			}
		})
	}
}

// A stopped job's explanation judges no cluster: it goes to none until it is resumed.
func TestAStoppedJobIsNotJudgedAgainstClusters(t *testing.T) {
	wl := with(workload("team-a", "train", "qa", 0, 2, 4), pending(gantry.ReasonWaitingForQuota, "waiting for quota"))
	wl.Spec.Stopped = true
	f := fleetFacts(wl)
	e := Explain(f)
	if len(e.Clusters) > 0 || !e.State.Stopped || e.State.Reason != gantry.ReasonStopped {
		t.Errorf("state %+v, clusters %+v", e.State, e.Clusters)
	}
	for _, l := range e.Lines(f.Now) {
		if strings.HasPrefix(l, "Clusters of GlobalQueue") {
			t.Errorf("a stopped job judged against clusters:\n%s", strings.Join(e.Lines(f.Now), "\n"))
		}
	}
}

func hasLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// withoutWorkload is the text of ExplainWithoutWorkload at now.
func withoutWorkload(k jobkind.Kind, job client.Object, events []eventsv1.Event, eventsRead bool, now time.Time) []string {
	e := ExplainWithoutWorkload(k, job, events, eventsRead)
	return e.Lines(now)
}

func TestExplainWithoutWorkload(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "bad", Labels: map[string]string{gantry.QueueLabel: "qa"},
		CreationTimestamp: metav1.NewTime(t0)}}
	refused := eventsv1.Event{Regarding: corev1.ObjectReference{Kind: "Job", Name: "bad"}, Type: corev1.EventTypeWarning,
		Reason: "InvalidJob", Note: "gantry.dev/gpu-products names a product twice", EventTime: metav1.NewMicroTime(t0)}
	other := refused
	other.Regarding.Name = "good"
	got := withoutWorkload(jobkind.Job{}, job, []eventsv1.Event{other, refused}, true, t0.Add(time.Minute))
	want := "    60s ago: InvalidJob: gantry.dev/gpu-products names a product twice"
	if !hasLine(got, want) || len(got) != 3 || got[0] != "Job a/bad has no Workload on the hub." {
		t.Errorf("got:\n%s\nwant the one warning on the Job: %q", strings.Join(got, "\n"), want)
	}
	unlabelled := job.DeepCopy()
	unlabelled.Labels = nil
	if got := withoutWorkload(jobkind.Job{}, unlabelled, nil, true, t0); !strings.Contains(strings.Join(got, "\n"), "does not dispatch it") {
		t.Errorf("a Job without queue label: got %q", got)
	}
	if got := strings.Join(withoutWorkload(jobkind.Job{}, job, nil, false, t0), "\n"); !strings.Contains(got, "kubectl describe job bad -n a") ||
		strings.Contains(got, "not taken it up") {
		t.Errorf("without events: got %q, want a pointer to the Job's events and no guess", got)
	}
}

// A JobSet the hub refused is told from the warnings on the JobSet, not on a Job of its name.
func TestExplainWithoutWorkloadOfAJobSet(t *testing.T) {
	js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "bad", Labels: map[string]string{gantry.QueueLabel: "qa"},
		CreationTimestamp: metav1.NewTime(t0)}}
	onJobSet := eventsv1.Event{Regarding: corev1.ObjectReference{Kind: "JobSet", Name: "bad"}, Type: corev1.EventTypeWarning,
		Reason: "InvalidJob", Note: "replicated job workers: no containers", EventTime: metav1.NewMicroTime(t0)}
	onJob := onJobSet
	onJob.Regarding.Kind, onJob.Note = "Job", "about a Job of that name"
	got := withoutWorkload(jobkind.JobSet{}, js, []eventsv1.Event{onJob, onJobSet}, true, t0.Add(time.Minute))
	want := []string{"JobSet a/bad has no Workload on the hub.", "  The hub refused it:", "    60s ago: InvalidJob: replicated job workers: no containers"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := strings.Join(withoutWorkload(jobkind.JobSet{}, js, nil, false, t0), "\n"); !strings.Contains(got, "kubectl describe jobset bad -n a") {
		t.Errorf("without events: got %q, want a pointer to the JobSet's events", got)
	}
}

// What the text says is what the Explanation holds: the verdicts, with the numbers, for -o json and yaml.
func TestExplanationHoldsTheVerdictsAndTheirNumbers(t *testing.T) {
	q := resource.MustParse
	wl := with(workload("team-a", "train", "qa", 0, 2, 4), pending(gantry.ReasonWaitingForCapacity, "waiting for GPUs"))
	f := fleetFacts(wl)
	f.GlobalQueue.Spec.Cohort = "research"
	got := Explain(f)
	want := []ClusterVerdict{
		{Name: "w1", Verdict: VerdictBlockedByQuota, Cohort: "research", Quota: &QuotaCheck{Resource: gantry.GPUResource,
			Needs: q("8"), Quota: q("16"), Used: q("8"), Reserved: q("4"), Left: q("4")}},
		{Name: "w2", Verdict: VerdictBlockedByCapacity, Capacity: &CapacityCheck{GPUs: 8, GPUsPerPod: 4, ReportsGPUs: true,
			Products: []GPURoom{{Product: "H100", Free: 2, Allocatable: 32, LargestFreeOnNode: 2}}}},
	}
	quantities := cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
	if diff := cmp.Diff(want, got.Clusters, quantities); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	if got.APIVersion != ExplanationAPIVersion || got.Kind != ExplanationKind || got.State.State != StatePending ||
		got.State.Reason != gantry.ReasonWaitingForCapacity || *got.State.Position != (Position{GlobalQueue: "gpus", Index: 2, Of: 5}) ||
		got.Queue.GlobalQueue != "gpus" || !*got.Queue.Exists || !*got.Queue.GlobalQueueExists {
		t.Errorf("header or state: %+v %+v %+v", got, got.State, got.Queue)
	}
}

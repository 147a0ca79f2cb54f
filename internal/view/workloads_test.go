package view

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// workload is a pending Workload of job name in ns, submitted to queue at t0+minutes, asking for gpus
// GPUs on each of pods pods.
func workload(ns, name, queue string, minutes int, pods int32, gpus int64) *gantry.Workload {
	return &gantry.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job-" + name, Labels: map[string]string{gantry.JobNameLabel: name},
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(minutes) * time.Minute))},
		Spec: gantry.WorkloadSpec{QueueName: queue, PodSets: []gantry.PodSet{{Name: "main", Count: pods,
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"),
				gantry.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)}}}},
	}
}

func with(w *gantry.Workload, f func(*gantry.Workload)) *gantry.Workload { f(w); return w }

func setCondition(w *gantry.Workload, typ, status, reason, message string) {
	w.Status.Conditions = append(w.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status),
		Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(t0.Add(10 * time.Minute))})
}

func pending(reason, message string) func(*gantry.Workload) {
	return func(w *gantry.Workload) { setCondition(w, gantry.WorkloadPending, "True", reason, message) }
}

// won makes the Workload admitted by cluster in epoch 2, its Job created when created is set.
func won(cluster string, created bool) func(*gantry.Workload) {
	return func(w *gantry.Workload) {
		w.Status.ClusterName, w.Status.DispatchEpoch, w.Status.GlobalQueue = cluster, 2, "gpus"
		w.Status.Admission = &gantry.Admission{PodSets: []gantry.PodSetAdmission{{Name: "main", GPUProduct: "H100"}}}
		setCondition(w, gantry.WorkloadPending, "False", gantry.ReasonAdmittedByCluster, "")
		setCondition(w, gantry.WorkloadAdmitted, "True", gantry.ReasonAdmittedByCluster, "admitted by "+cluster)
		if created {
			setCondition(w, gantry.WorkloadJobCreated, "True", gantry.ReasonJobCreated, "")
		}
	}
}

func queue(ns, name, gq string) gantry.Queue {
	return gantry.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gantry.QueueSpec{GlobalQueue: gq}}
}

func TestStateOf(t *testing.T) {
	now := metav1.NewTime(t0)
	for name, tc := range map[string]struct {
		wl            *gantry.Workload
		state, reason string
	}{
		"new":      {workload("a", "j", "q", 0, 1, 0), StatePending, "-"},
		"waiting":  {with(workload("a", "j", "q", 0, 1, 0), pending(gantry.ReasonWaitingForQuota, "")), StatePending, gantry.ReasonWaitingForQuota},
		"admitted": {with(workload("a", "j", "q", 0, 1, 0), won("w1", false)), StateAdmitted, gantry.ReasonAdmittedByCluster},
		"running":  {with(workload("a", "j", "q", 0, 1, 0), won("w1", true)), StateRunning, gantry.ReasonAdmittedByCluster},
		"unreachable": {with(workload("a", "j", "q", 0, 1, 0), func(w *gantry.Workload) {
			won("w1", true)(w)
			setCondition(w, gantry.WorkloadClusterReachable, "False", gantry.ReasonClusterUnreachable, "w1 since 12:00")
		}), StateRunning, gantry.ReasonClusterUnreachable},
		"its worker does not take the Job": {with(workload("a", "j", "q", 0, 1, 0), func(w *gantry.Workload) {
			won("w1", false)(w)
			setCondition(w, gantry.WorkloadJobCreated, "False", gantry.ReasonWorkerRefusing, "w1 does not take the Job: exceeded quota")
		}), StateAdmitted, gantry.ReasonWorkerRefusing},
		"finished": {with(workload("a", "j", "q", 0, 1, 0), func(w *gantry.Workload) {
			won("w1", true)(w)
			setCondition(w, gantry.WorkloadFinished, "True", gantry.ReasonJobSucceeded, "")
		}), StateFinished, gantry.ReasonJobSucceeded},
		// The Workload controller recorded the eviction; the dispatcher has not cleared the winner yet.
		"taken back": {with(workload("a", "j", "q", 0, 1, 0), func(w *gantry.Workload) {
			won("w1", true)(w)
			w.Status.Evictions = append(w.Status.Evictions, gantry.Eviction{Cluster: "w1", Epoch: w.Status.DispatchEpoch, Reason: gantry.ReasonPlacementTimeout})
		}), StatePending, gantry.ReasonEvicted},
		// The admission deadline writes Finished only; the last verdict stays beside it.
		"ended at its admission deadline": {with(workload("a", "j", "q", 0, 1, 0), func(w *gantry.Workload) {
			pending(gantry.ReasonWaitingForQuota, "")(w)
			setCondition(w, gantry.WorkloadFinished, "True", gantry.ReasonInadmissible, "")
		}), StateFinished, gantry.ReasonInadmissible},
		// Its owner's stop is shown before the hub's writes catch up with it.
		"stopped while it runs": {with(workload("a", "j", "q", 0, 1, 0), func(w *gantry.Workload) {
			won("w1", true)(w)
			w.Spec.Stopped = true
		}), StateRunning, ReasonStopping},
		"stopped, taken back": {with(workload("a", "j", "q", 0, 1, 0), func(w *gantry.Workload) {
			won("w1", true)(w)
			w.Spec.Stopped = true
			w.Status.Evictions = append(w.Status.Evictions, gantry.Eviction{Cluster: "w1", Epoch: w.Status.DispatchEpoch, Reason: gantry.ReasonStopped})
		}), StatePending, gantry.ReasonStopped},
		"stopped while it waits": {with(workload("a", "j", "q", 0, 1, 0), func(w *gantry.Workload) {
			pending(gantry.ReasonWaitingForQuota, "")(w)
			w.Spec.Stopped = true
		}), StatePending, gantry.ReasonStopped},
		"stopped once it finished": {with(workload("a", "j", "q", 0, 1, 0), func(w *gantry.Workload) {
			won("w1", true)(w)
			setCondition(w, gantry.WorkloadFinished, "True", gantry.ReasonJobSucceeded, "")
			w.Spec.Stopped = true
		}), StateFinished, gantry.ReasonJobSucceeded},
		"deleting": {with(workload("a", "j", "q", 0, 1, 0), func(w *gantry.Workload) {
			w.DeletionTimestamp = &now
			setCondition(w, gantry.WorkloadFinished, "True", gantry.ReasonJobSucceeded, "")
		}), StateDeleting, "-"},
	} {
		t.Run(name, func(t *testing.T) {
			state, reason := StateOf(tc.wl)
			if state != tc.state || reason != tc.reason {
				t.Errorf("StateOf = %s, %s; want %s, %s", state, reason, tc.state, tc.reason)
			}
		})
	}
}

// Positions follow the dispatcher's order per GlobalQueue, across namespaces and Queues naming the same
// GlobalQueue; admitted workloads and those of unknown Queues have none.
func TestPositions(t *testing.T) {
	wls := []gantry.Workload{
		*workload("a", "late", "qa", 5, 1, 0),
		*with(workload("b", "urgent", "qb", 9, 1, 0), func(w *gantry.Workload) { w.Spec.Priority = 10 }),
		*workload("a", "early", "qa", 1, 1, 0),
		*with(workload("a", "running", "qa", 0, 1, 0), won("w1", true)),
		*workload("a", "lost", "nope", 0, 1, 0),
		*workload("c", "other", "qc", 3, 1, 0),
	}
	queues := []gantry.Queue{queue("a", "qa", "gpus"), queue("b", "qb", "gpus"), queue("c", "qc", "cpus")}
	got := Positions(wls, queues)
	want := map[string]Position{
		"b/job-urgent": {"gpus", 1, 3}, "a/job-early": {"gpus", 2, 3}, "a/job-late": {"gpus", 3, 3},
		"c/job-other": {"cpus", 1, 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Positions (-want +got):\n%s", diff)
	}
}

func TestWorkloadsAndJobRows(t *testing.T) {
	wls := []gantry.Workload{
		*with(workload("a", "train", "qa", 0, 2, 8), won("w1", true)),
		*with(workload("a", "eval", "qa", 1, 1, 1), pending(gantry.ReasonWaitingForCapacity, "")),
	}
	queues := []gantry.Queue{queue("a", "qa", "gpus")}
	rows := Workloads(wls, queues, Positions(wls, queues))
	want := []WorkloadRow{
		{Namespace: "a", Name: "eval", Workload: "job-eval", Kind: gantry.JobKindJob, Queue: "qa", GlobalQueue: "gpus", State: StatePending, Reason: gantry.ReasonWaitingForCapacity,
			Position: "1/1", GPUs: 1, Created: t0.Add(time.Minute)},
		{Namespace: "a", Name: "train", Workload: "job-train", Kind: gantry.JobKindJob, Queue: "qa", GlobalQueue: "gpus", State: StateRunning, Reason: gantry.ReasonAdmittedByCluster,
			Position: "-", Cluster: "w1", Epoch: 2, GPUProduct: "H100", GPUs: 16, Created: t0},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("Workloads (-want +got):\n%s", diff)
	}
	jobs := []client.Object{
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "train"}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "bad", Labels: map[string]string{gantry.QueueLabel: "qa"}}},
	}
	got := JobRows(jobs, rows)
	if len(got) != 2 || got[0].Name != "bad" || got[0].Reason != ReasonNoWorkload || got[0].Queue != "qa" || got[1].Cluster != "w1" {
		t.Errorf("JobRows = %+v, want the refused Job without Workload, then train on w1", got)
	}
}

// A Job and a JobSet of the same name are two rows, each with its own Workload's, or none.
func TestJobRowsOfSeveralKinds(t *testing.T) {
	wls := []gantry.Workload{
		*with(workload("a", "train", "qa", 0, 2, 8), won("w1", true)),
		*with(workload("a", "train", "qa", 1, 3, 1), func(w *gantry.Workload) {
			w.Name, w.Spec.JobKind = "jobset-train", gantry.JobKindJobSet
			pending(gantry.ReasonWaitingForQuota, "")(w)
		}),
	}
	queues := []gantry.Queue{queue("a", "qa", "gpus")}
	rows := Workloads(wls, queues, Positions(wls, queues))
	jobs := []client.Object{
		&jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "train"}},
		&jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "refused", Labels: map[string]string{gantry.QueueLabel: "qa"}}},
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "train"}},
	}
	type row struct {
		Name   string
		Kind   gantry.JobKind
		Reason string
		GPUs   int64
	}
	var got []row
	for _, r := range JobRows(jobs, rows) {
		got = append(got, row{r.Name, r.Kind, r.Reason, r.GPUs})
	}
	want := []row{
		{"refused", gantry.JobKindJobSet, ReasonNoWorkload, 0},
		{"train", gantry.JobKindJob, gantry.ReasonAdmittedByCluster, 16},
		{"train", gantry.JobKindJobSet, gantry.ReasonWaitingForQuota, 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JobRows (-want +got):\n%s", diff)
	}
}

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"net/http"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// usageKey is what checkUsage compares GPU time by: the product is left to the unit tests.
type usageKey struct{ queue, globalQueue, cluster string }

type usageSums struct{ gpuSeconds, borrowed, lost int64 }

// checkUsage recomputes, from the hub's etcd ledger, the GPU time of every run of the namespace's jobs
// that ended, and waits until the namespace's Usage counts exactly that, each run once, with nothing
// in flight. Each run must be what the workers' ledger shows: the pods of its Workload and epoch lived
// on its cluster within its start and end (give or take the seconds the times are written to), and
// no pod of the namespace lived outside a run.
func checkUsage(t *testing.T, ns string) {
	t.Helper()
	var runs []testbed.LedgerRun
	var counted map[usageKey]usageSums
	eventually(t, "the Usage of "+ns+" counting exactly the runs that ended", time.Minute, poll, func() error {
		if err := audit.Sync(context.Background()); err != nil {
			return err
		}
		runs = testbed.Runs(audit.Hub(ns))
		want := map[usageKey]usageSums{}
		for _, r := range runs {
			if r.Ended == nil {
				continue
			}
			k, s := usageKey{r.Queue, r.GlobalQueue, r.Cluster}, r.GPUs*int64(r.Ended.Sub(r.Started.Time)/time.Second)
			sums := want[k]
			sums.gpuSeconds += s
			if r.Borrowed {
				sums.borrowed += s
			}
			if r.TakenBack { // lost since its work was last saved
				sums.lost += r.GPUs * int64(r.Ended.Sub(r.Saved(r.Ended.Time, r.CheckpointInterval))/time.Second)
			}
			want[k] = sums
		}
		var u gantry.Usage
		err := tb.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: gantry.UsageName}, &u)
		if apierrors.IsNotFound(err) && len(want) == 0 {
			return nil
		}
		if err != nil {
			return err
		}
		got := map[usageKey]usageSums{}
		for _, e := range u.Status.Totals {
			k := usageKey{e.Queue, e.GlobalQueue, e.Cluster}
			sums := got[k]
			sums.gpuSeconds, sums.borrowed, sums.lost = sums.gpuSeconds+e.GPUSeconds, sums.borrowed+e.BorrowedGPUSeconds, sums.lost+e.LostGPUSeconds
			got[k] = sums
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || len(u.Status.InFlight) > 0 {
			return fmt.Errorf("the Usage counts %v (in flight %v); the ledger's runs that ended hold %v", got, u.Status.InFlight, want)
		}
		counted = got
		return nil
	})
	checkRunsMatchPods(t, ns, runs)
	t.Logf("%d runs of %s, each as its pods ran; the Usage counts as the ledger does (GPU-seconds used, borrowed, lost): %v", len(runs), ns, counted)
}

// checkRunsMatchPods checks each run against the pods the workers' ledger shows: every pod that lived
// belongs to a run of its Workload and epoch on its cluster, and lived between the run's start and end,
// give or take slack (times are written to the second; the ledger sees a write when its watch delivers
// it).
func checkRunsMatchPods(t *testing.T, ns string, runs []testbed.LedgerRun) {
	t.Helper()
	const slack = 3 * time.Second
	byRun := map[string]testbed.LedgerRun{}
	for _, r := range runs {
		byRun[fmt.Sprintf("%s/%d/%s", r.WorkloadUID, r.Epoch, r.Cluster)] = r
	}
	for _, p := range audit.Pods(ns) {
		if !p.Live() {
			continue
		}
		r, ok := byRun[p.WorkloadUID+"/"+p.Epoch+"/"+p.Cluster]
		switch {
		case !ok:
			t.Errorf("pod %s lived on %s (revision %d) in no run of its Workload %s, epoch %s", p.Name, p.Cluster, p.Revision, p.WorkloadUID, p.Epoch)
		case p.Seen.Before(r.Started.Add(-slack)):
			t.Errorf("pod %s lived on %s at %s, before its run started at %s", p.Name, p.Cluster, p.Seen, r.Started)
		case r.Ended != nil && p.Seen.After(r.Ended.Add(slack)):
			t.Errorf("pod %s lived on %s at %s, after its run ended at %s (%s)", p.Name, p.Cluster, p.Seen, r.Ended, r.Outcome)
		}
	}
}

// TestGPUHoursAreAccountedExactly prices worker-1's A100s at 2.00 a GPU-hour and runs a low-priority
// training job there that says it checkpoints every hour and, while it runs, writes on its Job that it
// wrote a checkpoint; a high-priority job preempts it, runs, and the training job runs again. The
// training job's first run is lost only since the checkpoint it wrote; the namespace's Usage counts
// every run as the hub's ledger recomputes it and the pods ran; kubectl gantry usage says the same, with
// the cost.
func TestGPUHoursAreAccountedExactly(t *testing.T) {
	ns := newNamespace(t, "e2e-usage")
	dumpOnFailure(t, ns)
	updateWorkerCluster(t, "worker-1", func(wc *gantry.WorkerCluster) {
		wc.Spec.Price = &gantry.ClusterPrice{GPU: []gantry.GPUPrice{{Product: a100, PerHour: "2.00"}}}
	})
	low, high := priorityClassEverywhere(t, ns+"-low", 0), priorityClassEverywhere(t, ns+"-high", 1000)
	queue(t, ns, "metered", gantry.GlobalQueueSpec{Clusters: []gantry.ClusterQuota{
		{Name: "worker-1", Quota: corev1.ResourceList{gantry.GPUResource: resource.MustParse("8")}}},
		Preemption: gantry.PreemptionPolicy{WithinQueue: gantry.PreemptLowerPriority}})
	train := jobIn(makeJob(ns, "train").gpus(8).runsFor("40s").priorityClass(low), "metered")
	train.Annotations = map[string]string{gantry.CheckpointIntervalAnnotation: "1h"}
	submit(t, train)
	podsLive(t, ns, []*batchv1.Job{train}, 2*time.Minute)
	time.Sleep(3 * time.Second) // work before the checkpoint, saved
	checkpoint := writeCheckpoint(t, train)
	time.Sleep(2 * time.Second) // work after it, lost

	urgent := jobIn(makeJob(ns, "urgent").gpus(8).runsFor(runTime).priorityClass(high), "metered")
	submit(t, urgent)
	allComplete(t, []*batchv1.Job{urgent, train}, 4*time.Minute)

	runs := hubWorkload(t, train).Status.Runs
	if len(runs) != 2 || !runs[0].TakenBack || runs[0].Outcome != gantry.ReasonPreempted || runs[0].Checkpointed == nil ||
		!runs[0].Checkpointed.Equal(&checkpoint) || runs[1].TakenBack {
		t.Fatalf("runs %+v; want one preempted after its checkpoint at %s, then one that ended", runs, checkpoint)
	}
	checkUsage(t, ns)
	var u gantry.Usage
	if err := tb.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: gantry.UsageName}, &u); err != nil {
		t.Fatal(err)
	}
	lost := 8 * int64(runs[0].Ended.Sub(checkpoint.Time)/time.Second)
	var used, counted int64
	for _, e := range u.Status.Totals {
		used, counted = used+e.GPUSeconds, counted+e.LostGPUSeconds
	}
	if counted != lost || lost >= 8*int64(runs[0].Ended.Sub(runs[0].Started.Time)/time.Second) {
		t.Errorf("lost %d GPU-seconds counted, want %d: since the checkpoint, not the whole run", counted, lost)
	}
	checkUsageReport(t, ns, u.Status.Totals)
	checkUsageOnThePage(t, ns, used)
	t.Logf("%d GPU-seconds used, %d lost (since the checkpoint), as the Usage counts and kubectl gantry usage says", used, counted)
}

// writeCheckpoint writes on the job's Job on its worker, as a job does, that it wrote a checkpoint now,
// and waits for the hub to record it on its run; it returns the time written.
func writeCheckpoint(t *testing.T, job *batchv1.Job) metav1.Time {
	t.Helper()
	at := metav1.NewTime(time.Now().Truncate(time.Second))
	winner, err := winnerOf(job)
	if err != nil {
		t.Fatal(err)
	}
	var remote batchv1.Job
	w := tb.Worker(winner)
	if err := w.Client.Get(context.Background(), client.ObjectKeyFromObject(job), &remote); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(remote.DeepCopy())
	if remote.Annotations == nil {
		remote.Annotations = map[string]string{}
	}
	remote.Annotations[gantry.LastCheckpointAnnotation] = at.UTC().Format(time.RFC3339)
	if err := w.Client.Patch(context.Background(), &remote, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the hub recording the checkpoint of "+job.Name, 30*time.Second, poll, func() error {
		runs := hubWorkload(t, job).Status.Runs
		if n := len(runs); n == 0 || runs[n-1].Checkpointed == nil || !runs[n-1].Checkpointed.Equal(&at) {
			return fmt.Errorf("runs %+v", runs)
		}
		return nil
	})
	return at
}

// checkUsageReport runs kubectl gantry usage on the namespace, as its owner would, and finds in its CSV
// the GPU-seconds, lost GPU-seconds and cost the Usage counts.
func checkUsageReport(t *testing.T, ns string, totals []gantry.UsageEntry) {
	t.Helper()
	out := kubectlGantry(t, "usage", "-n", ns, "--since", "7d", "-o", "csv")
	for _, e := range totals {
		want := fmt.Sprintf("%s,%s,%s,%s,%s,%d,%d,%d,", ns, e.Queue, e.GlobalQueue, e.Cluster, e.GPUProduct, e.GPUSeconds, e.BorrowedGPUSeconds, e.LostGPUSeconds)
		if !strings.Contains(out, want) || !strings.Contains(out, ","+string(e.Cost)+","+string(e.LostCost)) {
			t.Errorf("kubectl gantry usage says no %q with cost %s, lost %s:\n%s", want, e.Cost, e.LostCost, out)
		}
		if e.Cost == "" {
			t.Errorf("no cost counted for %+v at 2.00 a GPU-hour", e)
		}
	}
	if table := kubectlGantry(t, "usage", "-n", ns); !strings.Contains(table, "TOTAL") {
		t.Errorf("kubectl gantry usage prints no TOTAL:\n%s", table)
	}
}

// checkUsageOnThePage reads the hub's page as a tenant of the namespace who may read its jobs and its
// Usage: it shows the namespace's GPU-hours of the last 7 days, and no other namespace's.
func checkUsageOnThePage(t *testing.T, ns string, gpuSeconds int64) {
	t.Helper()
	tenant := tokenWithRules(t, ns, "accountant", false,
		rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{gantry.GroupVersion.Group}, Resources: []string{"usages"}, Verbs: []string{"list"}})
	want := fmt.Sprintf("%.2f", float64(gpuSeconds)/3600)
	eventually(t, "the page showing the GPU-hours of "+ns, 30*time.Second, poll, func() error {
		code, body := bodyOf(t, hubEndpoint(t)+"/", tenant)
		switch {
		case code != http.StatusOK:
			return fmt.Errorf("status %d", code)
		case !strings.Contains(body, "GPU-hours, last 7 days") || !strings.Contains(body, ns) || !strings.Contains(body, want):
			return fmt.Errorf("no GPU-hours section with %s and %s GPU-hours:\n%s", ns, want, body)
		case strings.Contains(body, "e2e-preempt") || strings.Contains(body, "e2e-fence"):
			return fmt.Errorf("the page shows another namespace's GPU-hours to a tenant of %s", ns)
		}
		return nil
	})
}

package e2e

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// Two GlobalQueues of weights 1 and 2, with no quota of their own, share what their Cohort holds: 6
// GPUs on each worker. Each gets more one-GPU jobs than it can run, all queued before the Cohort exists,
// so that the order they were submitted in does not decide the first share. While both have jobs
// waiting, after the first jobs' run, the GPU-seconds their pods run split 1:2 within 15%, as the
// workers' etcd ledger shows; at no instant do their pods use more GPUs on a worker than the cohort
// holds there; no job runs twice.
func TestTwoQueuesOfWeightsOneAndTwoShareTheirCohort(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "e2e-fair")
	dumpOnFailure(t, ns)
	const perWorker, runs = 6, 5 * time.Second
	cohort := &gantry.Cohort{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: gantry.CohortSpec{Clusters: []gantry.CohortClusterQuota{
		{Name: "worker-1", Quota: corev1.ResourceList{gantry.GPUResource: *resource.NewQuantity(perWorker, resource.DecimalSI)}},
		{Name: "worker-2", Quota: corev1.ResourceList{gantry.GPUResource: *resource.NewQuantity(perWorker, resource.DecimalSI)}},
	}}}
	for _, q := range []struct {
		name   string
		weight int32
	}{{"light", 1}, {"heavy", 2}} {
		gq := &gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + q.name}, Spec: gantry.GlobalQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Cohort:            ns,
			FairSharing:       gantry.FairSharing{Weight: ptr.To(q.weight)},
			Clusters: []gantry.ClusterQuota{
				{Name: "worker-1", Quota: corev1.ResourceList{gantry.GPUResource: resource.MustParse("0")}},
				{Name: "worker-2", Quota: corev1.ResourceList{gantry.GPUResource: resource.MustParse("0")}},
			},
		}}
		create(t, gq)
		create(t, &gantry.Queue{ObjectMeta: metav1.ObjectMeta{Name: q.name, Namespace: ns}, Spec: gantry.QueueSpec{GlobalQueue: gq.Name}})
	}
	var heavy []*batchv1.Job
	for i := range 40 {
		for _, q := range []string{"light", "heavy"} {
			job := makeJob(ns, fmt.Sprintf("%s-%02d", q, i)).gpus(1).runsFor(runs.String()).obj()
			job.Labels[gantry.QueueLabel] = q
			submit(t, job)
			if q == "heavy" {
				heavy = append(heavy, job)
			}
		}
	}
	eventually(t, "80 workloads waiting for quota", time.Minute, poll, func() error {
		if n := pendingWorkloads(t, ns, "light") + pendingWorkloads(t, ns, "heavy"); n != 80 {
			return fmt.Errorf("%d workloads waiting", n)
		}
		return nil
	})
	create(t, cohort)
	// The measure starts when the first jobs have run (shares converge from there) and ends when the
	// last heavy job starts: until then both queues had jobs waiting.
	eventually(t, "every heavy job admitted", 5*time.Minute, poll, func() error {
		for _, job := range heavy {
			if _, err := winnerOf(job); err != nil {
				return err
			}
		}
		return nil
	})
	lightWaiting := pendingWorkloads(t, ns, "light")
	if lightWaiting == 0 {
		t.Fatal("no light job was still waiting when the last heavy one was admitted: the light queue was not saturated")
	}
	eventually(t, "the ledger sees the last heavy pod run", time.Minute, poll, func() error {
		if err := audit.Sync(ctx); err != nil {
			return err
		}
		for _, job := range heavy {
			if !slices.ContainsFunc(audit.Pods(ns), func(r testbed.PodRecord) bool { return strings.HasPrefix(r.Name, job.Name+"-") && r.Live() }) {
				return fmt.Errorf("no live pod of %s yet", job.Name)
			}
		}
		return nil
	})
	pods := audit.Pods(ns)
	start, end := liveWindow(pods, "heavy-")
	start = start.Add(runs)
	seconds := gpuSecondsByPrefix(pods, start, end, "light-", "heavy-")
	ratio := seconds["heavy-"] / seconds["light-"]
	t.Logf("from %s to %s (%s): GPU-seconds light %.0f, heavy %.0f, heavy/light %.2f; %d light jobs still waiting",
		start.Format(time.TimeOnly), end.Format(time.TimeOnly), end.Sub(start).Round(time.Second), seconds["light-"], seconds["heavy-"], ratio, lightWaiting)
	if math.Abs(ratio-2)/2 > 0.15 {
		t.Errorf("heavy/light GPU-seconds %.2f, want 2 within 15%%", ratio)
	}
	if err := testbed.CheckQuota(pods, map[string]int64{"worker-1": perWorker, "worker-2": perWorker}); err != nil {
		t.Errorf("the etcd ledger shows the cohort's GPUs exceeded:\n%v", err)
	}
	checkOneRun(t, ns)
}

// create creates a hub object and deletes it when the test ends.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := tb.Hub.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = tb.Hub.Client.Delete(context.Background(), obj) })
}

// pendingWorkloads counts the namespace's Workloads of the Queue without a winner.
func pendingWorkloads(t *testing.T, ns, queue string) int {
	t.Helper()
	var wls gantry.WorkloadList
	if err := tb.Hub.Client.List(context.Background(), &wls, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, wl := range wls.Items {
		if wl.Spec.QueueName == queue && wl.Status.ClusterName == "" {
			n++
		}
	}
	return n
}

// liveWindow is from the first pod's start to the last start of a pod whose name has the prefix; a
// pod starts when it is first seen live.
func liveWindow(pods []testbed.PodRecord, prefix string) (start, end time.Time) {
	started := map[string]time.Time{}
	for _, r := range pods {
		key := r.Cluster + "/" + r.Name
		if at, ok := started[key]; r.Live() && (!ok || r.Seen.Before(at)) {
			started[key] = r.Seen
		}
	}
	for key, at := range started {
		if start.IsZero() || at.Before(start) {
			start = at
		}
		if strings.HasPrefix(key[strings.Index(key, "/")+1:], prefix) && at.After(end) {
			end = at
		}
	}
	return start, end
}

// gpuSecondsByPrefix sums, per pod name prefix, the GPU-seconds pods were live within [start, end].
func gpuSecondsByPrefix(pods []testbed.PodRecord, start, end time.Time, prefixes ...string) map[string]float64 {
	sorted := slices.Clone(pods)
	slices.SortStableFunc(sorted, func(a, b testbed.PodRecord) int { return a.Seen.Compare(b.Seen) })
	liveSince := map[string]time.Time{}
	out := map[string]float64{}
	count := func(name string, gpus int64, from, to time.Time) {
		from, to = maxTime(from, start), minTime(to, end)
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) && to.After(from) {
				out[p] += float64(gpus) * to.Sub(from).Seconds()
			}
		}
	}
	gpusOf := map[string]int64{}
	for _, r := range sorted {
		key := r.Cluster + "/" + r.Name
		since, live := liveSince[key]
		switch {
		case r.Live() && !live:
			liveSince[key], gpusOf[key] = r.Seen, r.GPUs
		case !r.Live() && live:
			count(r.Name, gpusOf[key], since, r.Seen)
			delete(liveSince, key)
		}
	}
	for key, since := range liveSince {
		count(key[strings.Index(key, "/")+1:], gpusOf[key], since, end)
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

package e2e

import (
	"context"
	"fmt"
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
)

const regionLabel = "example.com/region"

// TestJobsGoWhereTheyCostLeastOrNearTheirData prices worker-1's A100s at 3.00 a GPU-hour and worker-2's
// GPUs at 1.00, labels worker-1 region eu and worker-2 region us, and queues two jobs in a held
// GlobalQueue ranked by NearData×2 and Price: explain shows each cluster's price and how near the data
// it is, and once the queue is let go the job without a data location runs on the cheaper worker-2 and
// the one whose data is in eu on worker-1, each once.
func TestJobsGoWhereTheyCostLeastOrNearTheirData(t *testing.T) {
	ns := newNamespace(t, "e2e-price")
	dumpOnFailure(t, ns)
	updateWorkerCluster(t, "worker-1", func(wc *gantry.WorkerCluster) {
		wc.Labels = withLabel(wc.Labels, regionLabel, "eu")
		wc.Spec.Price = &gantry.ClusterPrice{GPU: []gantry.GPUPrice{{Product: a100, PerHour: "3.00"}}, CPU: ptr.To(gantry.Amount("0.05"))}
	})
	updateWorkerCluster(t, "worker-2", func(wc *gantry.WorkerCluster) {
		wc.Labels = withLabel(wc.Labels, regionLabel, "us")
		wc.Spec.Price = &gantry.ClusterPrice{GPU: []gantry.GPUPrice{{PerHour: "1.00"}}}
	})
	gq := createPricedQueue(t, ns)

	cheap := makeJob(ns, "cheap").gpus(1).runsFor(runTime).obj()
	near := makeJob(ns, "near-data").gpus(1).runsFor(runTime).obj()
	near.Annotations = map[string]string{gantry.DataLocationAnnotation: regionLabel + "=eu"}
	for _, j := range []*batchv1.Job{cheap, near} {
		j.Labels[gantry.QueueLabel] = "priced"
		submit(t, j)
		waitForPending(t, ns, j.Name, gantry.ReasonQueueHeld, gantry.WorkloadPending)
	}
	// Both workers must have room, as their last reports show, for the scores alone to choose: what an
	// earlier test ran there may still be leaving.
	for job, want := range map[string][]string{
		"cheap": {"Clusters of GlobalQueue priced, ranked by NearData×2, Price×1:",
			"placement: costs 3.05 an hour", "placement: costs 1.00 an hour"},
		"near-data": {"Data:      near clusters labelled " + regionLabel + "=eu",
			"placement: costs 3.05 an hour; carries 1 of the labels of its data",
			"placement: costs 1.00 an hour; carries 0 of the labels of its data"},
	} {
		eventually(t, "kubectl gantry explain "+job+" showing both workers with room", 2*time.Minute, poll, func() error {
			out := kubectlGantry(t, "explain", job, "-n", ns)
			for _, line := range want {
				if !strings.Contains(out, line) {
					return fmt.Errorf("kubectl gantry explain %s says no %q:\n%s", job, line, out)
				}
			}
			if n := strings.Count(out, "quota and the last capacity report leave room"); n != 2 {
				return fmt.Errorf("%d workers with room:\n%s", n, out)
			}
			return nil
		})
	}

	updateGlobalQueue(t, gq, func(q *gantry.GlobalQueue) { q.Spec.Held = false })
	allComplete(t, []*batchv1.Job{cheap, near}, 2*time.Minute)
	for job, want := range map[*batchv1.Job]string{cheap: "worker-2", near: "worker-1"} {
		if got := hubWorkload(t, job).Status.ClusterName; got != want {
			t.Errorf("%s ran on %q, want %s", job.Name, got, want)
		}
	}
	checkOneRun(t, ns)
}

// createPricedQueue creates GlobalQueue priced (64 GPUs on each worker, one candidate per job, ranked by
// NearData×2 and Price), held, for namespace ns only, and its Queue there.
func createPricedQueue(t *testing.T, ns string) *gantry.GlobalQueue {
	t.Helper()
	ctx := context.Background()
	quota := corev1.ResourceList{gantry.GPUResource: resource.MustParse("64")}
	gq := &gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: "priced"}, Spec: gantry.GlobalQueueSpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		Clusters:          []gantry.ClusterQuota{{Name: "worker-1", Quota: quota}, {Name: "worker-2", Quota: quota}},
		Held:              true,
		Dispatch: gantry.DispatchPolicy{MaxCandidates: 1,
			Scores: []gantry.DispatchScore{{Name: gantry.ScoreNearData, Weight: 2}, {Name: gantry.ScorePrice, Weight: 1}}}}}
	if err := tb.Hub.Client.Create(ctx, gq); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.Hub.Client.Delete(context.Background(), gq) })
	q := &gantry.Queue{ObjectMeta: metav1.ObjectMeta{Name: "priced", Namespace: ns}, Spec: gantry.QueueSpec{GlobalQueue: "priced"}}
	if err := tb.Hub.Client.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	return gq
}

// updateGlobalQueue changes a GlobalQueue's spec.
func updateGlobalQueue(t *testing.T, gq *gantry.GlobalQueue, change func(*gantry.GlobalQueue)) {
	t.Helper()
	eventually(t, "updating GlobalQueue "+gq.Name, 30*time.Second, poll, func() error {
		var q gantry.GlobalQueue
		if err := tb.Hub.Client.Get(context.Background(), client.ObjectKeyFromObject(gq), &q); err != nil {
			return err
		}
		change(&q)
		return tb.Hub.Client.Update(context.Background(), &q)
	})
}

func withLabel(labels map[string]string, key, value string) map[string]string {
	if labels == nil {
		labels = map[string]string{}
	}
	labels[key] = value
	return labels
}

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// A running job stopped with kubectl gantry stop is taken back from its worker, pods first: its pods go,
// its quota is released, and it waits (Pending, Stopped) with no pod anywhere while it is stopped.
// Resumed with kubectl gantry resume, it runs again and completes. In the workers' etcd ledger every pod
// of the first run is deleted before the first pod of the second exists, and no job runs in two places
// or completes twice.
func TestAStoppedJobIsTakenBackPodsFirstAndRunsAgainWhenResumed(t *testing.T) {
	ns := newNamespace(t, "e2e-stop")
	dumpOnFailure(t, ns)
	queue(t, ns, "stop", gantry.GlobalQueueSpec{Clusters: []gantry.ClusterQuota{{Name: "worker-1",
		Quota: corev1.ResourceList{gantry.GPUResource: *resource.NewQuantity(8, resource.DecimalSI)}}}})
	job := jobIn(makeJob(ns, "train").gpus(8).runsFor("20s"), "stop")
	submit(t, job)
	podsLive(t, ns, []*batchv1.Job{job}, 2*time.Minute)
	at := runningOn(t, job)

	if out := kubectlGantry(t, "stop", "train", "-n", ns); !strings.Contains(out, "job/train stopped") {
		t.Errorf("kubectl gantry stop: %q", out)
	}
	eventually(t, "train taken back: no pod on "+at+", Pending Stopped, no quota used", 2*time.Minute, poll, func() error {
		if n, err := podsOn(at, job); err != nil || n > 0 {
			return fmt.Errorf("%d pods on %s (%v)", n, at, err)
		}
		wl := hubWorkload(t, job)
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending); wl.Status.Winner() != "" || c == nil || c.Reason != gantry.ReasonStopped {
			return fmt.Errorf("winner %q, pending %+v", wl.Status.Winner(), c)
		}
		return gpusUsed(ns+"-stop", at, 0)
	})
	if out := kubectlGantry(t, "stop", "train", "-n", ns); !strings.Contains(out, "already stopped") {
		t.Errorf("kubectl gantry stop, again: %q", out)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		for _, w := range []string{"worker-1", "worker-2"} {
			if n, err := podsOn(w, job); err != nil || n > 0 {
				t.Fatalf("stopped, train has %d pods on %s (%v)", n, w, err)
			}
		}
	}

	if out := kubectlGantry(t, "resume", "train", "-n", ns); !strings.Contains(out, "job/train resumed") {
		t.Errorf("kubectl gantry resume: %q", out)
	}
	allComplete(t, []*batchv1.Job{job}, 3*time.Minute)
	checkFirstRunGoneFirst(t, ns, job)
	checkOneRun(t, ns)
}

// gpusUsed says whether the GlobalQueue's status counts gpus GPUs admitted on the cluster.
func gpusUsed(globalQueue, cluster string, gpus int64) error {
	var gq gantry.GlobalQueue
	if err := tb.Hub.Client.Get(context.Background(), client.ObjectKey{Name: globalQueue}, &gq); err != nil {
		return err
	}
	for _, u := range gq.Status.Usage {
		if q := u.Admitted[gantry.GPUResource]; u.Name == cluster && q.Value() != gpus {
			return fmt.Errorf("%s uses %s GPUs on %s, want %d", globalQueue, q.String(), cluster, gpus)
		}
	}
	return nil
}

// checkFirstRunGoneFirst checks over the ledger that every pod of the job's first epoch was deleted
// before the first pod of a later epoch was created.
func checkFirstRunGoneFirst(t *testing.T, ns string, job *batchv1.Job) {
	t.Helper()
	if err := audit.Sync(context.Background()); err != nil {
		t.Fatalf("syncing the etcd ledger: %v", err)
	}
	pods := audit.Pods(ns)
	firstEpoch, secondFirst := "", int64(-1)
	epoch := func(r testbed.PodRecord) int { n, _ := strconv.Atoi(r.Epoch); return n }
	for _, r := range pods {
		if strings.HasPrefix(r.Name, job.Name+"-") && (firstEpoch == "" || epoch(r) < epoch(testbed.PodRecord{Epoch: firstEpoch})) {
			firstEpoch = r.Epoch
		}
	}
	for _, r := range pods {
		if strings.HasPrefix(r.Name, job.Name+"-") && r.Epoch != firstEpoch && (secondFirst < 0 || r.Revision < secondFirst) {
			secondFirst = r.Revision
		}
	}
	if secondFirst < 0 {
		t.Fatalf("the ledger shows no pod of %s after its first epoch %s", job.Name, firstEpoch)
	}
	last := map[string]bool{} // pod name of the first epoch -> deleted at its last record before secondFirst
	lastRev := map[string]int64{}
	for _, r := range pods {
		if strings.HasPrefix(r.Name, job.Name+"-") && r.Epoch == firstEpoch && r.Revision < secondFirst && r.Revision >= lastRev[r.Name] {
			last[r.Name], lastRev[r.Name] = r.Deleted, r.Revision
		}
	}
	if len(last) == 0 {
		t.Fatalf("the ledger shows no pod of %s's first epoch %s", job.Name, firstEpoch)
	}
	for name, deleted := range last {
		if !deleted {
			t.Errorf("pod %s of the first run still there when the resumed run's first pod was created (revision %d)", name, secondFirst)
		}
	}
}

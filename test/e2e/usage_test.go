package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
			if r.TakenBack {
				sums.lost += s
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

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// A job that runs, is stopped (its run taken back), runs again and succeeds has both runs counted in
// its namespace's Usage exactly once: the GPU-seconds its Workload's runs hold, the stopped one lost,
// nothing in flight once the Workload is marked; deleted, its Workload goes.
func TestUsageCountsEachRunOnce(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "usage", map[string]int64{"worker-1": 4})
	ns := newNamespace(t, "usage")
	dumpOnFailure(t, ns)

	train := gpuJob(ns, "train", 1, 4)
	submit(t, train)
	if where := runsOn(t, train); where != "worker-1" {
		t.Fatalf("runs on %s", where)
	}
	time.Sleep(2 * time.Second) // runs of whole seconds, to count
	setStopped(t, train, true)
	playGarbageCollector(t, "worker-1", train)
	pendingReason(t, train, gantry.ReasonStopped)
	setStopped(t, train, false)
	if where := runsOn(t, train); where != "worker-1" {
		t.Fatalf("resumed, runs on %s", where)
	}
	time.Sleep(2 * time.Second)
	completeRemote(t, "worker-1", train)
	hubJobComplete(t, train)

	var want gantry.UsageEntry
	eventually(t, "the Usage counting both runs, the Workload marked", func() error {
		wl := hubWorkload(t, train)
		if len(wl.Status.Runs) != 2 || wl.Status.Runs[1].Ended == nil || wl.Status.AccountedEpoch != wl.Status.Runs[1].Epoch {
			return fmt.Errorf("runs %+v, accounted epoch %d", wl.Status.Runs, wl.Status.AccountedEpoch)
		}
		want = gantry.UsageEntry{Queue: wl.Spec.QueueName, GlobalQueue: "usage", Cluster: "worker-1"}
		for _, r := range wl.Status.Runs {
			seconds := r.GPUs * int64(r.Ended.Sub(r.Started.Time)/time.Second)
			want.GPUSeconds += seconds
			if r.TakenBack {
				want.LostGPUSeconds += seconds
			}
		}
		var u gantry.Usage
		if err := hubEnv.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: gantry.UsageName}, &u); err != nil {
			return err
		}
		if len(u.Status.InFlight) != 0 {
			return fmt.Errorf("in flight: %v", u.Status.InFlight)
		}
		if len(u.Status.Totals) != 1 || len(u.Status.Days) == 0 {
			return fmt.Errorf("usage %+v", u.Status)
		}
		got := u.Status.Totals[0]
		got.GPUProduct = ""
		if got != want {
			return fmt.Errorf("totals %+v, want %+v", got, want)
		}
		return nil
	})
	if want.LostGPUSeconds < 8 || want.GPUSeconds < 16 {
		t.Errorf("runs of %+v: shorter than the test let them run", want)
	}

	// The hub's garbage collector deletes the Workload with its job; the test's API server has none.
	deleteJob(t, train)
	if err := hubEnv.client.Delete(context.Background(), hubWorkload(t, train)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted job's Workload gone", func() error {
		var wls gantry.WorkloadList
		if err := hubEnv.client.List(context.Background(), &wls, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(wls.Items) > 0 {
			return fmt.Errorf("%d Workloads, finalizers %v", len(wls.Items), wls.Items[0].Finalizers)
		}
		return nil
	})
}

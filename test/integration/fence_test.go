package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// fenceTimeout is the shortest failover timeout the API accepts.
const fenceTimeout = 30 * time.Second

// eventuallyWithin is eventually with a wait of its own, for steps that wait out a failover timeout.
func eventuallyWithin(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s: %v", d, what, err)
}

// setFailover sets both workers' failover policy. The returned function, called while a hub runs, sets
// Wait again and waits until each worker's lease says so, so that no lease left behind stops the Jobs of
// later tests; cleanup sets Wait in any case.
func setFailover(t *testing.T, policy gantry.FailoverPolicy) func() {
	t.Helper()
	update := func(p gantry.FailoverPolicy) {
		for _, n := range names {
			eventually(t, "setting the failover policy of "+n, func() error {
				var wc gantry.WorkerCluster
				if err := hubEnv.client.Get(context.Background(), types.NamespacedName{Name: n}, &wc); err != nil {
					return err
				}
				wc.Spec.Failover = gantry.Failover{Policy: p, Timeout: &metav1.Duration{Duration: fenceTimeout}}
				return hubEnv.client.Update(context.Background(), &wc)
			})
		}
	}
	update(policy)
	for _, n := range names {
		leaseSays(t, n, policy)
	}
	t.Cleanup(func() { update(gantry.FailoverWait) })
	return func() {
		update(gantry.FailoverWait)
		for _, n := range names {
			leaseSays(t, n, gantry.FailoverWait)
		}
	}
}

// leaseSays waits until the hub's lease on the worker carries the policy.
func leaseSays(t *testing.T, worker string, policy gantry.FailoverPolicy) {
	t.Helper()
	eventually(t, "the hub's lease on "+worker+" saying "+string(policy), func() error {
		var l coordinationv1.Lease
		key := types.NamespacedName{Namespace: gantry.GantryNamespace, Name: gantry.HubLeaseName}
		if err := workers[worker].client.Get(context.Background(), key, &l); err != nil {
			return err
		}
		if got := l.Annotations[gantry.FailoverPolicyAnnotation]; got != string(policy) {
			return fmt.Errorf("policy %q", got)
		}
		return nil
	})
}

// suspendedByTheAgent waits until the agent of the worker suspended the Job there.
func suspendedByTheAgent(t *testing.T, worker string, job *batchv1.Job) {
	t.Helper()
	eventuallyWithin(t, fenceTimeout+30*time.Second, "the agent of "+worker+" suspending the job", func() error {
		var j batchv1.Job
		if err := workers[worker].client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		if !ptr.Deref(j.Spec.Suspend, false) || j.Annotations[gantry.SuspendedByAnnotation] != gantry.SuspendedByFence {
			return fmt.Errorf("suspend %v, annotations %v", j.Spec.Suspend, j.Annotations)
		}
		return nil
	})
}

// TestFenceDispatchesALostWorkersJobElsewhere: under the failover policy Fence, a worker the hub loses
// has its agent suspend the job once the hub's lease lapses; the hub, after the timeout plus its margin,
// dispatches the job elsewhere as WorkerLost; when the worker is back, the old Job there is removed,
// pods first.
func TestFenceDispatchesALostWorkersJobElsewhere(t *testing.T) {
	rh := startHub(t)
	newGlobalQueue(t, "fenced", map[string]int64{"worker-1": 8, "worker-2": 8})
	ns := newNamespace(t, "fenced")
	dumpOnFailure(t, ns)
	reset := setFailover(t, gantry.FailoverFence)
	job := gpuJob(ns, "lost", 1, 8)
	submit(t, job)
	first := runsOn(t, job)
	other := map[string]string{"worker-1": "worker-2", "worker-2": "worker-1"}[first]
	restore := cutOff(t, rh, first)
	suspendedByTheAgent(t, first, job)
	// The hub has not moved it yet: the margin covers the pods' termination after the suspension.
	if wl := hubWorkload(t, job); wl.Status.Winner() != first {
		t.Fatalf("moved to %q before the fence was due", wl.Status.Winner())
	}
	eventuallyWithin(t, 2*fenceTimeout+30*time.Second, "the job evicted as WorkerLost and running on "+other, func() error {
		wl := hubWorkload(t, job)
		if n := len(wl.Status.Evictions); n == 0 || wl.Status.Evictions[n-1].Reason != gantry.ReasonWorkerLost {
			return fmt.Errorf("evictions %+v", wl.Status.Evictions)
		}
		if wl.Status.Winner() != other {
			return fmt.Errorf("winner %q", wl.Status.Winner())
		}
		var j batchv1.Job
		return workers[other].client.Get(context.Background(), client.ObjectKeyFromObject(job), &j)
	})
	restore()
	playGarbageCollector(t, first, job)
	if where, err := remoteJobs(job); err != nil || len(where) != 1 || where[0] != other {
		t.Fatalf("job on %v (%v), want only on %s", where, err, other)
	}
	reset()
}

// TestFenceResumesInPlaceAfterAHubOutage: the hub is down for longer than the failover timeout, so the
// agent suspends the job; the worker was never lost, so the hub, back, resumes the job where it is
// rather than dispatching it again.
func TestFenceResumesInPlaceAfterAHubOutage(t *testing.T) {
	rh := startHub(t)
	newGlobalQueue(t, "outage", map[string]int64{"worker-1": 8, "worker-2": 8})
	ns := newNamespace(t, "outage")
	dumpOnFailure(t, ns)
	reset := setFailover(t, gantry.FailoverFence)
	job := gpuJob(ns, "outage", 1, 8)
	submit(t, job)
	winner := runsOn(t, job)
	rh.stop()
	suspendedByTheAgent(t, winner, job)
	startHub(t)
	eventually(t, "the job resumed in place", func() error {
		var j batchv1.Job
		if err := workers[winner].client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		if ptr.Deref(j.Spec.Suspend, false) || j.Annotations[gantry.SuspendedByAnnotation] != "" {
			return fmt.Errorf("suspend %v, annotations %v", j.Spec.Suspend, j.Annotations)
		}
		return nil
	})
	if wl := hubWorkload(t, job); wl.Status.Winner() != winner || len(wl.Status.Evictions) > 0 {
		t.Fatalf("winner %q, evictions %+v: dispatched again instead of resumed", wl.Status.Winner(), wl.Status.Evictions)
	}
	if where, err := remoteJobs(job); err != nil || len(where) != 1 {
		t.Fatalf("job on %v (%v)", where, err)
	}
	reset()
}

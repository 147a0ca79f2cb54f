package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
	"github.com/gantry-dev/gantry/jobkind"
	"github.com/gantry-dev/gantry/test/testcluster"
)

// cutOff makes the hub lose a worker: its registration Secret points at an address nothing listens on.
// The returned function restores it.
func cutOff(t *testing.T, rh *runningHub, name string) func() {
	t.Helper()
	bad := *hubEnv.cfg
	bad.Host = "https://127.0.0.1:1"
	kc, err := testcluster.Kubeconfig(&bad)
	if err != nil {
		t.Fatal(err)
	}
	restore := swapKubeconfig(t, rh, name, kc)
	eventually(t, name+" disconnected", func() error {
		if rh.hub.Connections.IsConnected(name) {
			return fmt.Errorf("still connected")
		}
		return nil
	})
	return restore
}

// setKubeconfig writes the kubeconfig into the worker's registration Secret and returns the one it held.
func setKubeconfig(t *testing.T, name string, kc []byte) []byte {
	t.Helper()
	ctx := context.Background()
	key := types.NamespacedName{Namespace: hubNamespace, Name: name + "-kubeconfig"}
	var old []byte
	eventually(t, "updating the kubeconfig of "+name, func() error {
		var s corev1.Secret
		if err := hubEnv.client.Get(ctx, key, &s); err != nil {
			return err
		}
		old = s.Data[workerconfig.SecretKey]
		s.Data[workerconfig.SecretKey] = kc
		return hubEnv.client.Update(ctx, &s)
	})
	return old
}

// swapKubeconfig registers the worker with another kubeconfig. The returned function, also run at
// cleanup, puts the earlier one back and waits until the hub is connected again.
func swapKubeconfig(t *testing.T, rh *runningHub, name string, kc []byte) func() {
	t.Helper()
	good := setKubeconfig(t, name, kc)
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		setKubeconfig(t, name, good)
		eventually(t, name+" connected again", func() error {
			if !rh.hub.Connections.IsConnected(name) {
				return fmt.Errorf("not connected")
			}
			return nil
		})
	}
	t.Cleanup(restore)
	return restore
}

// playGarbageCollector removes the foreground-deletion finalizer from a Job on a worker being deleted:
// no garbage collector runs here, so the test says its pods are gone.
func playGarbageCollector(t *testing.T, cluster string, job *batchv1.Job) {
	t.Helper()
	c := workers[cluster].client
	eventually(t, "the job on "+cluster+" deleted pods first, then gone", func() error {
		var j batchv1.Job
		err := c.Get(context.Background(), client.ObjectKeyFromObject(job), &j)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if j.DeletionTimestamp == nil || !slices.Contains(j.Finalizers, metav1.FinalizerDeleteDependents) {
			return fmt.Errorf("not deleted in the foreground: %v", j.Finalizers)
		}
		j.Finalizers = nil
		if err := c.Update(context.Background(), &j); err != nil {
			return err
		}
		return fmt.Errorf("finalizer removed; waiting for it to go")
	})
}

func workloadCondition(t *testing.T, ns, name, typ string) *metav1.Condition {
	t.Helper()
	var wl gantry.Workload
	if err := hubEnv.client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &wl); err != nil {
		t.Fatal(err)
	}
	return apimeta.FindStatusCondition(wl.Status.Conditions, typ)
}

// TestAWorkerJobDeletedBySomeoneElseIsNotCreatedAgain: the worker Job is deleted by hand before the hub
// mirrored any start (no Job controller runs here, so it never does). The hub must not create it again:
// the Workload finishes as RemoteJobLost and the hub Job says Failed.
func TestAWorkerJobDeletedBySomeoneElseIsNotCreatedAgain(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "lost", map[string]int64{"worker-1": 8})
	ns := newNamespace(t, "lost")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "lost", 1, 1)
	submit(t, job)
	winner := runsOn(t, job)
	eventually(t, "the creation recorded", func() error {
		if c := workloadCondition(t, ns, jobkind.WorkloadName(jobkind.Job{}, job.Name), gantry.WorkloadJobCreated); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("JobCreated %+v", c)
		}
		return nil
	})
	var remoteJob batchv1.Job
	if err := workers[winner].client.Get(context.Background(), client.ObjectKeyFromObject(job), &remoteJob); err != nil {
		t.Fatal(err)
	}
	// As kubectl delete does: background propagation, so it goes at once here, without a garbage collector.
	if err := workers[winner].client.Delete(context.Background(), &remoteJob, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Workload finished as lost and the hub Job failed", func() error {
		c := workloadCondition(t, ns, jobkind.WorkloadName(jobkind.Job{}, job.Name), gantry.WorkloadFinished)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != gantry.ReasonRemoteJobLost {
			return fmt.Errorf("Finished %+v", c)
		}
		var j batchv1.Job
		if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		for _, jc := range j.Status.Conditions {
			if jc.Type == batchv1.JobFailed && jc.Status == corev1.ConditionTrue && jc.Reason == gantry.ReasonRemoteJobLost {
				return nil
			}
		}
		return fmt.Errorf("hub job status %+v", j.Status)
	})
	consistently(t, "the Job is not created again", 2*time.Second, func() error {
		if where, err := remoteJobs(job); err != nil || len(where) > 0 {
			return fmt.Errorf("job on %v (%v)", where, err)
		}
		return nil
	})
}

// TestDeletingWhileTheWinnerIsUnreachable: a Workload whose Job may still run on a worker the hub cannot
// reach stays, says why, and keeps its quota, so a second job cannot take that room; once the worker is
// back, the Job there is removed (pods first) and only then the Workload goes.
func TestDeletingWhileTheWinnerIsUnreachable(t *testing.T) {
	rh := startHub(t)
	newGlobalQueue(t, "unreach", map[string]int64{"worker-1": 8})
	ns := newNamespace(t, "unreach")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "first", 1, 8)
	submit(t, job)
	if w := runsOn(t, job); w != "worker-1" {
		t.Fatalf("runs on %s", w)
	}
	restore := cutOff(t, rh, "worker-1")
	deleteJob(t, job)
	wlName := jobkind.WorkloadName(jobkind.Job{}, job.Name)
	eventually(t, "the Workload held, saying why", func() error {
		c := workloadCondition(t, ns, wlName, gantry.WorkloadDeleting)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != gantry.ReasonWaitingForWorker {
			return fmt.Errorf("Deleting %+v", c)
		}
		return nil
	})
	restore()
	second := gpuJob(ns, "second", 1, 8)
	submit(t, second)
	consistently(t, "the second job waits for quota while the first may run", 2*time.Second, func() error {
		if where, err := remoteJobs(second); err != nil || len(where) > 0 {
			return fmt.Errorf("second job on %v (%v)", where, err)
		}
		return nil
	})
	playGarbageCollector(t, "worker-1", job)
	workloadGone(t, ns, wlName)
	if w := runsOn(t, second); w != "worker-1" {
		t.Fatalf("second runs on %s", w)
	}
}

// TestResubmittedUnderTheSameNameWhileUnreachable: a finished job is deleted while its worker is
// unreachable (nothing runs, so its Workload goes), and a new job of the same name is submitted. When the
// worker is back, the old Job there is removed and the new job runs there: the name is not held for good.
func TestResubmittedUnderTheSameNameWhileUnreachable(t *testing.T) {
	rh := startHub(t)
	newGlobalQueue(t, "resubmit", map[string]int64{"worker-1": 8})
	ns := newNamespace(t, "resubmit")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "again", 1, 1)
	submit(t, job)
	if w := runsOn(t, job); w != "worker-1" {
		t.Fatalf("runs on %s", w)
	}
	completeRemote(t, "worker-1", job)
	hubJobComplete(t, job)
	var old batchv1.Job
	if err := workers["worker-1"].client.Get(context.Background(), client.ObjectKeyFromObject(job), &old); err != nil {
		t.Fatal(err)
	}
	restore := cutOff(t, rh, "worker-1")
	deleteJob(t, job)
	workloadGone(t, ns, jobkind.WorkloadName(jobkind.Job{}, job.Name))
	eventually(t, "the old hub Job gone", func() error {
		var j batchv1.Job
		if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); !apierrors.IsNotFound(err) {
			return fmt.Errorf("hub job still there: %v", err)
		}
		return nil
	})
	again := gpuJob(ns, "again", 1, 1)
	submit(t, again)
	restore()
	eventually(t, "the new job runs on worker-1, the old Job removed", func() error {
		var j batchv1.Job
		if err := workers["worker-1"].client.Get(context.Background(), client.ObjectKeyFromObject(again), &j); err != nil {
			return err
		}
		if j.UID == old.UID {
			if j.DeletionTimestamp != nil && len(j.Finalizers) > 0 {
				j.Finalizers = nil // no garbage collector here
				_ = workers["worker-1"].client.Update(context.Background(), &j)
			}
			return fmt.Errorf("the old Job is still there")
		}
		return nil
	})
}

// setFenced sets the operator's word on a WorkerCluster.
func setFenced(t *testing.T, name string, fenced bool) {
	t.Helper()
	eventually(t, "fencing "+name, func() error {
		var wc gantry.WorkerCluster
		if err := hubEnv.client.Get(context.Background(), types.NamespacedName{Name: name}, &wc); err != nil {
			return err
		}
		wc.Spec.Fenced = fenced
		return hubEnv.client.Update(context.Background(), &wc)
	})
}

// TestAFencedWorkersJobsRunElsewhere: the operator fences a worker the hub lost. Its job is dispatched
// again at once, recorded as WorkerLost, and runs on the other worker; when the fenced worker is back,
// what was left of the job there is removed, pods first, while the job runs on only one cluster.
func TestAFencedWorkersJobsRunElsewhere(t *testing.T) {
	rh := startHub(t)
	newGlobalQueue(t, "fence", map[string]int64{"worker-1": 8, "worker-2": 8})
	ns := newNamespace(t, "fence")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "fenced", 1, 8)
	submit(t, job)
	first := runsOn(t, job)
	other := "worker-2"
	if first == "worker-2" {
		other = "worker-1"
	}
	restore := cutOff(t, rh, first)
	setFenced(t, first, true)
	t.Cleanup(func() { setFenced(t, first, false) })
	eventually(t, "the job evicted as WorkerLost and running on "+other, func() error {
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
}

// TestAWorkloadDeletedByHandAfterItsJobStartedIsNotRunAgain: the Job started on its worker (its status
// reached the hub), then someone deletes its hub Workload. The Job there is removed, and the hub Job is
// marked Failed (RanBefore) instead of getting a new Workload that would run it again.
func TestAWorkloadDeletedByHandAfterItsJobStartedIsNotRunAgain(t *testing.T) {
	deleteWorkloadByHand(t, "byhand", true)
}

// TestAWorkloadDeletedByHandBeforeItsJobsStartReachedTheHubIsNotRunAgain: the same, when the hub Job
// does not show yet that it started (as when its worker was cut off from the hub right after the Job
// was created there): that the Workload was admitted there is enough.
func TestAWorkloadDeletedByHandBeforeItsJobsStartReachedTheHubIsNotRunAgain(t *testing.T) {
	deleteWorkloadByHand(t, "byhand-early", false)
}

// deleteWorkloadByHand runs a job, deletes its hub Workload by hand, and checks that the Job on its
// worker is removed, the hub Job is marked Failed (RanBefore) and nothing runs it again; started says
// whether its start reached the hub Job first.
func deleteWorkloadByHand(t *testing.T, name string, started bool) {
	startHub(t)
	newGlobalQueue(t, name, map[string]int64{"worker-1": 8})
	ns := newNamespace(t, name)
	dumpOnFailure(t, ns)
	job := gpuJob(ns, name, 1, 1)
	submit(t, job)
	winner := runsOn(t, job)
	if started {
		startAndMirror(t, winner, job)
	}
	wl := hubWorkload(t, job)
	if err := hubEnv.client.Delete(context.Background(), wl); err != nil {
		t.Fatal(err)
	}
	playGarbageCollector(t, winner, job)
	workloadGone(t, ns, wl.Name)
	eventually(t, "the hub Job failed as RanBefore", func() error {
		var j batchv1.Job
		if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason == gantry.ReasonRanBefore {
				return nil
			}
		}
		return fmt.Errorf("status %+v", j.Status)
	})
	consistently(t, "no new Workload and no Job on any worker", 2*time.Second, func() error {
		var again gantry.Workload
		if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(wl), &again); !apierrors.IsNotFound(err) {
			return fmt.Errorf("a Workload is back: %v", err)
		}
		if where, err := remoteJobs(job); err != nil || len(where) > 0 {
			return fmt.Errorf("job on %v (%v)", where, err)
		}
		return nil
	})
}

// startAndMirror plays the worker's Job controller, starting the job there, and waits until its start
// is mirrored to the hub Job.
func startAndMirror(t *testing.T, winner string, job *batchv1.Job) {
	t.Helper()
	eventually(t, "the job started on "+winner, func() error {
		var j batchv1.Job
		if err := workers[winner].client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		start := metav1.Now()
		j.Status.StartTime, j.Status.Active = &start, 1
		return workers[winner].client.Status().Update(context.Background(), &j)
	})
	eventually(t, "the start mirrored to the hub Job", func() error {
		var j batchv1.Job
		if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		if j.Status.StartTime == nil {
			return fmt.Errorf("status %+v", j.Status)
		}
		return nil
	})
}

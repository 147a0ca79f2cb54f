package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
	"github.com/gantry-dev/gantry/test/testcluster"
)

func TestJobIsHeldOnTheHub(t *testing.T) {
	newGlobalQueue(t, "held", map[string]int64{"worker-1": 8})
	ns := newNamespace(t, "held")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "held", 1, 1)
	submit(t, job)
	if job.Spec.ManagedBy == nil || *job.Spec.ManagedBy != gantry.JobManagedBy || !ptr.Deref(job.Spec.Suspend, false) {
		t.Fatalf("the admission policy did not hand the Job to Gantry: managedBy=%v suspend=%v", job.Spec.ManagedBy, job.Spec.Suspend)
	}
}

func TestDispatchToTheOnlyClusterWithRoom(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "room", map[string]int64{"worker-1": 0, "worker-2": 8})
	ns := newNamespace(t, "room")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "train", 2, 4)
	submit(t, job)
	if got := runsOn(t, job); got != "worker-2" {
		t.Fatalf("job runs on %s, want worker-2 (the only cluster with quota)", got)
	}
	completeRemote(t, "worker-2", job)
	hubJobComplete(t, job)
	eventually(t, "workload finished", func() error {
		wl := hubWorkload(t, job)
		if !apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadFinished) {
			return fmt.Errorf("conditions %+v", wl.Status.Conditions)
		}
		return nil
	})
	// A first dispatch is told by the Admitted Event alone: one Event written per job, not two.
	events := hubEvents(t, ns, job.Name)
	if !contains(events, "Admitted") || contains(events, "Dispatched") {
		t.Errorf("the hub Job's events, want Admitted and no Dispatched:\n%s", events)
	}
}

func TestBothWorkersAdmitExactlyOneRuns(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "race", map[string]int64{"worker-1": 16, "worker-2": 16})
	ns := newNamespace(t, "race")
	dumpOnFailure(t, ns)
	var submitted []*batchv1.Job
	for i := 0; i < 6; i++ {
		job := gpuJob(ns, fmt.Sprintf("race-%d", i), 1, 2)
		// A job that names its GPU product goes to both workers at once, whatever their reports say:
		// their room is not reported per product (dispatch/alone.go). So both admit, and race.
		job.Spec.Template.Spec.NodeSelector = map[string]string{gantry.GPUProductLabel: testcluster.GPUProduct}
		submit(t, job)
		submitted = append(submitted, job)
	}
	for _, job := range submitted {
		winner := runsOn(t, job)
		wl := hubWorkload(t, job)
		if wl.Status.Winner() != winner {
			t.Errorf("%s: recorded winner %q, Job runs on %s", job.Name, wl.Status.Winner(), winner)
		}
		if len(wl.Status.Nominated()) != 2 {
			t.Errorf("%s: nominated %v, want copies on both workers", job.Name, wl.Status.Nominated())
		}
		// The losing copy is withdrawn, so its agent no longer reserves room for it.
		loser := other(winner)
		eventually(t, "copy withdrawn from "+loser, func() error {
			var cp gantry.Workload
			err := workers[loser].client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: wl.Name}, &cp)
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("copy still on %s: %v", loser, err)
		})
	}
	consistently(t, "every job on exactly one worker", 2*time.Second, func() error {
		for _, job := range submitted {
			where, err := remoteJobs(job)
			if err != nil {
				return err
			}
			if len(where) != 1 {
				return fmt.Errorf("%s on %v", job.Name, where)
			}
		}
		return nil
	})
	for _, job := range submitted {
		deleteJob(t, job)
	}
}

// TestAJobWithRoomGoesToOneWorkerAlone: where the best worker's capacity report leaves room for a job
// with a margin, its copy goes there alone: it is nominated to that worker only, and the other holds
// no copy of it.
func TestAJobWithRoomGoesToOneWorkerAlone(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "alone", map[string]int64{"worker-1": 16, "worker-2": 16})
	ns := newNamespace(t, "alone")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "alone", 1, 1)
	submit(t, job)
	winner := runsOn(t, job)
	if got := hubWorkload(t, job).Status.Nominated(); !slices.Equal(got, []string{winner}) {
		t.Errorf("nominated %v, want %s alone", got, winner)
	}
	var cp gantry.Workload
	if err := workers[other(winner)].client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: hubWorkload(t, job).Name}, &cp); !apierrors.IsNotFound(err) {
		t.Errorf("a copy on %s (%v), want none", other(winner), err)
	}
}

func TestQuotaPerClusterHolds(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "quota", map[string]int64{"worker-1": 8})
	ns := newNamespace(t, "quota")
	dumpOnFailure(t, ns)
	first := gpuJob(ns, "first", 1, 6)
	submit(t, first)
	runsOn(t, first)
	second := gpuJob(ns, "second", 1, 6)
	submit(t, second)
	pendingReason(t, second, gantry.ReasonWaitingForQuota)
	consistently(t, "second job waits for quota", time.Second, func() error {
		if where, err := remoteJobs(second); err != nil || len(where) > 0 {
			return fmt.Errorf("second job is on %v (%v)", where, err)
		}
		return nil
	})
	eventually(t, "GlobalQueue status shows the usage", func() error {
		var gq gantry.GlobalQueue
		if err := hubEnv.client.Get(context.Background(), types.NamespacedName{Name: "quota"}, &gq); err != nil {
			return err
		}
		st := gq.Status
		if st.AdmittedWorkloads != 1 || st.PendingWorkloads != 1 || len(st.Usage) != 1 ||
			st.Usage[0].Admitted.Name(gantry.GPUResource, "").Value() != 6 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	completeRemote(t, "worker-1", first)
	if got := runsOn(t, second); got != "worker-1" {
		t.Fatalf("second job runs on %s", got)
	}
	deleteJob(t, first)
	deleteJob(t, second)
}

func TestDeletingTheHubJobCleansWorkers(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "cleanup", map[string]int64{"worker-1": 8, "worker-2": 8})
	ns := newNamespace(t, "cleanup")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "doomed", 1, 1)
	submit(t, job)
	winner := runsOn(t, job)
	deleteJob(t, job)
	var remote batchv1.Job
	eventually(t, "workers cleaned, the Job deleted pods first", func() error {
		for _, n := range names {
			var cp gantry.Workload
			if err := workers[n].client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}, &cp); !apierrors.IsNotFound(err) {
				return fmt.Errorf("copy still on %s", n)
			}
		}
		if err := workers[winner].client.Get(context.Background(), client.ObjectKeyFromObject(job), &remote); err != nil {
			return fmt.Errorf("job on %s: %v", winner, err)
		}
		if remote.DeletionTimestamp == nil || !slices.Contains(remote.Finalizers, metav1.FinalizerDeleteDependents) {
			return fmt.Errorf("job on %s not deleted in the foreground: finalizers %v", winner, remote.Finalizers)
		}
		return nil
	})
	// While the Job's pods may still run, the Workload stays, so that nothing dispatches it again.
	consistently(t, "the hub Workload stays while its Job is on the worker", 2*time.Second, func() error {
		var wl gantry.Workload
		return hubEnv.client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}, &wl)
	})
	// No garbage collector runs here: play it, the pods are gone.
	remote.Finalizers = nil
	if err := workers[winner].client.Update(context.Background(), &remote); err != nil {
		t.Fatal(err)
	}
	workloadGone(t, ns, jobkind.WorkloadName(jobkind.Job{}, job.Name))
}

func TestStatusReachesTheHubJob(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "status", map[string]int64{"worker-1": 8})
	ns := newNamespace(t, "status")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "observed", 2, 1)
	submit(t, job)
	runsOn(t, job)
	// A running Job: the hub shows its active pods.
	eventually(t, "remote job running", func() error {
		var j batchv1.Job
		if err := workers["worker-1"].client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		now := metav1.Now()
		j.Status.StartTime, j.Status.Active = &now, 2
		return workers["worker-1"].client.Status().Update(context.Background(), &j)
	})
	eventually(t, "hub job shows 2 active pods", func() error {
		var j batchv1.Job
		if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		if j.Status.Active != 2 || j.Status.StartTime == nil {
			return fmt.Errorf("status %+v", j.Status)
		}
		return nil
	})
	completeRemote(t, "worker-1", job)
	hubJobComplete(t, job)
	// ttlSecondsAfterFinished is not passed to the worker: the worker keeps the finished Job.
	var j batchv1.Job
	if err := workers["worker-1"].client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
		t.Fatal(err)
	}
	if j.Spec.TTLSecondsAfterFinished != nil {
		t.Errorf("remote job has ttlSecondsAfterFinished %d", *j.Spec.TTLSecondsAfterFinished)
	}
	deleteJob(t, job)
}

func TestForeignJobOfTheSameNameIsNeverTouched(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "foreign", map[string]int64{"worker-1": 8, "worker-2": 8})
	ns := newNamespace(t, "foreign")
	dumpOnFailure(t, ns)
	// A Job of the same name already runs on worker-1, created by someone else.
	theirs := gpuJob(ns, "shared-name", 1, 1)
	theirs.Labels = map[string]string{"owner": "someone-else"}
	if err := workers["worker-1"].client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := workers["worker-1"].client.Create(context.Background(), theirs); err != nil {
		t.Fatal(err)
	}
	job := gpuJob(ns, "shared-name", 1, 1)
	submit(t, job)
	eventually(t, "job created on worker-2", func() error {
		var j batchv1.Job
		return workers["worker-2"].client.Get(context.Background(), client.ObjectKeyFromObject(job), &j)
	})
	var j batchv1.Job
	if err := workers["worker-1"].client.Get(context.Background(), client.ObjectKeyFromObject(theirs), &j); err != nil {
		t.Fatalf("the foreign Job is gone: %v", err)
	}
	if j.Labels[gantry.WorkloadUIDLabel] != "" || j.UID != theirs.UID {
		t.Fatalf("the foreign Job was adopted or replaced: %+v", j.ObjectMeta)
	}
	deleteJob(t, job)
}

func TestHubRestartDuringDispatch(t *testing.T) {
	newGlobalQueue(t, "restart", map[string]int64{"worker-1": 32, "worker-2": 32})
	ns := newNamespace(t, "restart")
	dumpOnFailure(t, ns)
	var submitted []*batchv1.Job
	h := startHub(t)
	for i := 0; i < 10; i++ {
		job := gpuJob(ns, fmt.Sprintf("restart-%d", i), 1, 1)
		submitted = append(submitted, job)
		submit(t, job)
	}
	// Stop the hub while the burst is being dispatched, then start a new one.
	h.stop()
	startHub(t)
	for _, job := range submitted {
		winner := runsOn(t, job)
		if wl := hubWorkload(t, job); wl.Status.Winner() != winner {
			t.Errorf("%s: recorded winner %q, Job runs on %s", job.Name, wl.Status.Winner(), winner)
		}
	}
	consistently(t, "no job duplicated", 2*time.Second, func() error {
		for _, job := range submitted {
			if where, err := remoteJobs(job); err != nil || len(where) != 1 {
				return fmt.Errorf("%s on %v (%v)", job.Name, where, err)
			}
		}
		return nil
	})
	for _, job := range submitted {
		deleteJob(t, job)
	}
}

// TestResumeFromEveryPersistedStep starts a hub over Workloads whose status was persisted at each step
// of dispatch, as a crash would leave them, and checks that each resumes to exactly one Job.
func TestResumeFromEveryPersistedStep(t *testing.T) {
	newGlobalQueue(t, "resume", map[string]int64{"worker-1": 32, "worker-2": 32})
	ns := newNamespace(t, "resume")
	dumpOnFailure(t, ns)
	ctx := context.Background()
	steps := map[string]func(wl *gantry.Workload){
		"nominated, no copies yet": func(wl *gantry.Workload) {
			wl.Status.DispatchEpoch, wl.Status.NominatedClusters = 1, []string{"worker-1", "worker-2"}
		},
		"winner recorded, no Job yet": func(wl *gantry.Workload) {
			wl.Status.DispatchEpoch, wl.Status.NominatedClusters = 1, []string{"worker-1", "worker-2"}
			wl.Status.ClusterName = "worker-2"
			apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: gantry.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: gantry.ReasonAdmittedByCluster})
		},
	}
	var submitted []*batchv1.Job
	want := map[string]string{}
	for name, step := range steps {
		job := gpuJob(ns, fmt.Sprintf("resume-%d", len(submitted)), 1, 1)
		submit(t, job)
		submitted = append(submitted, job)
		// No hub runs yet: play the Job controller's part, then persist the step.
		wl, err := jobkind.NewWorkload(jobkind.Job{}, job, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := hubEnv.client.Create(ctx, wl); err != nil {
			t.Fatal(err)
		}
		step(wl)
		if err := hubEnv.client.Status().Update(ctx, wl); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want[job.Name] = wl.Status.Winner()
	}
	startHub(t)
	for _, job := range submitted {
		got := runsOn(t, job)
		if w := want[job.Name]; w != "" && got != w {
			t.Errorf("%s runs on %s, but %s was the recorded winner", job.Name, got, w)
		}
	}
	for _, job := range submitted {
		deleteJob(t, job)
	}
}

func other(cluster string) string {
	if cluster == "worker-1" {
		return "worker-2"
	}
	return "worker-1"
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestWaitingJobShowsTheAgentsReason: a job that the only cluster with quota cannot hold now says, on the
// hub, what that cluster's agent said.
func TestWaitingJobShowsTheAgentsReason(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "explain", map[string]int64{"worker-2": 64}) // worker-2 only
	ns := newNamespace(t, "explain")
	dumpOnFailure(t, ns)
	cpuJob := func(name string, pods int32) *batchv1.Job {
		job := gpuJob(ns, name, pods, 0)
		c := &job.Spec.Template.Spec.Containers[0]
		c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("40")
		c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("40")
		return job
	}
	first := cpuJob("first", 1) // takes 40 of one node's 64 CPUs
	submit(t, first)
	if got := runsOn(t, first); got != "worker-2" {
		t.Fatalf("first runs on %s, want worker-2", got)
	}
	second := cpuJob("second", 2) // needs 40 CPUs on each of the two nodes
	submit(t, second)
	var cond *metav1.Condition
	eventually(t, "second's hub workload repeating worker-2's reason", func() error {
		cond = pendingReason(t, second, gantry.ReasonWaitingForAdmission)
		if !strings.Contains(cond.Message, "worker-2: "+gantry.ReasonInsufficientResources+": ") || !strings.Contains(cond.Message, "cpu") {
			return fmt.Errorf("message %q does not carry worker-2's explanation", cond.Message)
		}
		return nil
	})
	t.Logf("hub says: %s", cond.Message)
}

// TestPlacementTimeoutDispatchesAgain plays an agent that gives up a running Job because its pods could
// not all be placed. The hub must remove the Job there (waiting until it is gone), clear the hub Job's
// mirrored status, record the eviction and dispatch the workload again, so that it runs on exactly one
// worker in a new epoch.
func TestPlacementTimeoutDispatchesAgain(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "evict", map[string]int64{"worker-1": 16, "worker-2": 16})
	ns := newNamespace(t, "evict")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "train", 2, 8)
	submit(t, job)
	first := runsOn(t, job)
	ctx := context.Background()
	wl := hubWorkload(t, job)
	epoch := wl.Status.DispatchEpoch

	// The worker's Job controller started a pod, which the hub mirrors.
	var remote batchv1.Job
	if err := workers[first].client.Get(ctx, client.ObjectKeyFromObject(job), &remote); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	remote.Status.StartTime, remote.Status.Active = &now, 1
	if err := workers[first].client.Status().Update(ctx, &remote); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the hub Job mirroring the started pod", func() error {
		var j batchv1.Job
		if err := hubEnv.client.Get(ctx, client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		if j.Status.Active != 1 {
			return fmt.Errorf("active %d", j.Status.Active)
		}
		return nil
	})

	// The agent gives the copy up.
	var cp gantry.Workload
	if err := workers[first].client.Get(ctx, client.ObjectKeyFromObject(wl), &cp); err != nil {
		t.Fatal(err)
	}
	apimeta.SetStatusCondition(&cp.Status.Conditions, metav1.Condition{Type: gantry.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: gantry.ReasonPlacementTimeout, Message: "1 of 2 pods not placed on a node 5m0s after their placement began",
		ObservedGeneration: cp.Generation})
	if err := workers[first].client.Status().Update(ctx, &cp); err != nil {
		t.Fatal(err)
	}

	// The hub deletes the Job in the foreground; no garbage collector runs here, so the test plays it
	// once the hub has asked, and checks that nothing was dispatched again before.
	eventually(t, "the hub deleting the Job on "+first, func() error {
		var j batchv1.Job
		if err := workers[first].client.Get(ctx, client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		if j.DeletionTimestamp == nil {
			return fmt.Errorf("not being deleted")
		}
		if !slices.Contains(j.Finalizers, metav1.FinalizerDeleteDependents) {
			return fmt.Errorf("deleted without foreground propagation: finalizers %v", j.Finalizers)
		}
		return nil
	})
	consistently(t, "the winner kept while its Job is still there", time.Second, func() error {
		if w := hubWorkload(t, job); w.Status.Winner() != first || w.Status.DispatchEpoch != epoch {
			return fmt.Errorf("winner %q epoch %d while the Job on %s is not gone", w.Status.Winner(), w.Status.DispatchEpoch, first)
		}
		return nil
	})
	if err := workers[first].client.Get(ctx, client.ObjectKeyFromObject(job), &remote); err != nil {
		t.Fatal(err)
	}
	remote.Finalizers = nil
	if err := workers[first].client.Update(ctx, &remote); err != nil {
		t.Fatal(err)
	}

	// Dispatched again: a new epoch, the eviction on record, exactly one Job.
	var again *gantry.Workload
	eventually(t, "a new winner in a new epoch", func() error {
		again = hubWorkload(t, job)
		if again.Status.Winner() == "" || again.Status.DispatchEpoch <= epoch {
			return fmt.Errorf("winner %q epoch %d", again.Status.Winner(), again.Status.DispatchEpoch)
		}
		return nil
	})
	if ev := again.Status.Evictions; len(ev) != 1 || ev[0].Cluster != first || ev[0].Epoch != epoch || ev[0].Reason != gantry.ReasonPlacementTimeout {
		t.Errorf("evictions %+v, want one from %s in epoch %d", ev, first, epoch)
	}
	second := runsOn(t, job)
	if second != again.Status.Winner() {
		t.Errorf("job runs on %s, winner is %s", second, again.Status.Winner())
	}
	var j batchv1.Job
	if err := workers[second].client.Get(ctx, client.ObjectKeyFromObject(job), &j); err != nil {
		t.Fatal(err)
	}
	if got := j.Labels[gantry.DispatchEpochLabel]; got != fmt.Sprint(again.Status.DispatchEpoch) {
		t.Errorf("job on %s has epoch %s, want %d", second, got, again.Status.DispatchEpoch)
	}
	if events := hubEvents(t, ns, job.Name); !contains(events, "Evicted") {
		t.Errorf("no Evicted event on the hub Job; events:\n%s", events)
	}
	// The Job runs to completion there, and the hub reports it.
	completeRemote(t, second, job)
	hubJobComplete(t, job)
}

// TestWorkloadOfAJobGoneWhileTheHubWasDownIsDeleted: no garbage collector runs here, so only the hub can
// notice, when it starts, that a Workload's Job is gone.
func TestWorkloadOfAJobGoneWhileTheHubWasDownIsDeleted(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "leftover")
	job := gpuJob(ns, "gone", 1, 1)
	job.UID = "0c9f1f9e-0000-4000-8000-000000000001" // never created
	wl, err := jobkind.NewWorkload(jobkind.Job{}, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := hubEnv.client.Create(ctx, wl); err != nil {
		t.Fatal(err)
	}
	startHub(t)
	eventually(t, "the leftover workload deleted", func() error {
		var got gantry.Workload
		if err := hubEnv.client.Get(ctx, client.ObjectKeyFromObject(wl), &got); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch/workersync"
	"github.com/gantry-dev/gantry/jobkind"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// nothingLeftAfterDeletion deletes every hub Job of the namespace and waits until no copy, Job, pod or
// PodGroup of Gantry's is left in it on any worker, and no Workload on the hub.
func nothingLeftAfterDeletion(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := tb.Hub.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns),
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	owned := client.HasLabels{gantry.WorkloadUIDLabel}
	eventually(t, "nothing of Gantry's left in "+ns, 3*time.Minute, poll, func() error {
		var left []string
		var wls gantry.WorkloadList
		if err := tb.Hub.Client.List(ctx, &wls, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, wl := range wls.Items {
			left = append(left, "hub workload "+wl.Name)
		}
		for _, w := range tb.Workers {
			var copies gantry.WorkloadList
			var jobs batchv1.JobList
			var pods corev1.PodList
			var podGroups schedulingv1beta1.PodGroupList
			lists := []client.ObjectList{&copies, &jobs, &pods}
			if w.Name == gangWorker {
				lists = append(lists, &podGroups)
			}
			for _, l := range lists {
				if err := w.Client.List(ctx, l, client.InNamespace(ns), owned); err != nil {
					return err
				}
			}
			for _, c := range copies.Items {
				left = append(left, w.Name+" copy "+c.Name)
			}
			for _, j := range jobs.Items {
				left = append(left, w.Name+" job "+j.Name)
			}
			for _, p := range pods.Items {
				left = append(left, w.Name+" pod "+p.Name)
			}
			for _, g := range podGroups.Items {
				left = append(left, w.Name+" PodGroup "+g.Name)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("left: %s", strings.Join(left, ", "))
		}
		return nil
	})
}

// leaseHolder returns the holder of a leader election lease in gantry-system.
func leaseHolder(c *testbed.Cluster, name string) (string, error) {
	var l coordinationv1.Lease
	if err := c.Client.Get(context.Background(), types.NamespacedName{Namespace: gantry.GantryNamespace, Name: name}, &l); err != nil {
		return "", err
	}
	return ptr.Deref(l.Spec.HolderIdentity, ""), nil
}

// restart kills a testbed process with SIGKILL, as a crash or an OOM kill would, starts it again from
// the same command line and waits until the new process leads: it holds the leader election lease of
// that name on that cluster.
func restart(t *testing.T, name string, c *testbed.Cluster, lease string) {
	t.Helper()
	p, err := tb.Process(name)
	if err != nil {
		t.Fatal(err)
	}
	before, err := leaseHolder(c, lease)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, name+" gone", 30*time.Second, 100*time.Millisecond, func() error {
		if p.Running() {
			return fmt.Errorf("pid %d still running", p.PID)
		}
		return nil
	})
	if _, err := tb.Start(name, p.Args); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new "+name+" leading", 2*time.Minute, poll, func() error {
		if now, err := leaseHolder(c, lease); err != nil || now == before || now == "" {
			return fmt.Errorf("lease held by %q (%v)", now, err)
		}
		return nil
	})
}

// TestHubAndAgentKilledWhileDispatching kills the hub and an agent with SIGKILL, in turns, while a burst
// of jobs is being nominated, admitted, won and created, so the kills land between the steps: after the
// winner is recorded and before its Job is created, before the losers are withdrawn, in the middle of
// an agent's admission. Every job completes, each Job is created once on one worker, the ledger shows
// no job in two places, and nothing is left once the jobs are deleted.
func TestHubAndAgentKilledWhileDispatching(t *testing.T) {
	ns := newNamespace(t, "e2e-kills")
	dumpOnFailure(t, ns)
	const hubLease, agentLease = "gantry-hub", "gantry-agent.gantry.dev"
	kills := []func(){
		func() { restart(t, "gantry-hub", tb.Hub, hubLease) },
		func() { restart(t, "gantry-agent-1", tb.Worker("worker-1"), agentLease) },
		func() { restart(t, "gantry-hub", tb.Hub, hubLease) },
		func() { restart(t, "gantry-agent-2", tb.Worker("worker-2"), agentLease) },
	}
	var submitted []*batchv1.Job
	for round, kill := range kills {
		// Each kill lands while the round's jobs are somewhere between nomination and running.
		for i := range 4 {
			// Half of them gangs of two: on worker-2 their PodGroups go through the kills too.
			job := makeJob(ns, fmt.Sprintf("job-%d-%d", round, i)).pods(int32(1 + i%2)).gpus(int64(4 / (1 + i%2))).runsFor("5s").obj()
			submitted = append(submitted, job)
			submit(t, job)
		}
		kill()
	}
	allComplete(t, submitted, 5*time.Minute)
	checkPromiseKept(t, submitted)
}

// checkPromiseKept checks over the ledgers that the submitted jobs (of one namespace) ran once, each
// Job created once on its winner; then deletes them and checks that nothing of them is left.
func checkPromiseKept(t *testing.T, submitted []*batchv1.Job) {
	t.Helper()
	checkOneRun(t, submitted[0].Namespace)
	checkCreatedOnceOnTheWinner(t, submitted)
	nothingLeftAfterDeletion(t, submitted[0].Namespace)
}

// checkCreatedOnceOnTheWinner checks the etcd ledger: each job's Job was created exactly once, on the
// winner its hub Workload records.
func checkCreatedOnceOnTheWinner(t *testing.T, submitted []*batchv1.Job) {
	t.Helper()
	a := auditJobs(t, submitted[0].Namespace)
	for _, job := range submitted {
		wl := hubWorkload(t, job)
		if created := a.created[job.Name]; len(created) != 1 || created[0] != wl.Status.ClusterName {
			t.Errorf("job %s was created on %v, want once on its winner %q", job.Name, created, wl.Status.ClusterName)
		}
	}
}

// checkStayed checks that the hub kept the job on the cluster it ran on: the same winner, no eviction.
func checkStayed(t *testing.T, job *batchv1.Job, at string) {
	t.Helper()
	if wl := hubWorkload(t, job); wl.Status.ClusterName != at || len(wl.Status.Evictions) != 0 {
		t.Errorf("the hub moved %s: winner %q (was %s), evictions %+v", job.Name, wl.Status.ClusterName, at, wl.Status.Evictions)
	}
}

// runningOn waits until the job's pods all run on one worker and returns it.
func runningOn(t *testing.T, job *batchv1.Job) string {
	t.Helper()
	var at string
	eventually(t, job.Name+" running on a worker", 2*time.Minute, poll, func() error {
		var err error
		if at, err = winnerOf(job); err != nil {
			return err
		}
		if n, err := podsOn(at, job); err != nil || n != int(*job.Spec.Parallelism) {
			return fmt.Errorf("%d pods running on %s (%v)", n, at, err)
		}
		return nil
	})
	return at
}

// TestAWorkerUnreachableUnderWaitKeepsItsJob: under the default policy Wait the hub loses the worker a
// job runs on. Nothing moves: the Workload says the cluster is unreachable, the hub Job gets a Warning
// Event, the job runs on where it is. When the worker is back the hub sees it finish.
func TestAWorkerUnreachableUnderWaitKeepsItsJob(t *testing.T) {
	ns := newNamespace(t, "e2e-wait")
	dumpOnFailure(t, ns)
	job := makeJob(ns, "stays").pods(2).gpus(4).runsFor("20s").obj()
	submit(t, job)
	at := runningOn(t, job)
	restore := cutOff(t, at)
	eventually(t, "the Workload saying "+at+" is unreachable", 2*time.Minute, poll, func() error {
		wl := hubWorkload(t, job)
		c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadClusterReachable)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, at) {
			return fmt.Errorf("conditions %s", conditions(wl.Status.Conditions))
		}
		return nil
	})
	eventually(t, "a Warning Event on the hub Job", time.Minute, poll, func() error {
		return warningEvent(ns, job.Name, workersync.EventUnreachable)
	})
	// The job finishes on the worker the hub does not reach.
	eventually(t, "the job's pods finishing on "+at, 2*time.Minute, poll, func() error {
		if n, err := podsOn(at, job); err != nil || n != 0 {
			return fmt.Errorf("%d pods still running on %s (%v)", n, at, err)
		}
		return nil
	})
	checkStayed(t, job, at)
	restore()
	allComplete(t, []*batchv1.Job{job}, 2*time.Minute)
	checkPromiseKept(t, []*batchv1.Job{job})
}

func warningEvent(ns, object, reason string) error {
	var events corev1.EventList
	if err := tb.Hub.Client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Name == object && e.Type == corev1.EventTypeWarning && e.Reason == reason {
			return nil
		}
	}
	return fmt.Errorf("no Warning %s on %s among %d events", reason, object, len(events.Items))
}

// TestFenceHealsBeforeTheHubMovesTheJob: under Fence the hub loses the worker a gang runs on, long enough
// for the agent to suspend the Job (its pods go), but the worker is back before the hub's timeout plus
// margin. The hub resumes the Job in place: same worker, same epoch, no eviction, its pods back.
func TestFenceHealsBeforeTheHubMovesTheJob(t *testing.T) {
	ns := newNamespace(t, "e2e-fence-heal")
	dumpOnFailure(t, ns)
	const timeout = 30 * time.Second
	setFailover(t, gantry.FailoverFence, timeout)
	// It runs longer than the timeout, so that it is still running when its agent suspends it.
	job := makeJob(ns, "resumed").pods(2).gpus(8).runsFor("75s").stopsWithin(2).obj()
	submit(t, job)
	at := runningOn(t, job)
	restore := cutOff(t, at)
	eventually(t, "the agent of "+at+" suspending the gang", timeout+time.Minute, poll, func() error {
		var c gantry.Workload
		if err := tb.Worker(at).Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}, &c); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(c.Status.Conditions, gantry.WorkloadSuspended) {
			return fmt.Errorf("copy conditions %s", conditions(c.Status.Conditions))
		}
		if n, err := podsOn(at, job); err != nil || n != 0 {
			return fmt.Errorf("%d pods still on %s (%v)", n, at, err)
		}
		return nil
	})
	restore()
	eventually(t, "the gang running again on "+at, 2*time.Minute, poll, func() error {
		if n, err := podsOn(at, job); err != nil || n != 2 {
			return fmt.Errorf("%d pods running on %s (%v)", n, at, err)
		}
		return nil
	})
	checkStayed(t, job, at)
	// Resumed in place is what this test is about; the job's end is the user's (deleted here).
	checkPromiseKept(t, []*batchv1.Job{job})
}

// TestAWorkersControlPlaneRestarted stops the control plane of the worker a job runs on (etcd, API
// server, controller manager, scheduler; its kwok nodes go on) and starts it again. The hub holds the
// job (policy Wait); afterwards it runs to completion there, once, and the worker takes new work.
func TestAWorkersControlPlaneRestarted(t *testing.T) {
	ns := newNamespace(t, "e2e-restart")
	dumpOnFailure(t, ns)
	// Its pod is still starting when the control plane stops: it runs across the outage.
	job := makeJob(ns, "survives").gpus(4).runsFor("10s").obj()
	submit(t, job)
	at := runningOn(t, job)
	agent, err := tb.Process("gantry-agent-" + strings.TrimPrefix(at, "worker-"))
	if err != nil {
		t.Fatal(err)
	}
	start, err := tb.StopControlPlane(at)
	if err != nil {
		t.Fatal(err)
	}
	started := false
	t.Cleanup(func() {
		if !started {
			_ = start()
		}
	})
	eventually(t, "the Workload saying "+at+" is unreachable", 2*time.Minute, poll, func() error {
		wl := hubWorkload(t, job)
		c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadClusterReachable)
		if c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("conditions %s", conditions(wl.Status.Conditions))
		}
		return nil
	})
	started = true
	if err := start(); err != nil {
		t.Fatal(err)
	}
	// An agent that could not renew its leader lease while its API server was down exits, and its
	// Deployment starts it again; here the test stands in for the Deployment.
	if !agent.Running() {
		t.Logf("%s exited during the outage (its leader lease lapsed); starting it again", agent.Name)
		if _, err := tb.Start(agent.Name, agent.Args); err != nil {
			t.Fatal(err)
		}
	}
	allComplete(t, []*batchv1.Job{job}, 3*time.Minute)
	checkStayed(t, job, at)
	eventually(t, at+"'s agent reporting again", 2*time.Minute, poll, func() error {
		var wc gantry.WorkerCluster
		if err := tb.Hub.Client.Get(context.Background(), types.NamespacedName{Name: at}, &wc); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(wc.Status.Conditions, gantry.ClusterAgentReady) {
			return fmt.Errorf("conditions %s", conditions(wc.Status.Conditions))
		}
		return nil
	})
	checkPromiseKept(t, []*batchv1.Job{job})
}

// TestDeletionsWhileAWorkerIsUnreachable deletes a hub Job, and the hub Workload of another job, while
// the worker each runs on is unreachable from the hub. Both Workloads wait (Deleting, quota held)
// instead of letting go while their Jobs may run; when the worker is back, the Jobs there are removed.
// The job whose Workload was deleted by hand is not run again: its hub Job fails as RanBefore.
func TestDeletionsWhileAWorkerIsUnreachable(t *testing.T) {
	ns := newNamespace(t, "e2e-delete-cut")
	dumpOnFailure(t, ns)
	ctx := context.Background()
	byJob := makeJob(ns, "job-deleted").gpus(4).runsFor("10m").obj()
	byWorkload := makeJob(ns, "workload-deleted").gpus(4).runsFor("10m").obj()
	submit(t, byJob)
	submit(t, byWorkload)
	at := map[string]string{byJob.Name: runningOn(t, byJob), byWorkload.Name: runningOn(t, byWorkload)}
	var restores []func()
	for _, w := range testbed.WorkerNames {
		if w == at[byJob.Name] || w == at[byWorkload.Name] {
			restores = append(restores, cutOff(t, w))
		}
	}
	eventually(t, "the hub losing the workers", 2*time.Minute, poll, func() error {
		for _, j := range []*batchv1.Job{byJob, byWorkload} {
			c := apimeta.FindStatusCondition(hubWorkload(t, j).Status.Conditions, gantry.WorkloadClusterReachable)
			if c == nil || c.Status != metav1.ConditionFalse {
				return fmt.Errorf("%s: ClusterReachable %v", j.Name, c)
			}
		}
		return nil
	})
	if err := tb.Hub.Client.Delete(ctx, byJob, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	if err := tb.Hub.Client.Delete(ctx, hubWorkload(t, byWorkload)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both Workloads waiting for their workers", time.Minute, poll, func() error {
		for _, j := range []*batchv1.Job{byJob, byWorkload} {
			wl := hubWorkload(t, j)
			if wl.DeletionTimestamp == nil || !apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadDeleting) {
				return fmt.Errorf("%s: deleting %v, conditions %s", j.Name, wl.DeletionTimestamp, conditions(wl.Status.Conditions))
			}
		}
		return nil
	})
	for _, j := range []*batchv1.Job{byJob, byWorkload} {
		if n, err := podsOn(at[j.Name], j); err != nil || n != 1 {
			t.Fatalf("%s: %d pods on %s while it is unreachable (%v), want it left running", j.Name, n, at[j.Name], err)
		}
	}
	for _, restore := range restores {
		restore()
	}
	for _, j := range []*batchv1.Job{byJob, byWorkload} {
		eventually(t, "the Job "+j.Name+" removed from "+at[j.Name], 2*time.Minute, poll, func() error {
			return workerJobGone(tb.Worker(at[j.Name]), j)
		})
	}
	eventually(t, "the hub Job whose Workload was deleted failing as RanBefore", time.Minute, poll, func() error {
		var j batchv1.Job
		if err := tb.Hub.Client.Get(ctx, client.ObjectKeyFromObject(byWorkload), &j); err != nil {
			return err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason == gantry.ReasonRanBefore {
				return nil
			}
		}
		return fmt.Errorf("hub Job conditions %+v", j.Status.Conditions)
	})
	checkOneRun(t, ns)
	a := auditJobs(t, ns)
	for _, j := range []*batchv1.Job{byJob, byWorkload} {
		if created := a.created[j.Name]; len(created) != 1 {
			t.Errorf("job %s was created on %v, want once", j.Name, created)
		}
	}
	nothingLeftAfterDeletion(t, ns)
}

// TestAJobWithTTLZeroIsSeenCompleteBeforeItGoes submits a Job with ttlSecondsAfterFinished: 0. The hub's
// TTL controller deletes it as soon as it finishes; before that the hub Job must show Complete (never
// Failed), it ran once, and nothing of it is left anywhere.
func TestAJobWithTTLZeroIsSeenCompleteBeforeItGoes(t *testing.T) {
	ns := newNamespace(t, "e2e-ttl")
	dumpOnFailure(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	job := makeJob(ns, "ttl-zero").gpus(1).runsFor("3s").obj()
	job.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
	w, err := tb.Hub.Clientset.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + job.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	submit(t, job)
	var complete, failed, deleted bool
	for ev := range w.ResultChan() {
		j, ok := ev.Object.(*batchv1.Job)
		if !ok {
			t.Fatalf("watch event %s: %v", ev.Type, ev.Object)
		}
		complete = complete || jobCondition(j, batchv1.JobComplete)
		failed = failed || jobCondition(j, batchv1.JobFailed)
		if ev.Type == watch.Deleted {
			deleted = true
			break
		}
	}
	if !deleted || !complete || failed {
		t.Fatalf("hub Job: deleted %v, seen Complete %v, seen Failed %v; want deleted after Complete, never Failed", deleted, complete, failed)
	}
	checkOneRun(t, ns)
	if created := auditJobs(t, ns).created[job.Name]; len(created) != 1 {
		t.Errorf("job %s was created on %v, want once", job.Name, created)
	}
	nothingLeftAfterDeletion(t, ns)
}

// TestABurstOnLittleRoomWithItsQueueDeletedMidway submits 20 jobs to a GlobalQueue whose quota holds 4
// of them at a time, on one worker, and deletes their Queue while they run. Admitted jobs go on and
// keep counting; the others wait (QueueNotFound) and are not lost; once the Queue is back they all run.
// The etcd ledger shows at no instant more GPUs live than the quota, and nothing on the other worker.
func TestABurstOnLittleRoomWithItsQueueDeletedMidway(t *testing.T) {
	ns := newNamespace(t, "e2e-burst")
	dumpOnFailure(t, ns)
	ctx := context.Background()
	const quotaGPUs = 16
	gq := &gantry.GlobalQueue{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: gantry.GlobalQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: corev1.ResourceList{
				gantry.GPUResource: *resource.NewQuantity(quotaGPUs, resource.DecimalSI), corev1.ResourceCPU: resource.MustParse("64")}}},
		},
	}
	if err := tb.Hub.Client.Create(ctx, gq); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.Hub.Client.Delete(context.Background(), gq) })
	queue := func() *gantry.Queue {
		return &gantry.Queue{ObjectMeta: metav1.ObjectMeta{Name: "burst", Namespace: ns}, Spec: gantry.QueueSpec{GlobalQueue: gq.Name}}
	}
	if err := tb.Hub.Client.Create(ctx, queue()); err != nil {
		t.Fatal(err)
	}
	var submitted []*batchv1.Job
	for i := range 20 {
		job := makeJob(ns, fmt.Sprintf("burst-%d", i)).gpus(4).runsFor("3s").obj()
		job.Labels[gantry.QueueLabel] = "burst"
		submitted = append(submitted, job)
		submit(t, job)
	}
	eventually(t, "the first jobs admitted", 2*time.Minute, poll, func() error {
		_, err := winnerOf(submitted[0])
		return err
	})
	if err := tb.Hub.Client.Delete(ctx, queue()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "waiting jobs saying their Queue is missing", time.Minute, poll, func() error {
		var wls gantry.WorkloadList
		if err := tb.Hub.Client.List(ctx, &wls, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, wl := range wls.Items {
			if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending); c != nil && c.Reason == gantry.ReasonQueueNotFound {
				return nil
			}
		}
		return fmt.Errorf("no Workload Pending as %s", gantry.ReasonQueueNotFound)
	})
	if err := tb.Hub.Client.Create(ctx, queue()); err != nil {
		t.Fatal(err)
	}
	allComplete(t, submitted, 5*time.Minute)
	checkOneRun(t, ns)
	if err := audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := testbed.CheckQuota(audit.Pods(ns), map[string]int64{"worker-1": quotaGPUs}); err != nil {
		t.Errorf("the etcd ledger shows the quota exceeded:\n%v", err)
	}
	checkCreatedOnceOnTheWinner(t, submitted)
	nothingLeftAfterDeletion(t, ns)
}

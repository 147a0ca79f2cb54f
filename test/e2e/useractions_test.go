package e2e

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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// ownQueue gives the namespace a GlobalQueue of its own, with gpus GPUs of quota on worker-1 and none
// elsewhere, and a Queue of it that the namespace's jobs name.
func ownQueue(t *testing.T, ns string, gpus int64) {
	t.Helper()
	ownQueueOn(t, ns, "worker-1", gpus)
}

// ownQueueOn gives the namespace a GlobalQueue of its own with quota on one cluster only.
func ownQueueOn(t *testing.T, ns, cluster string, gpus int64) {
	t.Helper()
	ctx := context.Background()
	gq := &gantry.GlobalQueue{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: gantry.GlobalQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Clusters: []gantry.ClusterQuota{{Name: cluster, Quota: corev1.ResourceList{
				gantry.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI), corev1.ResourceCPU: resource.MustParse("64")}}},
		},
	}
	if err := tb.Hub.Client.Create(ctx, gq); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.Hub.Client.Delete(context.Background(), gq) })
	q := &gantry.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: queueName}}
	if err := changeOnHub(q, func(q *gantry.Queue) { q.Spec.GlobalQueue = gq.Name }); err != nil {
		t.Fatal(err)
	}
}

// changeJob changes a hub Job, read afresh; a conflict with the hub's writes reads it again.
func changeJob(t *testing.T, job *batchv1.Job, change func(*batchv1.Job)) error {
	t.Helper()
	return changeOnHub(job.DeepCopy(), change)
}

// changeOnHub reads obj afresh from the hub by its key, changes it and updates it; a conflict with
// another writer (the hub writes the status of Jobs, Queues and GlobalQueues) reads it again.
func changeOnHub[T client.Object](obj T, change func(T)) error {
	var err error
	for range 20 {
		if err = tb.Hub.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		if err = tb.Hub.Client.Update(context.Background(), obj); !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

// TestJobsChangedWhileTheyWaitNeverExceedTheQuota: two Jobs wait in a queue of 9 GPUs on worker-1 while
// others hold it. One's parallelism is raised from 1 to 3, the other's GPUs from 1 to 8. Each gets a
// Workload made anew that counts what it now asks for, and runs as it is now. Once a job ran, a change
// of its parallelism is refused. The etcd ledger of every pod shows at no instant more than 9 GPUs live
// on worker-1, and each job ran once.
func TestJobsChangedWhileTheyWaitNeverExceedTheQuota(t *testing.T) {
	ns := newNamespace(t, "e2e-changed")
	dumpOnFailure(t, ns)
	const quota = 9
	ownQueue(t, ns, quota)
	holders := []*batchv1.Job{
		makeJob(ns, "holds-8").gpus(8).runsFor("15s").obj(),
		makeJob(ns, "holds-1").gpus(1).runsFor("15s").obj(),
	}
	for _, j := range holders {
		submit(t, j)
	}
	for _, j := range holders {
		runningOn(t, j)
	}
	wider := makeJob(ns, "wider").gpus(1).runsFor("5s").obj()
	wider.Spec.Completions = ptr.To[int32](3) // fixed at creation; parallelism is not
	bigger := makeJob(ns, "bigger").gpus(1).runsFor("5s").obj()
	for _, j := range []*batchv1.Job{wider, bigger} {
		submit(t, j)
	}
	before := map[string]string{}
	for _, j := range []*batchv1.Job{wider, bigger} {
		eventually(t, j.Name+" waiting for quota", time.Minute, poll, func() error {
			wl := hubWorkload(t, j)
			if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending); c == nil || c.Reason != gantry.ReasonWaitingForQuota {
				return fmt.Errorf("conditions %s", conditions(wl.Status.Conditions))
			}
			before[j.Name] = string(wl.UID)
			return nil
		})
	}
	if err := changeJob(t, wider, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](3) }); err != nil {
		t.Fatalf("raising the parallelism of a waiting Job: %v", err)
	}
	if err := changeJob(t, bigger, func(j *batchv1.Job) {
		r := &j.Spec.Template.Spec.Containers[0].Resources
		r.Requests[gantry.GPUResource], r.Limits[gantry.GPUResource] = resource.MustParse("8"), resource.MustParse("8")
	}); err != nil {
		t.Fatalf("raising the GPUs of a waiting Job: %v", err)
	}
	for _, w := range []struct {
		job        *batchv1.Job
		pods, gpus int64
	}{{wider, 3, 1}, {bigger, 1, 8}} {
		eventually(t, "the Workload of "+w.job.Name+" made anew", time.Minute, poll, func() error {
			wl := hubWorkload(t, w.job)
			ps := wl.Spec.PodSets[0]
			if gpus := ps.Requests[gantry.GPUResource]; string(wl.UID) == before[w.job.Name] || int64(ps.Count) != w.pods || gpus.Value() != w.gpus {
				return fmt.Errorf("Workload %s counts %d pods x %s GPUs", wl.UID, ps.Count, gpus.String())
			}
			return nil
		})
	}
	allComplete(t, append(holders, wider, bigger), 4*time.Minute)
	for _, w := range []struct {
		job  *batchv1.Job
		pods int
	}{{wider, 3}, {bigger, 1}} {
		if n := ranPods(t, w.job); n != w.pods {
			t.Errorf("%d pods of %s ran, want %d", n, w.job.Name, w.pods)
		}
	}
	err := changeJob(t, wider, func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](5) })
	if err == nil || !strings.Contains(err.Error(), "delete it and submit it again") {
		t.Errorf("raising the parallelism of a Job that ran: %v, want it refused", err)
	}
	checkOneRun(t, ns)
	if err := testbed.CheckQuota(audit.Pods(ns), map[string]int64{"worker-1": quota}); err != nil {
		t.Errorf("the etcd ledger shows the quota exceeded:\n%v", err)
	}
	checkCreatedOnceOnTheWinner(t, append(holders, wider, bigger))
	nothingLeftAfterDeletion(t, ns)
}

// ranPods counts the pods of a job's Workload that the etcd ledger saw on any worker.
func ranPods(t *testing.T, job *batchv1.Job) int {
	t.Helper()
	if err := audit.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	uid := string(hubWorkload(t, job).UID)
	seen := map[string]bool{}
	for _, p := range audit.Pods(job.Namespace) {
		if p.WorkloadUID == uid {
			seen[p.Cluster+"/"+p.Name] = true
		}
	}
	return len(seen)
}

// TestAJobResubmittedUnderItsNameRuns: a Job is deleted while its worker is cut off from the hub, and
// submitted again under the same name before the worker is back, as `kubectl delete -f; kubectl apply
// -f` does. Once the worker is back, the old Job is removed there and the old Workload lets go; the new
// Job, another UID, is never marked as the old one's (RanBefore): it gets its own Workload and runs.
func TestAJobResubmittedUnderItsNameRuns(t *testing.T) {
	ns := newNamespace(t, "e2e-resubmit")
	dumpOnFailure(t, ns)
	ctx := context.Background()
	first := makeJob(ns, "rerun").gpus(4).runsFor("10m").obj()
	submit(t, first)
	at := runningOn(t, first)
	restore := cutOff(t, at)
	eventually(t, "the hub losing "+at, 2*time.Minute, poll, func() error {
		c := apimeta.FindStatusCondition(hubWorkload(t, first).Status.Conditions, gantry.WorkloadClusterReachable)
		if c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("ClusterReachable %v", c)
		}
		return nil
	})
	if err := tb.Hub.Client.Delete(ctx, first, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the old Workload waiting for its worker", time.Minute, poll, func() error {
		if wl := hubWorkload(t, first); wl.DeletionTimestamp == nil {
			return fmt.Errorf("not deleting yet")
		}
		var j batchv1.Job
		if err := tb.Hub.Client.Get(ctx, client.ObjectKeyFromObject(first), &j); err == nil {
			return fmt.Errorf("the hub Job is still there")
		}
		return nil
	})
	again := makeJob(ns, "rerun").gpus(4).runsFor("5s").obj()
	submit(t, again)
	restore()
	eventually(t, "the old Job removed from "+at, 2*time.Minute, poll, func() error {
		var j batchv1.Job
		if err := tb.Worker(at).Client.Get(ctx, client.ObjectKeyFromObject(first), &j); err == nil && j.Labels[gantry.WorkloadUIDLabel] != "" {
			wl := hubWorkload(t, again)
			if j.Labels[gantry.WorkloadUIDLabel] != string(wl.UID) {
				return fmt.Errorf("the old Job is still on %s", at)
			}
		}
		return nil
	})
	allComplete(t, []*batchv1.Job{again}, 3*time.Minute)
	if wl := hubWorkload(t, again); metav1.GetControllerOf(wl).UID != again.UID {
		t.Errorf("the Workload of the new Job is owned by %s, want %s", metav1.GetControllerOf(wl).UID, again.UID)
	}
	checkOneRun(t, ns)
	nothingLeftAfterDeletion(t, ns)
}

// TestJobsNamingOneNodeDoNotOverbookIt: two 8-GPU Jobs whose pod templates name the same 8-GPU node
// (spec.nodeName, which the worker's scheduler does not check) run one after the other there: the agent
// admits the second only once the first left the node. The etcd ledger shows at no instant more than 8
// GPUs of live pods on that node, and each job ran once, there.
func TestJobsNamingOneNodeDoNotOverbookIt(t *testing.T) {
	ns := newNamespace(t, "e2e-nodename")
	dumpOnFailure(t, ns)
	const node = "w1-a100-3"
	var jobs []*batchv1.Job
	for _, name := range []string{"pinned-a", "pinned-b"} {
		j := makeJob(ns, name).gpus(8).runsFor("8s").obj()
		j.Spec.Template.Spec.NodeName = node
		jobs = append(jobs, j)
		submit(t, j)
	}
	allComplete(t, jobs, 3*time.Minute)
	checkOneRun(t, ns)
	live := map[string]int64{}
	for _, p := range sortedBySeen(audit.Pods(ns)) {
		if p.NodeName != node {
			t.Errorf("pod %s ran on %s/%s, not on the node its template names", p.Name, p.Cluster, p.NodeName)
		}
		if p.Live() {
			live[p.Name] = p.GPUs
		} else {
			delete(live, p.Name)
		}
		var used int64
		for _, g := range live {
			used += g
		}
		if used > 8 {
			t.Fatalf("the etcd ledger shows %d GPUs of live pods on %s at %s", used, node, p.Seen.Format(time.RFC3339Nano))
		}
	}
	checkCreatedOnceOnTheWinner(t, jobs)
	nothingLeftAfterDeletion(t, ns)
}

// sortedBySeen orders pod records as the ledger saw them.
func sortedBySeen(pods []testbed.PodRecord) []testbed.PodRecord {
	out := slices.Clone(pods)
	slices.SortStableFunc(out, func(a, b testbed.PodRecord) int { return a.Seen.Compare(b.Seen) })
	return out
}

// TestAWorkersNamespaceQuotaIsJudgedBeforeAdmission: the job's namespace on worker-1 has a
// ResourceQuota that admits no Job. worker-1's agent rejects it at once with the quota's words
// (NamespaceQuotaTooSmall), which the hub Workload's Pending condition and kubectl gantry explain
// repeat; once its queue may use worker-2, it runs there. Nothing of it was ever created on worker-1.
func TestAWorkersNamespaceQuotaIsJudgedBeforeAdmission(t *testing.T) {
	ns := newNamespace(t, "e2e-ns-quota")
	dumpOnFailure(t, ns)
	ctx := context.Background()
	ownQueue(t, ns, 8)
	w1 := tb.Worker("worker-1").Client
	if err := w1.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = w1.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-jobs", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}}}
	if err := w1.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the quota counted on worker-1", time.Minute, poll, func() error {
		if err := w1.Get(ctx, client.ObjectKeyFromObject(quota), quota); err != nil {
			return err
		}
		if _, ok := quota.Status.Hard["count/jobs.batch"]; !ok {
			return fmt.Errorf("status %+v", quota.Status)
		}
		return nil
	})
	job := makeJob(ns, "no-room-here").gpus(4).runsFor("5s").obj()
	submit(t, job)
	const words = "ResourceQuota no-jobs of namespace " + "e2e-ns-quota" + " allows 0 count/jobs.batch"
	eventually(t, "the Workload saying worker-1's quota does not hold the job", time.Minute, poll, func() error {
		var wl gantry.Workload
		if err := tb.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "job-" + job.Name}, &wl); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "worker-1") {
			return fmt.Errorf("Pending %+v", c)
		}
		for _, r := range wl.Status.RejectedClusters {
			if r.Name == "worker-1" && r.Reason == gantry.ReasonNamespaceQuotaTooSmall && strings.Contains(r.Message, words) {
				return nil
			}
		}
		return fmt.Errorf("rejections %+v", wl.Status.RejectedClusters)
	})
	if out := kubectlGantry(t, "explain", job.Name, "-n", ns); !strings.Contains(out, gantry.ReasonNamespaceQuotaTooSmall+": "+words) {
		t.Errorf("kubectl gantry explain says nothing of the quota:\n%s", out)
	}
	runsOnWorker2Once(t, ns, job)
}

// TestPodsAWorkerRefusesAreFoundBeforeItsJobIsCreated: a LimitRange on worker-1 refuses the job's pods,
// not its Job. The hub's dry run of the pods, with its least-privilege identity there, finds it before a
// Job is created: the Workload is taken back with the LimitRange's words (said by explain), and the job
// runs once, on worker-2, once its queue may use it; no Job was ever created on worker-1 (the ledger).
func TestPodsAWorkerRefusesAreFoundBeforeItsJobIsCreated(t *testing.T) {
	ns := newNamespace(t, "e2e-limits")
	dumpOnFailure(t, ns)
	ctx := context.Background()
	ownQueue(t, ns, 8)
	w1 := tb.Worker("worker-1").Client
	if err := w1.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = w1.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	limits := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "two-gpus", Namespace: ns},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Max: corev1.ResourceList{gantry.GPUResource: resource.MustParse("2")}}}}}
	if err := w1.Create(ctx, limits); err != nil {
		t.Fatal(err)
	}
	job := makeJob(ns, "too-wide-here").gpus(4).runsFor("5s").obj()
	submit(t, job)
	const words = "maximum nvidia.com/gpu usage per Container is 2, but limit is 4"
	eventually(t, "the Workload taken back from worker-1 with its LimitRange's words", time.Minute, poll, func() error {
		var wl gantry.Workload
		if err := tb.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "job-" + job.Name}, &wl); err != nil {
			return err
		}
		for _, e := range wl.Status.Evictions {
			if e.Cluster == "worker-1" && e.Reason == gantry.ReasonRemoteJobRefused && strings.Contains(e.Message, words) {
				return nil
			}
		}
		return fmt.Errorf("evictions %+v", wl.Status.Evictions)
	})
	if out := kubectlGantry(t, "explain", job.Name, "-n", ns); !strings.Contains(out, words) {
		t.Errorf("kubectl gantry explain says nothing of the LimitRange:\n%s", out)
	}
	runsOnWorker2Once(t, ns, job)
}

// runsOnWorker2Once lets the namespace's own GlobalQueue (ownQueue) use worker-2 too, and checks that
// the job, which worker-1 would not take, then runs once, on worker-2, and leaves nothing behind.
func runsOnWorker2Once(t *testing.T, ns string, job *batchv1.Job) {
	t.Helper()
	gq := &gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := changeOnHub(gq, func(gq *gantry.GlobalQueue) {
		gq.Spec.Clusters = append(gq.Spec.Clusters, gantry.ClusterQuota{Name: "worker-2",
			Quota: corev1.ResourceList{gantry.GPUResource: resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("64")}})
	}); err != nil {
		t.Fatal(err)
	}
	allComplete(t, []*batchv1.Job{job}, 3*time.Minute)
	if wl := hubWorkload(t, job); wl.Status.ClusterName != "worker-2" {
		t.Errorf("ran on %q, want worker-2", wl.Status.ClusterName)
	}
	checkOneRun(t, ns)
	checkCreatedOnceOnTheWinner(t, []*batchv1.Job{job})
	nothingLeftAfterDeletion(t, ns)
}

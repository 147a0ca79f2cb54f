package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
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
	"github.com/gantry-dev/gantry/internal/hubtest"
	"github.com/gantry-dev/gantry/jobkind"
)

const waitTimeout = 30 * time.Second

// eventually polls cond until it returns nil or the timeout passes, then fails with the last error.
// updateSpec changes the hub object of obj's kind and key, read afresh, and writes it; a conflict with
// the hub's own status writes reads it again.
func updateSpec[T client.Object](t *testing.T, obj T, change func(T)) {
	t.Helper()
	eventually(t, fmt.Sprintf("updating %T %s", obj, client.ObjectKeyFromObject(obj)), func() error {
		if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return hubEnv.client.Update(context.Background(), obj)
	})
}

// specChangeRefused checks that the hub refuses a change of the job's spec once it ran, as
// gantry-queued-job-fixed says, and that its own labels stay the user's.
func specChangeRefused[T client.Object](t *testing.T, job T, change func(T)) {
	t.Helper()
	changed := job.DeepCopyObject().(T)
	if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(job), changed); err != nil {
		t.Fatal(err)
	}
	change(changed)
	if err := hubEnv.client.Update(context.Background(), changed); err == nil || !strings.Contains(err.Error(), "ran on a worker as it was admitted") {
		t.Errorf("changing the spec of %T %s once it ran: %v, want it refused", job, client.ObjectKeyFromObject(job), err)
	}
	updateSpec(t, job, func(j T) {
		labels := j.GetLabels()
		labels["reviewed"] = "yes"
		j.SetLabels(labels)
	})
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %v", what, err)
}

// consistently checks cond for a while and fails at the first error.
func consistently(t *testing.T, what string, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := cond(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// newNamespace creates a namespace on the hub with a label its GlobalQueue selects, and a Queue in it.
func newNamespace(t *testing.T, globalQueue string) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-", Labels: map[string]string{"gantry-test": globalQueue}}}
	if err := hubEnv.client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	q := hubtest.MakeQueue("q", ns.Name).GlobalQueue(globalQueue).Obj()
	if err := hubEnv.client.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// newGlobalQueue creates a GlobalQueue for the namespaces newNamespace makes for it, with the given GPU
// quota on each cluster, listed in order of name.
func newGlobalQueue(t *testing.T, name string, gpuQuota map[string]int64) {
	t.Helper()
	queue := hubtest.MakeGlobalQueue(name).Select("gantry-test", name).Strategy(gantry.BestEffortFIFO)
	for _, cluster := range slices.Sorted(maps.Keys(gpuQuota)) {
		queue.Cluster(cluster, gantry.GPUResource, strconv.FormatInt(gpuQuota[cluster], 10))
	}
	gq := queue.Obj()
	if err := hubEnv.client.Create(context.Background(), gq); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(context.Background(), gq) })
}

// gpuJob is a Job of pods pods with gpus GPUs each, submitted to queue q.
func gpuJob(ns, name string, pods int32, gpus int64) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{gantry.QueueLabel: "q"}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(pods), Completions: ptr.To(pods),
			TTLSecondsAfterFinished: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "registry.example/train:1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{gantry.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)},
					Limits:   corev1.ResourceList{gantry.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)},
				}}},
			}},
		},
	}
}

// submit creates the Job on the hub and deletes it when the test ends, which frees the workers.
func submit(t *testing.T, job *batchv1.Job) {
	t.Helper()
	if err := hubEnv.client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { retireJob(t, job) })
}

// retireJob deletes a test's Job at its end and, while a hub runs, waits for the hub to delete its
// Workload and withdraw it from the workers, playing the garbage collector that the integration API
// servers lack: the hub deletes a running Job on its worker in the foreground, and keeps the Workload
// until that Job is gone. A Workload left behind would stay admitted on its worker and count there in
// every later test.
func retireJob(t *testing.T, job *batchv1.Job) {
	t.Helper()
	deleteJob(t, job)
	if runningHubs.Load() == 0 {
		return
	}
	ctx := context.Background()
	key := types.NamespacedName{Namespace: job.Namespace, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		err := hubEnv.client.Get(ctx, key, &gantry.Workload{})
		if apierrors.IsNotFound(err) {
			return
		}
		for _, n := range names {
			var remote batchv1.Job
			if err := workers[n].client.Get(ctx, client.ObjectKeyFromObject(job), &remote); err == nil &&
				remote.DeletionTimestamp != nil && len(remote.Finalizers) > 0 {
				remote.Finalizers = nil // it has no pods: what the collector would do at once
				_ = workers[n].client.Update(ctx, &remote)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the hub did not delete Workload %s of the deleted Job within 15 s", key)
}

func hubWorkload(t *testing.T, job *batchv1.Job) *gantry.Workload {
	t.Helper()
	var wl gantry.Workload
	if err := hubEnv.client.Get(context.Background(), types.NamespacedName{Namespace: job.Namespace, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}, &wl); err != nil {
		t.Fatal(err)
	}
	return &wl
}

// workloadGone waits until the hub Workload of that name is gone.
func workloadGone(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, "hub workload "+name+" gone", func() error {
		var wl gantry.Workload
		err := hubEnv.client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &wl)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}

// remoteJobs lists on which workers a Job of that name exists.
func remoteJobs(job *batchv1.Job) ([]string, error) {
	var where []string
	for _, n := range names {
		var j batchv1.Job
		err := workers[n].client.Get(context.Background(), client.ObjectKeyFromObject(job), &j)
		if err == nil {
			where = append(where, n)
		} else if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return where, nil
}

// runsOn waits until the Job exists on exactly one worker and returns it.
func runsOn(t *testing.T, job *batchv1.Job) string {
	t.Helper()
	var where []string
	eventually(t, "job "+job.Name+" on exactly one worker", func() error {
		var err error
		if where, err = remoteJobs(job); err != nil {
			return err
		}
		if len(where) != 1 {
			return fmt.Errorf("on %v", where)
		}
		return nil
	})
	return where[0]
}

// pendingReason waits until the hub Workload is Pending with the reason.
func pendingReason(t *testing.T, job *batchv1.Job, reason string) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	eventually(t, "workload of "+job.Name+" pending with "+reason, func() error {
		var wl gantry.Workload
		if err := hubEnv.client.Get(context.Background(), types.NamespacedName{Namespace: job.Namespace, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}, &wl); err != nil {
			return err
		}
		cond = apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != reason {
			return fmt.Errorf("pending condition %+v", cond)
		}
		return nil
	})
	return cond
}

// completeRemote plays the worker's Job controller: the Job's pods ran and succeeded.
func completeRemote(t *testing.T, cluster string, job *batchv1.Job) {
	t.Helper()
	c := workers[cluster].client
	eventually(t, "completing "+job.Name+" on "+cluster, func() error {
		var j batchv1.Job
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		now := metav1.Now()
		if j.Status.StartTime == nil {
			start := metav1.NewTime(now.Add(-time.Second))
			j.Status.StartTime = &start
		}
		j.Status.Active, j.Status.Ready = 0, ptr.To[int32](0)
		j.Status.CompletionTime = &now
		j.Status.Succeeded = ptr.Deref(j.Spec.Completions, 1)
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		return c.Status().Update(context.Background(), &j)
	})
}

// hubJobComplete waits until the hub Job shows Complete.
func hubJobComplete(t *testing.T, job *batchv1.Job) {
	t.Helper()
	eventually(t, "hub job "+job.Name+" complete", func() error {
		var j batchv1.Job
		if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("status %+v", j.Status)
	})
}

// hubEvents returns the reasons and notes of Events about an object on the hub.
func hubEvents(t *testing.T, ns, name string) string {
	t.Helper()
	var list corev1.EventList
	if err := hubEnv.client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Type+" "+e.Reason+": "+e.Message)
		}
	}
	return strings.Join(out, "\n")
}

func deleteJob(t *testing.T, job *batchv1.Job) {
	t.Helper()
	if err := hubEnv.client.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

// dumpOnFailure logs the hub's Workloads and WorkerClusters when the test fails, to show where dispatch stopped.
func dumpOnFailure(t *testing.T, ns string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.Background()
		var wls gantry.WorkloadList
		_ = hubEnv.client.List(ctx, &wls, client.InNamespace(ns))
		for _, wl := range wls.Items {
			t.Logf("hub workload %s: %+v", wl.Name, wl.Status)
		}
		var wcs gantry.WorkerClusterList
		_ = hubEnv.client.List(ctx, &wcs)
		for _, wc := range wcs.Items {
			t.Logf("worker cluster %s: %+v", wc.Name, wc.Status.Conditions)
		}
		for _, n := range names {
			var cps gantry.WorkloadList
			_ = workers[n].client.List(ctx, &cps, client.InNamespace(ns))
			for _, cp := range cps.Items {
				t.Logf("copy on %s %s: %v %+v", n, cp.Name, cp.Labels, cp.Status.Conditions)
			}
		}
	})
}

// holders lists the workers that hold an object of obj's kind and key; a worker without the kind's API
// holds none.
func holders(obj client.Object) ([]string, error) {
	var where []string
	for _, n := range names {
		got := obj.DeepCopyObject().(client.Object)
		err := workers[n].client.Get(context.Background(), client.ObjectKeyFromObject(obj), got)
		switch {
		case err == nil:
			where = append(where, n)
		case apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err):
		default:
			return nil, err
		}
	}
	return where, nil
}

// workloadFinishes waits until the hub Workload is Finished with the reason. The hub mirrors a job's
// end to the hub's job before it writes the Workload's, so one read right after the first may not
// show the second yet.
func workloadFinishes(t *testing.T, ns, name, reason string) {
	t.Helper()
	eventually(t, "workload "+name+" finished with "+reason, func() error {
		var wl gantry.Workload
		if err := hubEnv.client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &wl); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadFinished); c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
			return fmt.Errorf("finished condition %+v", c)
		}
		return nil
	})
}

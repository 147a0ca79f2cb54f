package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// kueueGV is the version of Kueue's API the test reads and writes (the one its CRDs store).
var kueueGV = schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta2"}

// Kueue v0.17.0, run on worker-1, admits Jobs submitted straight to that worker with its queue label, by
// the quota of a ClusterQueue smaller than the worker: of three Jobs of 4 GPUs each, where the quota
// holds two and the nodes all three, Kueue admits two and keeps the third suspended and pending with
// its reason, and admits it once one of the first two has completed. The jobs' pods run on kwok.
func TestKueueAdmitsJobsSubmittedStraightToAWorker(t *testing.T) {
	const gpusPerJob, fits = 4, 2
	w := tb.Worker("worker-1")
	ctx := context.Background()
	stop, err := tb.StartKueue(ctx, os.Getenv("GANTRY_TOOLS"), w.Name)
	if err != nil {
		t.Fatalf("starting Kueue on %s: %v", w.Name, err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stopping Kueue on %s: %v", w.Name, err)
		}
	})
	t.Logf("Kueue serves its webhooks on %s", w.Name)

	// Room for two jobs of GPUs, for four of CPU and memory: the GPUs are what the third waits for.
	quota := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(fmt.Sprint(2 * fits)),
		corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", 2*fits)),
		gantry.GPUResource:    *resource.NewQuantity(gpusPerJob*fits, resource.DecimalSI),
	}
	checkRoomBeyondQuota(t, w, quota, (fits+1)*gpusPerJob)
	ns := "kueue-straight"
	lq := createKueueQueues(t, w, ns, quota)
	kueueDumpOnFailure(t, w, ns)

	var jobs []*batchv1.Job
	for i := range fits + 1 {
		job := makeJob(ns, fmt.Sprintf("kueue-%d", i)).gpus(gpusPerJob).runsFor("15s").stopsWithin(1).obj()
		job.Labels = map[string]string{testbed.KueueQueueLabel: lq}
		if err := w.Client.Create(ctx, job); err != nil {
			t.Fatalf("creating job %s on %s: %v", job.Name, w.Name, err)
		}
		if !ptr.Deref(job.Spec.Suspend, false) {
			t.Fatalf("job %s was created unsuspended: Kueue's webhook did not suspend it", job.Name)
		}
		jobs = append(jobs, job)
	}

	pending := checkKueueAdmitsTwo(t, w, ns, fits)
	checkPodsRunOnKwok(t, w, ns, fits)
	checkThirdAfterOneCompletes(t, w, ns, pending, fits)
	eventually(t, "all jobs complete on "+w.Name, 3*time.Minute, poll, func() error {
		return kueueJobsComplete(w, jobs)
	})
	t.Logf("all %d jobs completed on %s", len(jobs), w.Name)
}

// checkRoomBeyondQuota checks that the quota is smaller than the worker's nodes, which have room for
// gpus GPUs: what keeps a job waiting is Kueue's quota, not the nodes.
func checkRoomBeyondQuota(t *testing.T, w *testbed.Cluster, quota corev1.ResourceList, gpus int64) {
	t.Helper()
	var nodes corev1.NodeList
	if err := w.Client.List(context.Background(), &nodes); err != nil {
		t.Fatal(err)
	}
	total := corev1.ResourceList{}
	for _, n := range nodes.Items {
		for r, q := range n.Status.Allocatable {
			sum := total[r]
			sum.Add(q)
			total[r] = sum
		}
	}
	for r, q := range quota {
		if sum := total[r]; sum.Cmp(q) <= 0 {
			t.Fatalf("the quota of %s (%s) is not smaller than %s's nodes (%s)", r, q.String(), w.Name, sum.String())
		}
	}
	if sum := total[gantry.GPUResource]; sum.Value() < gpus {
		t.Fatalf("%s's nodes have %d GPUs, fewer than the %d of all the jobs", w.Name, sum.Value(), gpus)
	}
	t.Logf("%s's %d nodes allocate %s; the ClusterQueue's quota is %s", w.Name, len(nodes.Items),
		resourceString(total), resourceString(quota))
}

func resourceString(l corev1.ResourceList) string {
	var out []string
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, gantry.GPUResource} {
		q := l[r]
		out = append(out, fmt.Sprintf("%s=%s", r, q.String()))
	}
	return strings.Join(out, " ")
}

// createKueueQueues creates on the worker a ResourceFlavor without node labels, a ClusterQueue of that
// quota for every namespace, and the namespace ns with a LocalQueue of it, whose name it returns. They
// are deleted at the end, while Kueue still runs to release its finalizers.
func createKueueQueues(t *testing.T, w *testbed.Cluster, ns string, quota corev1.ResourceList) string {
	t.Helper()
	ctx := context.Background()
	const flavor, cq, lq = "kueue-e2e", "kueue-e2e", "jobs"
	var resources, covered []any
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, gantry.GPUResource} {
		q := quota[r]
		covered = append(covered, string(r))
		resources = append(resources, map[string]any{"name": string(r), "nominalQuota": q.String()})
	}
	objs := []*unstructured.Unstructured{
		kueueObject("ResourceFlavor", "", flavor, map[string]any{}),
		kueueObject("ClusterQueue", "", cq, map[string]any{
			"namespaceSelector": map[string]any{},
			"resourceGroups": []any{map[string]any{"coveredResources": covered,
				"flavors": []any{map[string]any{"name": flavor, "resources": resources}}}},
		}),
		kueueObject("LocalQueue", ns, lq, map[string]any{"clusterQueue": cq}),
	}
	if err := w.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteKueueQueues(t, w, ns, objs) })
	for _, o := range objs {
		if err := w.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating the %s %s on %s: %v", o.GetKind(), o.GetName(), w.Name, err)
		}
	}
	eventually(t, "the ClusterQueue active", time.Minute, poll, func() error {
		u := kueueObject("ClusterQueue", "", cq, nil)
		if err := w.Client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return err
		}
		if status, reason, msg := kueueCondition(u, "Active"); status != "True" {
			return fmt.Errorf("Active=%s (%s) %s", status, reason, msg)
		}
		return nil
	})
	return lq
}

// deleteKueueQueues deletes the namespace's Jobs, waits until Kueue has let their Workloads go, then
// deletes the Kueue objects and the namespace.
func deleteKueueQueues(t *testing.T, w *testbed.Cluster, ns string, objs []*unstructured.Unstructured) {
	ctx := context.Background()
	_ = w.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns),
		client.PropagationPolicy(metav1.DeletePropagationBackground))
	deadline := time.Now().Add(time.Minute)
	for ; time.Now().Before(deadline); time.Sleep(poll) {
		if wls, err := kueueWorkloads(w, ns); err == nil && len(wls) == 0 {
			break
		}
	}
	for i := len(objs) - 1; i >= 0; i-- {
		if err := w.Client.Delete(ctx, objs[i]); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the %s %s: %v", objs[i].GetKind(), objs[i].GetName(), err)
		}
	}
	for _, o := range objs {
		for ; ; time.Sleep(poll) {
			err := w.Client.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopy())
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the %s %s is still there on %s: %v", o.GetKind(), o.GetName(), w.Name, err)
				break
			}
		}
	}
	_ = w.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
}

func kueueObject(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(kueueGV.WithKind(kind))
	u.SetNamespace(ns)
	u.SetName(name)
	if spec != nil {
		u.Object["spec"] = spec
	}
	return u
}

// kueueCondition is the status, reason and message of the object's condition of that type.
func kueueCondition(u *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
			return status, reason, message
		}
	}
	return "", "", ""
}

// kueueWorkloads are Kueue's Workloads in the namespace, by the UID of their Job.
func kueueWorkloads(w *testbed.Cluster, ns string) (map[string]*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(kueueGV.WithKind("WorkloadList"))
	if err := w.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		out[list.Items[i].GetLabels()["kueue.x-k8s.io/job-uid"]] = &list.Items[i]
	}
	return out, nil
}

// kueueJob is one of the namespace's Jobs on the worker, and its Workload (nil while it has none).
type kueueJob struct {
	job batchv1.Job
	wl  *unstructured.Unstructured
}

func listKueueJobs(w *testbed.Cluster, ns string) ([]kueueJob, error) {
	var jobs batchv1.JobList
	if err := w.Client.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	wls, err := kueueWorkloads(w, ns)
	if err != nil {
		return nil, err
	}
	var out []kueueJob
	for _, j := range jobs.Items {
		out = append(out, kueueJob{job: j, wl: wls[string(j.UID)]})
	}
	return out, nil
}

func (k kueueJob) admitted() bool {
	if k.wl == nil {
		return false
	}
	q, _, _ := kueueCondition(k.wl, "QuotaReserved")
	a, _, _ := kueueCondition(k.wl, "Admitted")
	return q == "True" && a == "True"
}

func (k kueueJob) running() bool {
	return !ptr.Deref(k.job.Spec.Suspend, false) && !jobCondition(&k.job, batchv1.JobComplete) &&
		!jobCondition(&k.job, batchv1.JobFailed)
}

// checkQuotaHeld fails the test when more jobs run at once than the quota holds, or a job failed.
func checkQuotaHeld(t *testing.T, jobs []kueueJob, fits int) {
	t.Helper()
	running := 0
	for _, k := range jobs {
		if jobCondition(&k.job, batchv1.JobFailed) {
			t.Fatalf("job %s failed: %+v", k.job.Name, k.job.Status)
		}
		if k.running() {
			running++
		}
	}
	if running > fits {
		t.Fatalf("%d jobs run at once, more than the %d the quota holds", running, fits)
	}
}

// checkKueueAdmitsTwo waits until Kueue has admitted fits jobs, unsuspended them, and keeps the last one
// pending for want of quota; it returns the pending job's name.
func checkKueueAdmitsTwo(t *testing.T, w *testbed.Cluster, ns string, fits int) string {
	t.Helper()
	var pending string
	eventually(t, fmt.Sprintf("Kueue admits %d jobs and keeps one pending", fits), time.Minute, poll, func() error {
		jobs, err := listKueueJobs(w, ns)
		if err != nil {
			return err
		}
		checkQuotaHeld(t, jobs, fits)
		var admitted []string
		pending = ""
		for _, k := range jobs {
			switch {
			case k.wl == nil:
				return fmt.Errorf("job %s has no Kueue Workload yet", k.job.Name)
			case k.admitted() && k.running():
				admitted = append(admitted, fmt.Sprintf("%s (Workload %s)", k.job.Name, k.wl.GetName()))
			case k.admitted():
				return fmt.Errorf("job %s is admitted and not unsuspended yet", k.job.Name)
			default:
				status, reason, msg := kueueCondition(k.wl, "QuotaReserved")
				if status != "False" || reason != "Pending" || !ptr.Deref(k.job.Spec.Suspend, false) {
					return fmt.Errorf("job %s: QuotaReserved=%s (%s) suspend=%v", k.job.Name, status, reason,
						ptr.Deref(k.job.Spec.Suspend, false))
				}
				pending = k.job.Name
				t.Logf("job %s waits: Workload %s QuotaReserved=False (%s): %s", k.job.Name, k.wl.GetName(), reason, msg)
				if !strings.Contains(msg, string(gantry.GPUResource)) {
					t.Errorf("Kueue's message does not name %s: %s", gantry.GPUResource, msg)
				}
			}
		}
		if len(admitted) != fits || pending == "" {
			return fmt.Errorf("admitted %v, pending %q", admitted, pending)
		}
		t.Logf("Kueue admitted and unsuspended %s", strings.Join(admitted, ", "))
		return nil
	})
	return pending
}

// checkPodsRunOnKwok waits until n pods of the namespace run on worker's kwok nodes.
func checkPodsRunOnKwok(t *testing.T, w *testbed.Cluster, ns string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d pods running on %s", n, w.Name), time.Minute, poll, func() error {
		var pods corev1.PodList
		if err := w.Client.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		var on []string
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
				on = append(on, p.Name+" on "+p.Spec.NodeName)
			}
		}
		if len(on) != n {
			return fmt.Errorf("running: %v", on)
		}
		t.Logf("pods running: %s", strings.Join(on, ", "))
		return nil
	})
}

// checkThirdAfterOneCompletes waits until Kueue admits the pending job, and checks that by then one of the
// others had completed, and that the quota held all along.
func checkThirdAfterOneCompletes(t *testing.T, w *testbed.Cluster, ns, pending string, fits int) {
	t.Helper()
	eventually(t, "Kueue admits job "+pending, 2*time.Minute, poll, func() error {
		jobs, err := listKueueJobs(w, ns)
		if err != nil {
			return err
		}
		checkQuotaHeld(t, jobs, fits)
		var third *kueueJob
		var completed []string
		for i, k := range jobs {
			if k.job.Name == pending {
				third = &jobs[i]
			} else if jobCondition(&k.job, batchv1.JobComplete) {
				completed = append(completed, k.job.Name)
			}
		}
		if third == nil || !third.admitted() || ptr.Deref(third.job.Spec.Suspend, false) {
			return fmt.Errorf("job %s is not admitted and unsuspended yet", pending)
		}
		if len(completed) == 0 {
			t.Fatalf("job %s was admitted before any other job completed", pending)
		}
		t.Logf("Kueue admitted job %s after %s completed", pending, strings.Join(completed, ", "))
		return nil
	})
}

func kueueJobsComplete(w *testbed.Cluster, jobs []*batchv1.Job) error {
	var waiting []string
	for _, j := range jobs {
		var got batchv1.Job
		if err := w.Client.Get(context.Background(), client.ObjectKeyFromObject(j), &got); err != nil {
			return err
		}
		if !jobCondition(&got, batchv1.JobComplete) {
			waiting = append(waiting, j.Name)
		}
	}
	if len(waiting) > 0 {
		return fmt.Errorf("not complete yet: %s", strings.Join(waiting, " "))
	}
	return nil
}

// kueueDumpOnFailure logs Kueue's Workloads in the namespace and the end of Kueue's log when the test fails.
func kueueDumpOnFailure(t *testing.T, w *testbed.Cluster, ns string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		jobs, err := listKueueJobs(w, ns)
		if err != nil {
			t.Logf("listing the jobs: %v", err)
		}
		for _, k := range jobs {
			line := fmt.Sprintf("job %s suspend=%v", k.job.Name, ptr.Deref(k.job.Spec.Suspend, false))
			if k.wl != nil {
				for _, typ := range []string{"QuotaReserved", "Admitted", "Finished"} {
					status, reason, msg := kueueCondition(k.wl, typ)
					line += fmt.Sprintf(" %s=%s(%s: %s)", typ, status, reason, msg)
				}
			}
			t.Log(line)
		}
		t.Logf("end of the Kueue log:\n%s", tail(filepath.Join(tb.Dir, "logs", "kueue-"+w.Name+".log"), 40))
	})
}

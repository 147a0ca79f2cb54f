package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// Gantry's jobs go through a LocalQueue of the Kueue v0.17.0 that worker-1 runs, beside jobs its own
// users submit straight to that LocalQueue, under a ClusterQueue of 8 GPUs on nodes of 32. The agent
// admits a job there only within what the ClusterQueue has left; Kueue admits each job itself; the
// workers' etcd ledger never shows more than 8 GPUs of the namespace's pods live on worker-1, and no
// job runs twice. Then a job that Kueue keeps waiting (a local job took the room between the agent's
// admission and the Job's creation, a window the test holds open with an admission policy that refuses
// the Job for a while) is taken back at the placement timeout, with Kueue's reason on the hub, and runs
// on worker-2.
func TestGantrysJobsGoThroughKueueOnAWorkerThatRunsIt(t *testing.T) {
	const quotaGPUs = 8
	w := tb.Worker("worker-1")
	ns := newNamespace(t, "e2e-kueue")
	dumpOnFailure(t, ns)
	startKueueFor(t, w)
	lq := createKueueQueues(t, w, ns, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"), gantry.GPUResource: *resource.NewQuantity(quotaGPUs, resource.DecimalSI)})
	kueueDumpOnFailure(t, w, ns)
	updateWorkerCluster(t, "worker-1", func(wc *gantry.WorkerCluster) { wc.Spec.Kueue = &gantry.WorkerKueue{LocalQueue: lq} })
	updateWorkerCluster(t, "worker-2", func(wc *gantry.WorkerCluster) { wc.Spec.Cordoned = true })

	var submitted, local []*batchv1.Job
	for i := range 3 {
		job := makeJob(ns, fmt.Sprintf("gantry-%d", i)).gpus(4).runsFor("6s").obj()
		submit(t, job)
		submitted = append(submitted, job)
		local = append(local, submitLocal(t, w, lq, makeJob(ns, fmt.Sprintf("local-%d", i)).gpus(4).runsFor("6s").obj()))
	}
	allComplete(t, submitted, 4*time.Minute)
	eventually(t, "the local jobs complete", 2*time.Minute, poll, func() error { return kueueJobsComplete(w, local) })
	for _, job := range submitted {
		if on := hubWorkload(t, job).Status.ClusterName; on != w.Name {
			t.Errorf("%s ran on %s, want %s (worker-2 is cordoned)", job.Name, on, w.Name)
		}
		checkInLocalQueue(t, w, job, lq)
	}

	heldInKueue(t, w, ns, lq)
	checkLedger(t, ns, quotaGPUs, submitted)
}

// startKueueFor runs Kueue on the worker for the rest of the test, and restarts the worker's agent,
// which finds Kueue's API when it starts.
func startKueueFor(t *testing.T, w *testbed.Cluster) {
	t.Helper()
	stop, err := tb.StartKueue(context.Background(), os.Getenv("GANTRY_TOOLS"), w.Name)
	if err != nil {
		t.Fatalf("starting Kueue on %s: %v", w.Name, err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stopping Kueue on %s: %v", w.Name, err)
		}
	})
	name := "gantry-agent-" + strings.TrimPrefix(w.Name, "worker-")
	proc, err := tb.Process(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Start(name, proc.Args); err != nil {
		t.Fatal(err)
	}
}

// updateWorkerCluster changes a WorkerCluster for the rest of the test; its spec and labels come back
// at the end.
func updateWorkerCluster(t *testing.T, name string, change func(*gantry.WorkerCluster)) {
	t.Helper()
	var original gantry.WorkerClusterSpec
	update := func(set func(*gantry.WorkerCluster)) {
		eventually(t, "updating WorkerCluster "+name, 30*time.Second, poll, func() error {
			var wc gantry.WorkerCluster
			if err := tb.Hub.Client.Get(context.Background(), types.NamespacedName{Name: name}, &wc); err != nil {
				return err
			}
			set(&wc)
			return tb.Hub.Client.Update(context.Background(), &wc)
		})
	}
	var labels map[string]string
	update(func(wc *gantry.WorkerCluster) {
		original, labels = *wc.Spec.DeepCopy(), maps.Clone(wc.Labels)
		change(wc)
	})
	t.Cleanup(func() { update(func(wc *gantry.WorkerCluster) { wc.Spec, wc.Labels = original, labels }) })
}

// submitLocal creates a job straight on the worker, in Kueue's LocalQueue: a local user's job.
func submitLocal(t *testing.T, w *testbed.Cluster, lq string, job *batchv1.Job) *batchv1.Job {
	t.Helper()
	job.Labels = map[string]string{testbed.KueueQueueLabel: lq}
	if err := w.Client.Create(context.Background(), job); err != nil {
		t.Fatalf("creating %s on %s: %v", job.Name, w.Name, err)
	}
	return job
}

// checkInLocalQueue checks in the worker's ledger of Jobs that Gantry's Job of the job went through the
// LocalQueue: Kueue made a Workload for it in that queue.
func checkInLocalQueue(t *testing.T, w *testbed.Cluster, job *batchv1.Job, lq string) {
	t.Helper()
	wls, err := kueueWorkloads(w, job.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	for _, wl := range wls {
		if strings.HasPrefix(wl.GetName(), "job-"+job.Name+"-") {
			if q, _, _ := unstructured.NestedString(wl.Object, "spec", "queueName"); q != lq {
				t.Errorf("Kueue's Workload %s of %s is in LocalQueue %q, want %s", wl.GetName(), job.Name, q, lq)
			}
			return
		}
	}
	t.Errorf("Kueue has no Workload of %s", job.Name)
}

// heldInKueue submits a job of the ClusterQueue's whole quota while worker-2 is cordoned. worker-1's
// agent admits it; an admission policy refuses its Job there meanwhile, and a local job takes the
// ClusterQueue's room. Once the policy goes, Kueue keeps the job's Job pending: at the placement
// timeout the hub takes it back with Kueue's reason, and it runs on worker-2, uncordoned meanwhile.
func heldInKueue(t *testing.T, w *testbed.Cluster, ns, lq string) {
	t.Helper()
	release := refuseJob(t, w, ns, "held")
	held := makeJob(ns, "held").gpus(8).runsFor("6s").obj()
	submit(t, held)
	eventually(t, "the hub refused the Job of held on "+w.Name, time.Minute, poll, func() error {
		c := apimeta.FindStatusCondition(hubWorkload(t, held).Status.Conditions, gantry.WorkloadJobCreated)
		if c == nil || c.Reason != gantry.ReasonWorkerRefusing {
			return fmt.Errorf("JobCreated %+v", c)
		}
		return nil
	})
	taker := submitLocal(t, w, lq, makeJob(ns, "local-taker").gpus(8).runsFor("60s").obj())
	eventually(t, "Kueue admitted local-taker", time.Minute, poll, func() error {
		jobs, err := listKueueJobs(w, ns)
		if err != nil {
			return err
		}
		for _, k := range jobs {
			if k.job.Name == taker.Name && k.admitted() {
				return nil
			}
		}
		return fmt.Errorf("not admitted yet")
	})
	release()
	// held is the winner on worker-1 now: worker-2 can take it once it is taken back.
	updateWorkerCluster(t, "worker-2", func(wc *gantry.WorkerCluster) { wc.Spec.Cordoned = false })
	ev := waitEviction(t, held)
	t.Logf("evicted from %s: %s", ev.Cluster, ev.Message)
	for _, want := range []string{"Kueue Workload job-held-", "in LocalQueue " + lq + ": Pending: ", "insufficient unused quota for nvidia.com/gpu"} {
		if ev.Cluster != w.Name || ev.Reason != gantry.ReasonPlacementTimeout || !strings.Contains(ev.Message, want) {
			t.Errorf("eviction %+v, want one from %s at the placement timeout saying %q", ev, w.Name, want)
		}
	}
	allComplete(t, []*batchv1.Job{held}, 3*time.Minute)
	if out := kubectlGantry(t, "explain", "job/"+held.Name, "-n", ns); !strings.Contains(out, "Evicted from "+w.Name) ||
		!strings.Contains(out, "Kueue Workload job-held-") {
		t.Errorf("kubectl gantry explain does not show Kueue's reason for the eviction:\n%s", out)
	}
	if on := hubWorkload(t, held).Status.ClusterName; on != "worker-2" {
		t.Errorf("held ran on %s after its eviction, want worker-2 (worker-1's ClusterQueue is full)", on)
	}
}

// refuseJob has the worker's API server refuse, as forbidden, the creation of Jobs of that name in the
// namespace, until the returned function is called (and at the end of the test in any case).
func refuseJob(t *testing.T, w *testbed.Cluster, ns, name string) func() {
	t.Helper()
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-refuse-" + name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: fmt.Sprintf("object.metadata.name != %q", name),
				Reason: ptr.To(metav1.StatusReasonForbidden), Message: "held back by the test"}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}}}}
	release := func() {
		for _, o := range []client.Object{binding, policy} {
			_ = w.Client.Delete(ctx, o)
		}
	}
	t.Cleanup(release)
	for _, o := range []client.Object{policy, binding} {
		if err := w.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the API server of "+w.Name+" refusing Job "+name, time.Minute, poll, func() error {
		probe := makeJob(ns, name).obj()
		if err := w.Client.Create(ctx, probe, client.DryRunAll); err == nil {
			return fmt.Errorf("a Job %s is still taken", name)
		}
		return nil
	})
	return release
}

// waitEviction waits until the hub records the job's first eviction.
func waitEviction(t *testing.T, job *batchv1.Job) gantry.Eviction {
	t.Helper()
	var wl *gantry.Workload
	eventually(t, "an eviction of "+job.Name+" recorded on the hub", testbed.PlacementTimeout+2*time.Minute, poll, func() error {
		wl = hubWorkload(t, job)
		if len(wl.Status.Evictions) == 0 {
			return fmt.Errorf("no eviction yet; winner %q, epoch %d", wl.Status.ClusterName, wl.Status.DispatchEpoch)
		}
		return nil
	})
	return wl.Status.Evictions[0]
}

// checkLedger checks the workers' etcd ledger of the namespace's pods: never more GPUs live on worker-1
// than the ClusterQueue's quota (Gantry's jobs and local ones together, held's too), and no job of
// Gantry's ran twice or in two places at once. (A job may have been taken back from worker-1 and created
// there again, where a local job took the room Kueue then kept it waiting for.)
func checkLedger(t *testing.T, ns string, quotaGPUs int64, submitted []*batchv1.Job) {
	t.Helper()
	if err := audit.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	pods := append(audit.Pods(ns), audit.OtherPods(ns)...)
	t.Logf("the ledger holds %d states of Gantry's pods and %d of local pods in %s", len(audit.Pods(ns)), len(audit.OtherPods(ns)), ns)
	if err := testbed.CheckQuota(slices.DeleteFunc(pods, func(r testbed.PodRecord) bool { return r.Cluster != "worker-1" }),
		map[string]int64{"worker-1": quotaGPUs}); err != nil {
		t.Errorf("the etcd ledger shows more GPUs live on worker-1 than its ClusterQueue holds:\n%v", err)
	}
	checkOneRun(t, ns)
	for _, job := range submitted {
		if n := len(hubWorkload(t, job).Status.Evictions); n > 0 {
			t.Logf("%s was taken back %d times", job.Name, n)
		}
	}
}

package e2e

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// gangWorker serves the PodGroup API on the testbed (hack/dev-up.sh): its scheduler binds a gang whole.
const gangWorker = "worker-2"

// TestAGangRacingLocalPodsIsBoundWholeOrNotAtAll races, on each worker, a gang of four whole-node pods
// submitted through the hub against two whole-node pods that a local team submits straight to the
// worker for the same nodes. The worker's scheduler is held while both arrive, and the local pods go
// first (a higher priority that preempts nothing), as they would when they win the race. The agent
// admitted the gang onto four free nodes: the local pods were not bound yet, so it could not know.
// Where the worker serves PodGroups (worker-2), the etcd ledger never shows the gang partly bound: none
// of its pods binds while two nodes are taken. Where it does not (worker-1), two of its pods hold two
// nodes for nothing, which is how every worker behaved before. Once the local pods go, both gangs run
// whole, each in one place.
func TestAGangRacingLocalPodsIsBoundWholeOrNotAtAll(t *testing.T) {
	ns := newNamespace(t, "e2e-gang-race")
	dumpOnFailure(t, ns)
	localFirst(t)
	gangs := map[string]*batchv1.Job{
		"worker-1": makeJob(ns, "gang-a100").pods(4).gpus(8).gpuProducts(a100).runsFor("5s").stopsWithin(1).obj(),
		gangWorker: makeJob(ns, "gang-h100").pods(4).gpus(8).gpuProducts(h100).runsFor("5s").stopsWithin(1).obj(),
	}
	var locals []*corev1.Pod
	for name, job := range gangs {
		w := tb.Worker(name)
		resume := holdScheduler(t, name)
		for i := range 2 {
			locals = append(locals, localPod(t, w, fmt.Sprintf("local-%d", i)))
		}
		submit(t, job)
		gangPodsCreated(t, w, job, 4)
		resume()
	}
	for _, p := range locals {
		localPodBound(t, tb.Worker(p.Annotations["worker"]), p)
	}
	time.Sleep(4 * time.Second) // the schedulers try the gangs against the two nodes left
	if err := audit.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, job := range gangs {
		uid := string(hubWorkload(t, job).UID)
		last, most := testbed.GangBound(audit.Pods(ns), name, uid)
		t.Logf("%s: with two of four nodes taken, %d of the gang's 4 pods bound (at most %d at once)", name, last, most)
		switch {
		case name == gangWorker && most != 0:
			t.Errorf("%s serves PodGroups, but the ledger shows %d of the gang's 4 pods bound while it cannot fit whole", name, most)
		case name != gangWorker && (last == 0 || last == 4):
			t.Errorf("%s binds pods one by one: the gang should hold 1-3 nodes, not %d, with two nodes taken", name, last)
		}
	}
	gangWaitsWhole(t, tb.Worker(gangWorker), gangs[gangWorker])
	for _, p := range locals {
		release(t, tb.Worker(p.Annotations["worker"]), p)
	}
	allComplete(t, []*batchv1.Job{gangs["worker-1"], gangs[gangWorker]}, 3*time.Minute)
	checkOneRun(t, ns)
	gangJoined(t, ns)
}

// localFirst creates, on each worker, the PriorityClass of the local team's pods: above Gantry's, so the
// scheduler takes them first, and preempting nothing.
func localFirst(t *testing.T) {
	t.Helper()
	for _, w := range tb.Workers {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-local-first"}, Value: 1000,
			PreemptionPolicy: ptr.To(corev1.PreemptNever)}
		if err := w.Client.Create(context.Background(), pc); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Client.Delete(context.Background(), pc) })
	}
}

// holdScheduler stops the worker's kube-scheduler (SIGSTOP) and returns what lets it go on.
func holdScheduler(t *testing.T, worker string) (resume func()) {
	t.Helper()
	p, err := tb.ControlPlaneProcess(worker, "kube-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume = func() {
		if !resumed {
			resumed = true
			if err := p.Signal(syscall.SIGCONT); err != nil {
				t.Errorf("resuming %s's scheduler: %v", worker, err)
			}
		}
	}
	t.Cleanup(resume)
	return resume
}

// localPod submits a whole-node pod straight to the worker, outside Gantry, for its scheduler to bind.
func localPod(t *testing.T, w *testbed.Cluster, name string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if err := w.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: occupyNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	gpus := *resource.NewQuantity(8, resource.DecimalSI)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: occupyNamespace, Annotations: map[string]string{"worker": w.Name}},
		Spec: corev1.PodSpec{
			PriorityClassName: "e2e-local-first",
			Containers: []corev1.Container{{Name: "local", Image: "registry.example/local:1", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{gantry.GPUResource: gpus}, Limits: corev1.ResourceList{gantry.GPUResource: gpus}}}},
		},
	}
	if err := w.Client.Create(ctx, pod); err != nil {
		t.Fatalf("submitting %s to %s: %v", name, w.Name, err)
	}
	t.Cleanup(func() { _ = w.Client.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
	return pod
}

// gangPodsCreated waits until the worker's Job controller made the pods of the job Gantry created there.
func gangPodsCreated(t *testing.T, w *testbed.Cluster, job *batchv1.Job, want int) {
	t.Helper()
	eventually(t, job.Name+"'s pods on "+w.Name, time.Minute, poll, func() error {
		wl := hubWorkload(t, job)
		var pods corev1.PodList
		if err := w.Client.List(context.Background(), &pods, client.InNamespace(job.Namespace),
			client.MatchingLabels{gantry.WorkloadUIDLabel: string(wl.UID)}); err != nil {
			return err
		}
		if len(pods.Items) != want {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		return nil
	})
}

// localPodBound waits until the worker's scheduler bound the local pod.
func localPodBound(t *testing.T, w *testbed.Cluster, pod *corev1.Pod) {
	t.Helper()
	eventually(t, pod.Name+" bound on "+w.Name, time.Minute, poll, func() error {
		var p corev1.Pod
		if err := w.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), &p); err != nil {
			return err
		}
		if p.Spec.NodeName == "" {
			return fmt.Errorf("not bound")
		}
		return nil
	})
}

// gangJoined checks, over every pod of the namespace the workers' etcd recorded, that the pods of a gang
// joined its PodGroup on the worker that serves them and on no other, and that the pods of the deferred
// pod sets, which come after the others started, joined none: whichever controller made them (the Job
// controller for batch Jobs, KubeRay, the JobSet controller under the trainer), the field or the label
// turned into it by the worker's policy got there.
func gangJoined(t *testing.T, ns string, deferred ...string) {
	t.Helper()
	if err := audit.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, r := range audit.Pods(ns) {
		if r.Deleted {
			continue
		}
		checked++
		want := r.Cluster == gangWorker && !slices.Contains(deferred, r.PodSet)
		if joined := r.PodGroup != ""; joined != want {
			t.Errorf("pod %s (pod set %s) on %s joins PodGroup %q; want one: %v", r.Name, r.PodSet, r.Cluster, r.PodGroup, want)
		}
	}
	if checked == 0 {
		t.Errorf("the ledger saw no pod in %s", ns)
	}
}

// gangWaitsWhole checks that the worker's scheduler itself holds the job's gang back as one: its PodGroup
// says PodGroupInitiallyScheduled=False, Unschedulable, with the scheduler's words.
func gangWaitsWhole(t *testing.T, w *testbed.Cluster, job *batchv1.Job) {
	t.Helper()
	var pgs schedulingv1beta1.PodGroupList
	if err := w.Client.List(context.Background(), &pgs, client.InNamespace(job.Namespace),
		client.MatchingLabels{gantry.WorkloadUIDLabel: string(hubWorkload(t, job).UID)}); err != nil {
		t.Fatal(err)
	}
	if len(pgs.Items) != 1 {
		t.Fatalf("%d PodGroups of %s on %s, want 1", len(pgs.Items), job.Name, w.Name)
	}
	pg := pgs.Items[0]
	c := apimeta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != schedulingv1beta1.PodGroupReasonUnschedulable {
		t.Errorf("PodGroup %s on %s: PodGroupInitiallyScheduled %+v, want False, Unschedulable", pg.Name, w.Name, c)
		return
	}
	t.Logf("%s's scheduler on PodGroup %s: %s", w.Name, pg.Name, c.Message)
}

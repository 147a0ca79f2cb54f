package workload

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch/workersync"
	"github.com/gantry-dev/gantry/hub/jobs"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/hub/remote/remotetest"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

var testScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = gantry.AddToScheme(s)
	return s
}()

// hubObjects are the hub Workload job-train, nominated to w1 and w2 in epoch 1, with winner (none: "") and
// the conditions named set True, and its batch Job train.
func hubObjects(winner string, conditions ...string) (*gantry.Workload, *batchv1.Job) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: "job-uid"},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(gantry.JobManagedBy), Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "i"}}}}}}
	wl := hubtest.MakeWorkload("job-train", "ns").UID("wl-uid").Finalizer(gantry.WorkloadFinalizer).OwnedByJob("train", "job-uid").
		Queue("q").PodSet("main", 1).Nominated("", 1, "w1", "w2")
	wl.Status.ClusterName = winner // with no Admitted condition unless named
	for _, c := range conditions {
		wl.Condition(c, metav1.ConditionTrue, "Test", "test")
	}
	return wl.Obj(), job
}

func newReconciler(t *testing.T, hubObjs []client.Object, workers *remotetest.Workers) *Reconciler {
	t.Helper()
	hub := fake.NewClientBuilder().WithScheme(testScheme).WithObjects(hubObjs...).
		WithStatusSubresource(&gantry.Workload{}, &batchv1.Job{}).Build()
	return &Reconciler{Client: hub, APIReader: hub, Workers: workers, Recorder: events.NewFakeRecorder(16),
		Clock: clocktesting.NewFakeClock(time.Now())}
}

func worker(objs ...client.Object) *remotetest.Worker {
	return &remotetest.Worker{Store: fake.NewClientBuilder().WithScheme(testScheme).WithObjects(objs...).Build()}
}

func reconcile(t *testing.T, r *Reconciler) error {
	t.Helper()
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "job-train"}})
	return err
}

func hubWorkload(t *testing.T, r *Reconciler) *gantry.Workload {
	t.Helper()
	var wl gantry.Workload
	if err := r.Client.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "job-train"}, &wl); err != nil {
		t.Fatal(err)
	}
	return &wl
}

// A created Job is recorded in the same Reconcile, before anything else can happen to it.
func TestReconcileRecordsTheJobItCreated(t *testing.T) {
	wl, job := hubObjects("w1")
	ws := &remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": worker()}}
	r := newReconciler(t, []client.Object{wl, job}, ws)
	if err := reconcile(t, r); err != nil {
		t.Fatal(err)
	}
	var remote batchv1.Job
	if err := ws.ByName["w1"].Store.Get(context.Background(), client.ObjectKeyFromObject(job), &remote); err != nil {
		t.Fatalf("no Job on the winner: %v", err)
	}
	if !apimeta.IsStatusConditionTrue(hubWorkload(t, r).Status.Conditions, gantry.WorkloadJobCreated) {
		t.Errorf("the creation is not recorded")
	}
}

// The hub's cache keeps Jobs without their pod templates (jobs.TrimJob): the Job created on the winner
// is built from the Job the API server holds.
func TestTheWinnersJobIsBuiltFromTheWholeHubJob(t *testing.T) {
	wl, job := hubObjects("w1")
	ws := &remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": worker()}}
	r := newReconciler(t, []client.Object{wl, job}, ws)
	trimmed, _ := jobs.TrimJob(job.DeepCopy())
	cache := fake.NewClientBuilder().WithScheme(testScheme).WithObjects(wl.DeepCopy(), trimmed.(client.Object)).
		WithStatusSubresource(&gantry.Workload{}, &batchv1.Job{}).Build()
	r.Client = cache // the API server, r.APIReader, holds the whole Job
	if err := reconcile(t, r); err != nil {
		t.Fatal(err)
	}
	var remote batchv1.Job
	if err := ws.ByName["w1"].Store.Get(context.Background(), client.ObjectKeyFromObject(job), &remote); err != nil {
		t.Fatalf("no Job on the winner: %v", err)
	}
	if c := remote.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != "i" {
		t.Fatalf("the winner's Job runs containers %+v, want the hub Job's", c)
	}
}

// A loser whose withdrawal fails does not hold back the Job on the winner; the error is returned for a
// retry.
func TestAFailingWithdrawalDoesNotHoldBackTheWinner(t *testing.T) {
	wl, job := hubObjects("w1")
	loserCopy := workersync.NewCopy(wl, "")
	refuse := interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
		return errors.New("worker refuses")
	}}
	w2 := &remotetest.Worker{Store: fake.NewClientBuilder().WithScheme(testScheme).WithObjects(loserCopy).WithInterceptorFuncs(refuse).Build()}
	ws := &remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": worker(), "w2": w2}}
	r := newReconciler(t, []client.Object{wl, job}, ws)
	if err := reconcile(t, r); err == nil {
		t.Errorf("the failed withdrawal is not reported")
	}
	var remote batchv1.Job
	if err := ws.ByName["w1"].Store.Get(context.Background(), client.ObjectKeyFromObject(job), &remote); err != nil {
		t.Fatalf("no Job on the winner: %v", err)
	}
}

// A reconcile while the hub's cache still shows the Workload as it was before this controller's last
// status write decides on what was written: it neither writes the same again nor is refused for it.
func TestAStatusWriteTheCacheTrailsIsNotRepeated(t *testing.T) {
	wl, job := hubObjects("w1")
	ws := &remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": worker()}}
	var stale *gantry.Workload
	writes := 0
	hub := fake.NewClientBuilder().WithScheme(testScheme).WithObjects(wl, job).
		WithStatusSubresource(&gantry.Workload{}, &batchv1.Job{}).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if cached, ok := obj.(*gantry.Workload); ok && stale != nil {
				stale.DeepCopyInto(cached)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if _, ok := obj.(*gantry.Workload); ok {
				writes++
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}).Build()
	r := newReconciler(t, nil, ws)
	r.Client, r.APIReader = hub, hub
	var before gantry.Workload
	if err := hub.Get(context.Background(), client.ObjectKeyFromObject(wl), &before); err != nil {
		t.Fatal(err)
	}
	if err := reconcile(t, r); err != nil {
		t.Fatal(err)
	}
	if writes != 1 {
		t.Fatalf("%d status writes, want 1 (JobCreated)", writes)
	}
	stale = &before // the cache has not seen that write yet
	if err := reconcile(t, r); err != nil {
		t.Fatalf("a reconcile on the stale cache: %v", err)
	}
	if writes != 1 {
		t.Errorf("%d status writes, want the one JobCreated only", writes)
	}
}

// Writes to different clusters do not wait on one another: the winner's Job is created while the
// withdrawal of the loser's copy is still in flight.
func TestTheWinnersJobDoesNotWaitForTheLosersWithdrawal(t *testing.T) {
	wl, job := hubObjects("w1")
	jobCreated := make(chan struct{})
	waitForJob := interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		select {
		case <-jobCreated:
			return c.Delete(ctx, obj, opts...)
		case <-time.After(10 * time.Second):
			return errors.New("the winner's Job was not created while the withdrawal waited")
		}
	}}
	noteJob := interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		err := c.Create(ctx, obj, opts...)
		if _, isJob := obj.(*batchv1.Job); isJob && err == nil {
			close(jobCreated)
		}
		return err
	}}
	w1 := &remotetest.Worker{Store: fake.NewClientBuilder().WithScheme(testScheme).WithInterceptorFuncs(noteJob).Build()}
	w2 := &remotetest.Worker{Store: fake.NewClientBuilder().WithScheme(testScheme).WithObjects(workersync.NewCopy(wl, "")).
		WithInterceptorFuncs(waitForJob).Build()}
	ws := &remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": w1, "w2": w2}}
	r := newReconciler(t, []client.Object{wl, job}, ws)
	if err := reconcile(t, r); err != nil {
		t.Fatal(err)
	}
	var left gantry.Workload
	if err := w2.Store.Get(context.Background(), client.ObjectKeyFromObject(wl), &left); err == nil {
		t.Errorf("the loser's copy is still there")
	}
}

// staleWorker's cache keeps showing what it held at first, as a cache whose watch trails the writes.
type staleWorker struct {
	*remotetest.Worker
	cache client.Reader
}

func (w staleWorker) Cached() client.Reader { return w.cache }

func (w staleWorker) HoldsCopy(key types.NamespacedName) bool {
	return remotetest.Holds(w.cache, &gantry.Workload{}, key)
}

func (w staleWorker) HoldsJob(_ gantry.JobKind, key types.NamespacedName) bool {
	return remotetest.Holds(w.cache, &batchv1.Job{}, key)
}

// A deletion the worker's cache does not show yet is not sent again by the reconciles in between.
func TestADeletionIsNotRepeatedWhileTheCacheTrailsIt(t *testing.T) {
	wl, job := hubObjects("w1")
	loserCopy := workersync.NewCopy(wl, "")
	loserCopy.UID = "copy-uid"
	deletes := 0
	count := interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		deletes++
		return c.Delete(ctx, obj, opts...)
	}}
	w2 := staleWorker{
		Worker: &remotetest.Worker{Store: fake.NewClientBuilder().WithScheme(testScheme).WithObjects(loserCopy.DeepCopy()).WithInterceptorFuncs(count).Build()},
		cache:  fake.NewClientBuilder().WithScheme(testScheme).WithObjects(loserCopy.DeepCopy()).Build(),
	}
	ws := &staleWorkers{Workers: remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": worker(), "w2": w2.Worker}}, stale: map[string]remote.Worker{"w2": w2}}
	r := newReconciler(t, []client.Object{wl, job}, nil)
	r.Workers = ws
	for range 3 {
		if err := reconcile(t, r); err != nil {
			t.Fatal(err)
		}
	}
	if deletes != 1 {
		t.Errorf("the loser's copy was deleted %d times, want once", deletes)
	}
}

// staleWorkers serves some workers through stale caches.
type staleWorkers struct {
	remotetest.Workers
	stale map[string]remote.Worker
}

func (ws *staleWorkers) Worker(name string) (remote.Worker, bool) {
	if w, ok := ws.stale[name]; ok {
		return w, true
	}
	return ws.Workers.Worker(name)
}

// countedWorker counts the reads of its cache.
type countedWorker struct {
	*remotetest.Worker
	reads *int
}

func (w countedWorker) Cached() client.Reader { return countedReader{w.Worker.Cached(), w.reads} }

type countedReader struct {
	client.Reader
	reads *int
}

func (r countedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	*r.reads++
	return r.Reader.Get(ctx, key, obj, opts...)
}

// A reconcile reads the clusters the Workload names and those holding something under its names, and
// no other: a leftover copy on a cluster it no longer names is still withdrawn, and the caches of the
// rest of the fleet are not read at all.
func TestOnlyTheClustersThatHoldSomethingAreRead(t *testing.T) {
	wl, job := hubObjects("")
	leftover := workersync.NewCopy(wl, "") // of this Workload, on a cluster its nomination left
	reads := map[string]*int{}
	ws := &staleWorkers{Workers: remotetest.Workers{ByName: map[string]*remotetest.Worker{}}, stale: map[string]remote.Worker{}}
	for _, name := range []string{"w1", "w2", "w3", "w4", "w5"} {
		w := worker()
		if name == "w3" {
			w = worker(leftover)
		}
		reads[name] = new(int)
		ws.ByName[name], ws.stale[name] = w, countedWorker{Worker: w, reads: reads[name]}
	}
	r := newReconciler(t, []client.Object{wl, job}, nil)
	r.Workers = ws
	if err := reconcile(t, r); err != nil {
		t.Fatal(err)
	}
	var cp gantry.Workload
	for _, name := range []string{"w1", "w2"} {
		if err := ws.ByName[name].Store.Get(context.Background(), client.ObjectKeyFromObject(wl), &cp); err != nil {
			t.Errorf("no copy on %s, which the Workload names: %v", name, err)
		}
	}
	if err := ws.ByName["w3"].Store.Get(context.Background(), client.ObjectKeyFromObject(wl), &cp); err == nil {
		t.Errorf("the leftover copy on w3 is still there")
	}
	for _, name := range []string{"w4", "w5"} {
		if *reads[name] != 0 {
			t.Errorf("%d reads of the cache of %s, which holds nothing of the Workload", *reads[name], name)
		}
	}
}

// A Job of that name that Gantry did not create is never adopted: the Workload ends as RemoteJobConflict
// and the hub Job says Failed.
func TestAForeignJobIsNeverRunOver(t *testing.T) {
	wl, job := hubObjects("w1")
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: "foreign"}}
	ws := &remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": worker(foreign)}}
	r := newReconciler(t, []client.Object{wl, job}, ws)
	if err := reconcile(t, r); err != nil {
		t.Fatal(err)
	}
	if c := apimeta.FindStatusCondition(hubWorkload(t, r).Status.Conditions, gantry.WorkloadFinished); c == nil || c.Reason != gantry.ReasonRemoteJobConflict {
		t.Errorf("Finished %+v, want RemoteJobConflict", c)
	}
	var got batchv1.Job
	if err := ws.ByName["w1"].Store.Get(context.Background(), client.ObjectKeyFromObject(job), &got); err != nil || got.UID != "foreign" || len(got.Labels) > 0 {
		t.Errorf("the foreign Job was touched: %+v, %v", got.ObjectMeta, err)
	}
	var hub batchv1.Job
	_ = r.Client.Get(context.Background(), client.ObjectKeyFromObject(job), &hub)
	if !failed(&hub) {
		t.Errorf("hub Job status %+v, want Failed", hub.Status)
	}
}

// The winner's Job still there on a live read holds the Workload back even when a plan says it is gone.
func TestConfirmGoneReadsTheWorker(t *testing.T) {
	wl, job := hubObjects("w1", gantry.WorkloadJobCreated)
	wl.DeletionTimestamp = ptr.To(metav1.Now())
	remote := workersync.NewRemoteJob(job, wl, "")
	ws := &remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": worker(remote)}}
	r := newReconciler(t, []client.Object{wl, job}, ws)
	r.init()
	plan := workersync.Plan{ConfirmGone: "w1", RemoveFinalizer: true}
	if _, err := r.execute(context.Background(), hubWorkload(t, r), job, plan); err == nil {
		t.Fatalf("let go while the Job is on the worker")
	}
	if len(hubWorkload(t, r).Finalizers) == 0 {
		t.Errorf("finalizer removed while the Job is on the worker")
	}
}

func failed(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// What a cluster's change concerns is found through the index of the clusters each Workload names: its
// winner and its nomination, each Workload once.
func TestRequestsForClusterReadTheIndex(t *testing.T) {
	named := func(name, winner string, nominated ...string) *gantry.Workload {
		return &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Status: gantry.WorkloadStatus{ClusterName: winner, NominatedClusters: nominated}}
	}
	hub := fake.NewClientBuilder().WithScheme(testScheme).WithIndex(&gantry.Workload{}, namedClusterIndex, namedClusters).
		WithObjects(named("won", "w1", "w1", "w2"), named("nominated", "", "w2", "w1"), named("elsewhere", "w2", "w2"), named("waiting", "")).Build()
	var got []string
	for _, req := range RequestsForCluster(context.Background(), hub, "w1") {
		got = append(got, req.Name)
	}
	slices.Sort(got)
	if want := []string{"nominated", "won"}; !slices.Equal(got, want) {
		t.Errorf("requests for w1: %v, want %v", got, want)
	}
	if got := RequestsForCluster(context.Background(), hub, "w3"); len(got) != 0 {
		t.Errorf("requests for w3, which no Workload names: %v", got)
	}
}

// What a Workload left on a worker is deleted once when the Workload is gone, and not at all when it is
// going already: the finalizer deleted the Job pods first, and a second deletion would let it go first.
func TestAnOrphanIsDeletedOnce(t *testing.T) {
	wl, job := hubObjects("w1")
	orphanCopy := workersync.NewCopy(wl, "")
	orphanCopy.UID = "copy-uid"
	goingJob := workersync.NewRemoteJob(job, wl, "").(*batchv1.Job)
	goingJob.UID = "remote-job-uid"
	goingJob.Finalizers = []string{metav1.FinalizerDeleteDependents}
	goingJob.DeletionTimestamp = ptr.To(metav1.Now())
	deletes := map[string]int{}
	count := interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		deletes[string(obj.GetUID())]++
		return c.Delete(ctx, obj, opts...)
	}}
	w1 := staleWorker{
		Worker: &remotetest.Worker{Store: fake.NewClientBuilder().WithScheme(testScheme).
			WithObjects(orphanCopy.DeepCopy(), goingJob.DeepCopy()).WithInterceptorFuncs(count).Build()},
		cache: fake.NewClientBuilder().WithScheme(testScheme).WithObjects(orphanCopy.DeepCopy(), goingJob.DeepCopy()).Build(),
	}
	ws := &staleWorkers{Workers: remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": w1.Worker}}, stale: map[string]remote.Worker{"w1": w1}}
	r := newReconciler(t, []client.Object{job}, nil) // the hub Workload is gone
	r.Workers = ws
	for range 3 {
		if err := reconcile(t, r); err != nil {
			t.Fatal(err)
		}
	}
	if got := deletes["copy-uid"]; got != 1 {
		t.Errorf("the orphan copy was deleted %d times, want once", got)
	}
	if got := deletes["remote-job-uid"]; got != 0 {
		t.Errorf("the Job being deleted pods first was deleted %d more times, want none", got)
	}
}

// Only Workloads that may need something done on the workers or for their hub job are reconciled on
// their own events; a waiting one with nothing named is not, but for an admission deadline to keep or
// a drained queue.
func TestWhichWorkloadsConcernTheWorkers(t *testing.T) {
	waiting := func(edit func(*gantry.Workload)) *gantry.Workload {
		wl, _ := hubObjects("")
		wl.Status.DispatchEpoch, wl.Status.NominatedClusters = 0, nil
		if edit != nil {
			edit(wl)
		}
		return wl
	}
	q := hubtest.MakeQueue("q", "ns").GlobalQueue("gq").Obj()
	gq := hubtest.MakeGlobalQueue("gq").Obj()
	deadlineGQ := hubtest.MakeGlobalQueue("gq").AdmissionDeadline(time.Hour).Obj()
	heldGQ := hubtest.MakeGlobalQueue("gq").Held(false).Obj()
	drainedGQ := hubtest.MakeGlobalQueue("gq").Held(true).Obj()
	cases := map[string]struct {
		wl     *gantry.Workload
		global *gantry.GlobalQueue
		want   bool
	}{
		"waiting, nothing named":  {wl: waiting(nil), global: gq},
		"waiting, no queue found": {wl: waiting(nil)},
		"nominated":               {wl: waiting(func(w *gantry.Workload) { w.Status.NominatedClusters = []string{"w1"} }), global: gq, want: true},
		"admitted":                {wl: waiting(func(w *gantry.Workload) { w.Status.ClusterName = "w1" }), global: gq, want: true},
		"being deleted":           {wl: waiting(func(w *gantry.Workload) { w.DeletionTimestamp = ptr.To(metav1.Now()) }), global: gq, want: true},
		"finished": {wl: waiting(func(w *gantry.Workload) {
			apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: gantry.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Test"})
		}), global: gq, want: true},
		"its own admission deadline":     {wl: waiting(func(w *gantry.Workload) { w.Spec.AdmissionDeadline = &metav1.Duration{Duration: time.Hour} }), global: gq, want: true},
		"its queue's admission deadline": {wl: waiting(nil), global: deadlineGQ, want: true},
		"its queue held":                 {wl: waiting(nil), global: heldGQ},
		"its queue held and drained":     {wl: waiting(nil), global: drainedGQ, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{q}
			if tc.global != nil {
				objs = append(objs, tc.global)
			}
			r := newReconciler(t, objs, nil)
			if got := r.concernsWorkers(tc.wl); got != tc.want {
				t.Errorf("concernsWorkers = %v, want %v", got, tc.want)
			}
		})
	}
}

// A cluster's writes go in the plan's order and a failed one stops the rest there: a job whose
// suspension fails is not deleted (its controller could make its children anew, running, while it
// went); the error is returned for a retry.
func TestAFailedSuspensionHoldsBackTheDeletion(t *testing.T) {
	wl, _ := hubObjects("w1")
	remote := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", UID: "remote-uid"}}
	refuse := interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
		return errors.New("worker refuses")
	}}
	w1 := &remotetest.Worker{Store: fake.NewClientBuilder().WithScheme(testScheme).WithObjects(remote).WithInterceptorFuncs(refuse).Build()}
	r := newReconciler(t, []client.Object{wl}, &remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": w1}})
	r.init()
	_, err := r.applyWorkers(context.Background(), wl, []workersync.WorkerAction{
		{Op: workersync.Suspend, Cluster: "w1", Object: remote},
		{Op: workersync.DeleteForeground, Cluster: "w1", Object: remote},
	})
	if err == nil {
		t.Errorf("the failed suspension is not reported")
	}
	if err := w1.Store.Get(context.Background(), client.ObjectKeyFromObject(remote), &batchv1.Job{}); err != nil {
		t.Errorf("the job was deleted after its suspension failed: %v", err)
	}
}

// A winner whose API server does not take the Job for now (its ResourceQuota) is said so in the same
// Reconcile, with the worker's words and an Event, and asked again only after JobCreateRetry; once it
// takes it, the creation is recorded. After JobCreateGrace of refusals the Workload is taken back.
func TestReconcileSaysWhenTheWinnerDoesNotTakeTheJob(t *testing.T) {
	wl, job := hubObjects("w1", gantry.WorkloadAdmitted)
	quotaFull := true
	creates := 0
	store := fake.NewClientBuilder().WithScheme(testScheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, isJob := obj.(*batchv1.Job); isJob {
				creates++
				if quotaFull {
					return apierrors.NewForbidden(batchv1.Resource("jobs"), obj.GetName(), errors.New("exceeded quota: no-jobs, requested: count/jobs.batch=1, used: count/jobs.batch=0, limited: count/jobs.batch=0"))
				}
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	ws := &remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": {Store: store}}}
	r := newReconciler(t, []client.Object{wl, job}, ws)
	clock := r.Clock.(*clocktesting.FakeClock)

	if err := reconcile(t, r); err != nil {
		t.Fatal(err)
	}
	c := apimeta.FindStatusCondition(hubWorkload(t, r).Status.Conditions, gantry.WorkloadJobCreated)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != gantry.ReasonWorkerRefusing || !strings.Contains(c.Message, "exceeded quota") {
		t.Fatalf("JobCreated %+v, want False/%s with the worker's words", c, gantry.ReasonWorkerRefusing)
	}
	if ev := <-r.Recorder.(*events.FakeRecorder).Events; !strings.Contains(ev, workersync.EventNotCreated) {
		t.Errorf("event %q", ev)
	}
	if err := reconcile(t, r); err != nil || creates != 1 {
		t.Fatalf("asked again at once: %d creates (%v)", creates, err)
	}
	quotaFull = false
	clock.Step(workersync.JobCreateRetry)
	if err := reconcile(t, r); err != nil {
		t.Fatal(err)
	}
	if !apimeta.IsStatusConditionTrue(hubWorkload(t, r).Status.Conditions, gantry.WorkloadJobCreated) || creates != 2 {
		t.Errorf("after the quota was lifted: %d creates, conditions %+v", creates, hubWorkload(t, r).Status.Conditions)
	}
}

// A winner that goes on not taking the Job loses it after JobCreateGrace: the Workload is taken back
// as RemoteJobRefused, with the worker's words.
func TestReconcileTakesBackWhatTheWinnerDoesNotTake(t *testing.T) {
	wl, job := hubObjects("w1", gantry.WorkloadAdmitted)
	store := fake.NewClientBuilder().WithScheme(testScheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, isJob := obj.(*batchv1.Job); isJob {
				return apierrors.NewForbidden(batchv1.Resource("jobs"), obj.GetName(), errors.New("exceeded quota: no-jobs"))
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	ws := &remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": {Store: store}}}
	r := newReconciler(t, []client.Object{wl, job}, ws)
	clock := r.Clock.(*clocktesting.FakeClock)
	for range 2 + int(workersync.JobCreateGrace/workersync.JobCreateRetry) {
		if err := reconcile(t, r); err != nil {
			t.Fatal(err)
		}
		clock.Step(workersync.JobCreateRetry)
	}
	got := hubWorkload(t, r)
	if n := len(got.Status.Evictions); got.Status.Winner() != "" || n != 1 || got.Status.Evictions[0].Reason != gantry.ReasonRemoteJobRefused ||
		!strings.Contains(got.Status.Evictions[0].Message, "exceeded quota") {
		t.Errorf("winner %q, evictions %+v; want taken back as %s", got.Status.Winner(), got.Status.Evictions, gantry.ReasonRemoteJobRefused)
	}
}

// dryRunWorker is a worker whose API server refuses a dry run of pods with refusal (nil admits them),
// counting the dry runs and the Jobs created.
func dryRunWorker(refusal *error, dryRuns, jobsCreated *int) *remotetest.Worker {
	return &remotetest.Worker{Store: fake.NewClientBuilder().WithScheme(testScheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			switch obj.(type) {
			case *corev1.Pod:
				o := (&client.CreateOptions{}).ApplyOptions(opts)
				if len(o.DryRun) == 0 {
					return errors.New("a pod created for real")
				}
				*dryRuns++
				if *refusal != nil {
					return *refusal
				}
				return nil
			case *batchv1.Job:
				*jobsCreated++
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()}
}

// Pods the winner would refuse (its LimitRange) are found by a dry run before the Job is created: no
// Job is created there, and the Workload is taken back as RemoteJobRefused with the worker's words.
func TestPodsTheWinnerRefusesAreFoundBeforeItsJobIsCreated(t *testing.T) {
	wl, job := hubObjects("w1", gantry.WorkloadAdmitted)
	var dryRuns, jobsCreated int
	refusal := error(apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "train-main-",
		errors.New("minimum cpu usage per Container is 200m, but request is 100m")))
	ws := &remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": dryRunWorker(&refusal, &dryRuns, &jobsCreated)}}
	r := newReconciler(t, []client.Object{wl, job}, ws)
	for range 2 {
		if err := reconcile(t, r); err != nil {
			t.Fatal(err)
		}
	}
	got := hubWorkload(t, r)
	if n := len(got.Status.Evictions); got.Status.Winner() != "" || n != 1 || got.Status.Evictions[0].Reason != gantry.ReasonRemoteJobRefused ||
		!strings.Contains(got.Status.Evictions[0].Message, "pods of pod set main are refused there") ||
		!strings.Contains(got.Status.Evictions[0].Message, "minimum cpu usage per Container") {
		t.Errorf("winner %q, evictions %+v; want taken back as %s with the worker's words", got.Status.Winner(), got.Status.Evictions, gantry.ReasonRemoteJobRefused)
	}
	if dryRuns != 1 || jobsCreated != 0 {
		t.Errorf("%d dry runs, %d Jobs created; want 1 and none", dryRuns, jobsCreated)
	}
}

// Pods a worker admitted in a dry run are taken as admitted there for the namespace's alike jobs for
// PodCheckTTL: a burst costs the worker one dry run.
func TestAlikePodsAreJudgedOnceAWhile(t *testing.T) {
	t.Run("admitted", func(t *testing.T) { alikeJobsDryRunOnce(t, nil) })
	// A worker that does not let the hub create pods is not asked for each job either; its jobs are created.
	t.Run("the hub may not create pods", func(t *testing.T) {
		alikeJobsDryRunOnce(t, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "train-main-",
			errors.New(`User "system:serviceaccount:gantry-system:gantry-hub-remote" cannot create resource "pods"`)))
	})
}

func alikeJobsDryRunOnce(t *testing.T, refusal error) {
	var dryRuns, jobsCreated int
	w1 := dryRunWorker(&refusal, &dryRuns, &jobsCreated)
	ws := &remotetest.Workers{ByName: map[string]*remotetest.Worker{"w1": w1}}
	var r *Reconciler
	submit := func(name string) {
		wl, job := hubObjects("w1", gantry.WorkloadAdmitted)
		wl.Name, wl.UID, job.Name, job.UID = "job-"+name, types.UID("wl-"+name), name, types.UID("job-"+name)
		wl.OwnerReferences[0].Name, wl.OwnerReferences[0].UID = name, job.UID
		if r == nil {
			r = newReconciler(t, []client.Object{wl, job}, ws)
		} else if err := errors.Join(r.Client.Create(context.Background(), wl), r.Client.Create(context.Background(), job)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "job-" + name}}); err != nil {
			t.Fatal(err)
		}
	}
	submit("a")
	submit("b")
	if dryRuns != 1 || jobsCreated != 2 {
		t.Fatalf("two alike jobs: %d dry runs, %d Jobs created; want 1 and 2", dryRuns, jobsCreated)
	}
	r.Clock.(*clocktesting.FakeClock).Step(PodCheckTTL)
	submit("c")
	if dryRuns != 2 || jobsCreated != 3 {
		t.Errorf("after PodCheckTTL: %d dry runs, %d Jobs created; want 2 and 3", dryRuns, jobsCreated)
	}
}

package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// outcome is what the API server does with one status write of a Workload.
type outcome struct {
	err     error // returned to the dispatcher
	applied bool  // whether the write took effect all the same
}

// harness runs dispatch passes against a fake API server. The dispatcher's Client stands for its cache:
// it holds the objects the test starts with and never shows the dispatcher's own writes, like a watch
// that trails behind, so every later pass depends on the dispatcher's own overlays. APIReader reads the
// server.
type harness struct {
	t      *testing.T
	d      *Dispatcher
	server client.Client
	clock  *clocktesting.FakeClock
	copies fakeCopies
	events *events.FakeRecorder

	mu       sync.Mutex
	outcomes map[string][]outcome // by Workload name: of its first writes; later ones are applied
	writes   map[string]int       // status writes by Workload name
	reads    int                  // live reads of Workloads
}

func newHarness(t *testing.T, now time.Time, objs ...client.Object) *harness {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := gantry.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	copyAll := func() []client.Object {
		out := make([]client.Object, len(objs))
		for i, o := range objs {
			out[i] = o.DeepCopyObject().(client.Object)
		}
		return out
	}
	h := &harness{
		t:        t,
		clock:    clocktesting.NewFakeClock(now),
		copies:   fakeCopies{connected: map[string]bool{"w1": true}, byName: map[string]*gantry.Workload{}},
		events:   events.NewFakeRecorder(100),
		outcomes: map[string][]outcome{},
		writes:   map[string]int{},
	}
	withStatus := []client.Object{&gantry.Workload{}, &gantry.GlobalQueue{}, &gantry.Queue{}}
	server := fake.NewClientBuilder().WithScheme(s).WithObjects(copyAll()...).WithStatusSubresource(withStatus...).Build()
	h.server = server
	cache := fake.NewClientBuilder().WithScheme(s).WithObjects(copyAll()...).WithStatusSubresource(withStatus...).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: h.update}).Build()
	reader := interceptor.NewClient(server, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*gantry.Workload); ok {
				h.mu.Lock()
				h.reads++
				h.mu.Unlock()
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	h.d = &Dispatcher{Client: cache, APIReader: reader, Workers: h.copies, Recorder: h.events, Clock: h.clock}
	return h
}

// update sends a Workload's status write to the server, with the outcome the test chose. Every write
// may change only the fields the dispatcher owns (hubtest.DispatcherFields).
func (h *harness) update(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	wl, ok := obj.(*gantry.Workload)
	if !ok {
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}
	var live gantry.Workload
	if err := h.server.Get(ctx, client.ObjectKeyFromObject(wl), &live); err == nil {
		for _, f := range hubtest.StatusFieldsChanged(&live.Status, &wl.Status) {
			if !slices.Contains(hubtest.DispatcherFields, f) {
				h.t.Errorf("the dispatcher writes %s of %s, a field it does not own", f, wl.Name)
			}
		}
	}
	h.mu.Lock()
	h.writes[wl.Name]++
	o := outcome{applied: true}
	if list := h.outcomes[wl.Name]; len(list) > 0 {
		o, h.outcomes[wl.Name] = list[0], list[1:]
	}
	h.mu.Unlock()
	if o.applied {
		if err := h.server.Status().Update(ctx, obj, opts...); err != nil {
			return err
		}
	}
	return o.err
}

// pass runs one dispatch pass and waits for the writes and reads it started.
func (h *harness) pass() {
	h.t.Helper()
	if _, err := h.d.pass(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	waitForSlots(h.t, h.d)
}

func (h *harness) status(name string) gantry.WorkloadStatus {
	h.t.Helper()
	var wl gantry.Workload
	if err := h.server.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &wl); err != nil {
		h.t.Fatal(err)
	}
	return wl.Status
}

func (h *harness) counts() (writes map[string]int, reads int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := make(map[string]int, len(h.writes))
	for k, v := range h.writes {
		w[k] = v
	}
	return w, h.reads
}

// hubObjects is a hub with one worker w1 and the GlobalQueues gq and other, 8 GPUs each on w1, that select
// namespaces labelled team=a; namespace ns has Queue q on gq.
func hubObjects() []client.Object {
	gq := func(name string) *gantry.GlobalQueue {
		return hubtest.MakeGlobalQueue(name).Select("team", "a").Cluster("w1", gantry.GPUResource, "8").Obj()
	}
	return []client.Object{
		gq("gq"), gq("other"),
		hubtest.MakeWorkerCluster("w1").AgentReady().Obj(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "a"}}},
		hubtest.MakeQueue("q", "ns").GlobalQueue("gq").Obj(),
	}
}

// makeHubWorkload starts a hubWorkload in namespace ns, owned by its Job.
func makeHubWorkload(name, queue string) *hubtest.WorkloadWrapper {
	return hubWorkload("ns", name, queue).OwnedByJob(name, "job-uid-"+name)
}

// TestPassKeepsQuotaOfJobsThatMayStillRun: a Job admitted on w1 keeps its quota there, whatever became of
// its Workload's Queue, and while its Workload is being deleted, so that the next job waits.
func TestPassKeepsQuotaOfJobsThatMayStillRun(t *testing.T) {
	cases := map[string]struct {
		running *gantry.Workload
		extra   []client.Object
	}{
		"its Workload is being deleted": {
			running: makeHubWorkload("running", "q").Nominated("gq", 1, "w1").AdmittedOn("w1").Deleting().Obj(),
		},
		"its Queue was deleted": {
			running: makeHubWorkload("running", "gone").Nominated("gq", 1, "w1").AdmittedOn("w1").Obj(),
		},
		"its Queue names another GlobalQueue now": {
			running: makeHubWorkload("running", "moved").Nominated("gq", 1, "w1").AdmittedOn("w1").Obj(),
			extra:   []client.Object{hubtest.MakeQueue("moved", "ns").GlobalQueue("other").Obj()},
		},
		"its namespace is no longer selected": {
			running: hubWorkload("left", "running", "q").OwnedByJob("running", "job-uid-running").Nominated("gq", 1, "w1").AdmittedOn("w1").Obj(),
			extra:   []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "left"}}, hubtest.MakeQueue("q", "left").GlobalQueue("gq").Obj()},
		},
		"it was admitted before its GlobalQueue was recorded": {
			running: makeHubWorkload("running", "q").Nominated("", 1, "w1").AdmittedOn("w1").Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			next := makeHubWorkload("next", "q").Obj()
			h := newHarness(t, at.Time, append(append(hubObjects(), tc.extra...), tc.running, next)...)
			h.pass()
			st := h.status("next")
			if st.DispatchEpoch != 0 || len(st.NominatedClusters) > 0 {
				t.Errorf("next job nominated to %v in epoch %d while the running one holds the quota", st.NominatedClusters, st.DispatchEpoch)
			}
			if c := apimeta.FindStatusCondition(st.Conditions, gantry.WorkloadPending); c == nil || c.Reason != gantry.ReasonWaitingForQuota {
				t.Errorf("next job pending as %+v, want %s", c, gantry.ReasonWaitingForQuota)
			}
			if writes, _ := h.counts(); writes["running"] > 0 {
				t.Errorf("running job's Workload written %d times", writes["running"])
			}
		})
	}
}

// TestPassLeavesFinishedWorkloadsOut: a finished Workload, though its status still names the cluster it
// ran on, holds no quota, gets no write, and is not among what the dispatcher's book remembers.
func TestPassLeavesFinishedWorkloadsOut(t *testing.T) {
	done := makeHubWorkload("done", "q").Nominated("gq", 1, "w1").AdmittedOn("w1").Finished(gantry.ReasonJobSucceeded).Obj()
	h := newHarness(t, at.Time, append(hubObjects(), done, makeHubWorkload("next", "q").Obj())...)
	h.pass()
	if st := h.status("next"); st.DispatchEpoch != 1 || !slices.Equal(st.NominatedClusters, []string{"w1"}) {
		t.Errorf("next job in epoch %d nominated to %v, want epoch 1 on w1: the finished one holds no quota", st.DispatchEpoch, st.NominatedClusters)
	}
	if writes, _ := h.counts(); writes["done"] > 0 {
		t.Errorf("finished Workload written %d times", writes["done"])
	}
	if h.d.queues.Workload(keyOf(done)) != nil || h.d.queues.HasUID(done.UID) {
		t.Error("the dispatcher's book holds a finished Workload")
	}
}

// TestPassWaitsForAStartingHubToTryItsClusters: a hub that has just started and has not yet tried to
// connect a cluster does not declare its waiting workloads without a cluster: it writes nothing until it
// has tried, then says what it found.
func TestPassWaitsForAStartingHubToTryItsClusters(t *testing.T) {
	waiting := makeHubWorkload("waiting", "q").Pending(gantry.ReasonWaitingForQuota, "waiting for quota of GlobalQueue gq").Obj()
	h := newHarness(t, at.Time, append(hubObjects(), waiting)...)
	h.copies.connected["w1"] = false
	h.copies.untried = map[string]bool{"w1": true}
	h.d.Workers = h.copies
	h.pass()
	if writes, _ := h.counts(); writes["waiting"] > 0 {
		t.Fatalf("waiting Workload written %d times before its only cluster was tried", writes["waiting"])
	}
	delete(h.copies.untried, "w1")
	h.pass()
	if c := apimeta.FindStatusCondition(h.status("waiting").Conditions, gantry.WorkloadPending); c == nil || c.Reason != gantry.ReasonNoClusterAvailable {
		t.Errorf("once w1 was tried and found disconnected, pending as %+v, want %s", c, gantry.ReasonNoClusterAvailable)
	}
}

// TestPassReplacesANominationMadeUnderAnotherGlobalQueue: a pending workload whose Queue was pointed at
// another GlobalQueue after it was nominated is not confirmed, though a copy was admitted: it is
// nominated again under the GlobalQueue its Queue names now.
func TestPassReplacesANominationMadeUnderAnotherGlobalQueue(t *testing.T) {
	wl := makeHubWorkload("w", "moved").Nominated("gq", 1, "w1").Obj()
	h := newHarness(t, at.Time, append(hubObjects(), hubtest.MakeQueue("moved", "ns").GlobalQueue("other").Obj(), wl)...)
	h.copies.byName["w1/w"] = hubtest.MakeCopyOf(wl, 1).Admitted().Since(at.Time).Obj()
	h.pass()
	st := h.status("w")
	got := fmt.Sprintf("winner %q, epoch %d, nominated %v under %q", st.ClusterName, st.DispatchEpoch, st.NominatedClusters, st.GlobalQueue)
	if want := `winner "", epoch 2, nominated [w1] under "other"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestPassClearsAWinnerTakenBack: the Workload controller took the workload back from w1 (its last
// eviction names w1 and the epoch); the pass clears the winner, its admission and preemption, with the
// write that dispatches it again.
func TestPassClearsAWinnerTakenBack(t *testing.T) {
	wl := makeHubWorkload("w", "q").Nominated("gq", 1, "w1").AdmittedOn("w1").
		Preempted("w1", 1, "ns/urgent", gantry.ReasonInQueuePriority).Evicted("w1", 1, gantry.ReasonPreempted, at.Time).Obj()
	wl.Status.Evictions[0].Message = "for ns/urgent"
	wl.Status.Admission = &gantry.Admission{TopologyDomain: "rack-1"}
	h := newHarness(t, at.Time, append(hubObjects(), wl)...)
	h.pass()
	st := h.status("w")
	got := fmt.Sprintf("winner %q, admission %v, preemption %v, epoch %d, nominated %v", st.ClusterName, st.Admission, st.Preemption, st.DispatchEpoch, st.NominatedClusters)
	if want := `winner "", admission <nil>, preemption <nil>, epoch 2, nominated [w1]`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if c := apimeta.FindStatusCondition(st.Conditions, gantry.WorkloadAdmitted); c == nil || c.Status != metav1.ConditionFalse || c.Reason != gantry.ReasonEvicted ||
		c.Message != "w1 gave it up (Preempted: for ns/urgent); dispatching it again" {
		t.Errorf("Admitted = %+v", c)
	}
	if c := apimeta.FindStatusCondition(st.Conditions, gantry.WorkloadPending); c == nil || c.Reason != gantry.ReasonWaitingForAdmission {
		t.Errorf("Pending = %+v", c)
	}
}

// TestPassAsksAgainWhenARejectionLapses: a cluster that rejected a workload is nominated again once the
// rejection is older than the TTL; when it rejects again, its entry is replaced, not repeated.
func TestPassAsksAgainWhenARejectionLapses(t *testing.T) {
	ttl := dispatch.DefaultRejectionTTL
	cases := map[string]struct {
		recorded      metav1.Time
		wantNominated bool
	}{
		"recorded within the TTL":           {recorded: metav1.NewTime(at.Add(ttl - time.Minute))},
		"recorded a TTL ago":                {recorded: at, wantNominated: true},
		"recorded before times were stored": {wantNominated: true}, // counts from creation, at
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := makeHubWorkload("w", "q").Nominated("gq", 1).RejectedBy("w1", gantry.ReasonNeverFits, "no", tc.recorded.Time).Obj()
			h := newHarness(t, at.Add(ttl), append(hubObjects(), wl)...)
			h.pass()
			st := h.status("w")
			if nominated := len(st.NominatedClusters) > 0; nominated != tc.wantNominated {
				t.Fatalf("nominated %v in epoch %d, want nominated: %v", st.NominatedClusters, st.DispatchEpoch, tc.wantNominated)
			}
			if !tc.wantNominated {
				return
			}
			// Its agent rejects the new epoch's copy too.
			h.copies.byName["w1/w"] = hubtest.MakeCopyOf(wl, 2).Condition(metav1.ConditionFalse, gantry.ReasonNoEligibleNode, "pool at zero").Obj()
			h.clock.Step(time.Minute)
			h.pass()
			want := []gantry.RejectedCluster{{Name: "w1", Reason: gantry.ReasonNoEligibleNode, Message: "pool at zero",
				Time: metav1.NewTime(at.Add(ttl + time.Minute))}}
			if diff := cmp.Diff(want, h.status("w").RejectedClusters); diff != "" {
				t.Errorf("rejected clusters (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPassHoldsAWriteOfUnknownOutcome: a winner write that times out may have been applied. Until a
// live read says, the winner holds its quota and nothing more is written for it; then the live object
// is the truth if it changed, and the decision is made again if it did not.
func TestPassHoldsAWriteOfUnknownOutcome(t *testing.T) {
	timeout := apierrors.NewTimeoutError("request did not complete within the allotted timeout", 0)
	t.Run("applied", func(t *testing.T) {
		first := makeHubWorkload("first", "q").Nominated("gq", 1, "w1").Obj()
		urgent := makeHubWorkload("urgent", "q").Priority(10).Nominated("gq", 1, "w1").Obj()
		h := newHarness(t, at.Time, append(hubObjects(), first, urgent)...)
		h.outcomes["first"] = []outcome{{err: timeout, applied: true}}
		h.copies.byName["w1/first"] = hubtest.MakeCopyOf(first, 1).Admitted().Since(at.Time).Obj()
		h.pass() // first wins w1; the write times out, applied

		// Before the live read, a higher-priority workload admitted on w1 must find the quota taken.
		h.copies.byName["w1/urgent"] = hubtest.MakeCopyOf(urgent, 1).Admitted().Since(at.Time).Obj()
		h.pass()
		if w := h.status("urgent").ClusterName; w != "" {
			t.Fatalf("urgent won %s while first's winner write had an unknown outcome", w)
		}
		h.clock.Step(time.Second) // past the backoff: the live read
		h.pass()
		h.pass()
		writes, reads := h.counts()
		if diff := cmp.Diff(map[string]int{"first": 1}, writes); diff != "" {
			t.Errorf("status writes (-want +got):\n%s", diff)
		}
		if reads != 1 {
			t.Errorf("%d live reads, want 1", reads)
		}
		if a, b := h.status("first").ClusterName, h.status("urgent").ClusterName; a != "w1" || b != "" {
			t.Errorf("winners: first %q, urgent %q; want first on w1 only", a, b)
		}
		select {
		case e := <-h.events.Events:
			if want := "Normal Admitted Admitted by w1 (epoch 1)"; e != want {
				t.Errorf("event %q, want %q", e, want)
			}
		default:
			t.Errorf("no Admitted event once the write was known to be applied")
		}
	})
	t.Run("not applied", func(t *testing.T) {
		first := makeHubWorkload("first", "q").Nominated("gq", 1, "w1").Obj()
		h := newHarness(t, at.Time, append(hubObjects(), first)...)
		h.outcomes["first"] = []outcome{{err: timeout}}
		h.copies.byName["w1/first"] = hubtest.MakeCopyOf(first, 1).Admitted().Since(at.Time).Obj()
		h.pass()
		h.pass() // before the live read: nothing is written again
		if writes, reads := h.counts(); writes["first"] != 1 || reads != 0 {
			t.Fatalf("before the backoff passed: %d writes, %d live reads; want 1, 0", writes["first"], reads)
		}
		h.clock.Step(time.Second)
		h.pass() // the live read finds the Workload unchanged: the decision is dropped
		h.pass() // and made again
		if writes, reads := h.counts(); writes["first"] != 2 || reads != 1 {
			t.Errorf("%d writes, %d live reads; want 2, 1", writes["first"], reads)
		}
		if w := h.status("first").ClusterName; w != "w1" {
			t.Errorf("winner %q, want w1", w)
		}
	})
	t.Run("refused", func(t *testing.T) {
		first := makeHubWorkload("first", "q").Nominated("gq", 1, "w1").Obj()
		h := newHarness(t, at.Time, append(hubObjects(), first)...)
		h.outcomes["first"] = []outcome{{err: apierrors.NewInvalid(schema.GroupKind{Group: gantry.GroupVersion.Group, Kind: "Workload"}, "first", field.ErrorList{})}}
		h.copies.byName["w1/first"] = hubtest.MakeCopyOf(first, 1).Admitted().Since(at.Time).Obj()
		h.pass()
		h.pass() // a refusal is known not to be applied: decided again at once, with no live read
		if writes, reads := h.counts(); writes["first"] != 2 || reads != 0 {
			t.Errorf("%d writes, %d live reads; want 2, 0", writes["first"], reads)
		}
	})
}

func TestNotApplied(t *testing.T) {
	gr := schema.GroupResource{Group: gantry.GroupVersion.Group, Resource: "workloads"}
	cases := map[string]struct {
		err  error
		want bool
	}{
		"conflict":          {apierrors.NewConflict(gr, "w", errors.New("modified")), true},
		"not found":         {apierrors.NewNotFound(gr, "w"), true},
		"invalid":           {apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "Workload"}, "w", nil), true},
		"forbidden":         {apierrors.NewForbidden(gr, "w", errors.New("no")), true},
		"bad request":       {apierrors.NewBadRequest("no"), true},
		"gateway timeout":   {apierrors.NewTimeoutError("slow", 0), false},
		"server timeout":    {apierrors.NewServerTimeout(gr, "update", 0), false},
		"internal error":    {apierrors.NewInternalError(errors.New("etcd")), false},
		"unavailable":       {apierrors.NewServiceUnavailable("restarting"), false},
		"connection reset":  {fmt.Errorf("put: %w", errors.New("connection reset by peer")), false},
		"deadline exceeded": {fmt.Errorf("put: %w", context.DeadlineExceeded), false},
	}
	for name, tc := range cases {
		if got := notApplied(tc.err); got != tc.want {
			t.Errorf("%s: notApplied = %v, want %v", name, got, tc.want)
		}
	}
}

// TestPassGoesByItsOwnWritesInARow: the cache shows none of the dispatcher's writes. A nomination, then a
// winner decided over the nomination the cache does not show yet, and then no further write: every pass
// goes by the newest of its own writes, not the cache's older object.
func TestPassGoesByItsOwnWritesInARow(t *testing.T) {
	wl := makeHubWorkload("a", "q").Obj()
	h := newHarness(t, at.Time, append(hubObjects(), wl)...)
	h.pass()
	if st := h.status("a"); st.DispatchEpoch != 1 || st.ClusterName != "" {
		t.Fatalf("after the first pass: %+v", st)
	}
	h.copies.byName["w1/a"] = hubtest.MakeCopyOf(wl, 1).Admitted().Since(at.Time).Obj()
	h.pass()
	if st := h.status("a"); st.ClusterName != "w1" {
		t.Fatalf("after the second pass: winner %q", st.ClusterName)
	}
	h.pass()
	if writes, _ := h.counts(); writes["a"] != 2 {
		t.Errorf("%d status writes, want 2 (a nomination, then the winner)", writes["a"])
	}
	if st := h.status("a"); st.ClusterName != "w1" || st.DispatchEpoch != 1 {
		t.Errorf("after the third pass: %+v", st)
	}
}

// Passes run at once while they have taken little of the time, and wait once they took more than their
// share: each pass here takes 200 ms; four in a row spend the burst, and the fifth waits until a quarter
// of the time makes up for what the fourth overdrew. Triggers meanwhile coalesce into it. The dispatcher
// runs in a bubble: synctest.Wait returns once it waits for a trigger or for the clock.
func TestPassesArePaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(s); err != nil {
			t.Fatal(err)
		}
		if err := gantry.AddToScheme(s); err != nil {
			t.Fatal(err)
		}
		clock := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
		const took = 200 * time.Millisecond
		var mu sync.Mutex
		passes := 0
		c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*gantry.WorkerClusterList); ok { // once a pass
					clock.Step(took)
					mu.Lock()
					passes++
					mu.Unlock()
				}
				return c.List(ctx, list, opts...)
			}}).Build()
		d := &Dispatcher{Client: c, Workers: fakeCopies{}, Recorder: events.NewFakeRecorder(10), Clock: clock, Resync: time.Hour}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- d.Start(ctx) }()
		defer func() {
			cancel()
			<-done
		}()
		// passesAre checks the passes run once the dispatcher waits.
		passesAre := func(want int) {
			t.Helper()
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			if passes != want {
				t.Fatalf("%d passes, want %d", passes, want)
			}
		}

		passesAre(1) // the first pass, at the start
		for n := 2; n <= 4; n++ {
			d.Trigger()
			passesAre(n) // the burst: 500 ms of passes, and what a quarter of their time adds to it
		}
		waiting := clock.Waiters() // the resync, and the fourth pass's wait for its statuses' interval
		d.Trigger()
		d.Trigger()
		// The fifth pass waits: 500 ms, less 4 x 200 ms of passes, plus a quarter of the 600 ms since the first
		// ended, leaves -150 ms, which a quarter of the next 600 ms makes up.
		synctest.Wait()
		if n := clock.Waiters(); n != waiting+1 {
			t.Fatalf("%d waiting on the clock, want %d", n, waiting+1)
		}
		clock.Step(600*time.Millisecond - time.Millisecond)
		passesAre(4)
		clock.Step(time.Millisecond)
		passesAre(5)
		// Had the second trigger made a pass of its own, it would have run by now, paced or not.
		clock.Step(10 * time.Second)
		passesAre(5) // the two triggers made one pass
	})
}

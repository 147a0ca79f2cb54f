package dispatcher

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/hub/dispatcher/queues"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// FuzzParkedPassesDecideAsFullOnes drives a hub through workloads coming, winning, finishing and going,
// copies admitted, rejected and waiting on the workers, clusters leaving and coming back, capacity
// reports, quota changes, jobs stopped and resumed, and time passing, and checks every pass: what a pass that parks the quiet
// queues' workloads decides is what a pass over every workload decides.
func FuzzParkedPassesDecideAsFullOnes(f *testing.F) {
	for seed := range 4 {
		f.Add(scenario(uint64(seed), 200))
		f.Add(deepScenario(uint64(seed), 200))
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		runParkingScenario(t, ops)
	})
}

// TestPassesParkQuietQueues runs long scenarios: passes must park, and decide as full passes do.
func TestPassesParkQuietQueues(t *testing.T) {
	parked, passes := 0, 0
	for seed := range 8 {
		c := runParkingScenario(t, scenario(uint64(100+seed), 400))
		parked, passes = parked+c.parked, passes+c.passes
	}
	if parked < passes/10 {
		t.Errorf("%d of %d passes parked a queue's workloads; want a tenth at least", parked, passes)
	}
}

// TestPassesCutSettledTails runs scenarios that fill queue plain deep and drain it: passes must cut
// its tail, give a cut back where quota was freed beyond what they walked, and decide as full passes do.
func TestPassesCutSettledTails(t *testing.T) {
	var cut, uncut, passes int
	for seed := range 8 {
		c := runParkingScenario(t, deepScenario(uint64(200+seed), 400))
		cut, uncut, passes = cut+c.cut, uncut+c.uncut, passes+c.passes
	}
	t.Logf("of %d passes %d cut, %d planned again", passes, cut, uncut)
	if cut < passes/4 || uncut == 0 {
		t.Errorf("of %d passes %d cut a queue's tail and %d planned again; want a quarter and one at least", passes, cut, uncut)
	}
}

// deepScenario is n operations for runParkingScenario that mostly add workloads to queue plain, admit
// copies, finish workloads, fail writes and run passes; a few are of any kind.
func deepScenario(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	ops := make([]byte, 0, 2*n)
	for range n {
		var op parkingOp
		arg := rng.IntN(256)
		switch r := rng.IntN(20); {
		case r < 6:
			op, arg = opAdd, arg&^3|3 // plain
		case r < 10:
			op = opCopy
			if r < 9 {
				arg = arg / 3 * 3 // admitted
			}
		case r < 12:
			op = opFinish
		case r < 16:
			op = opPass
		case r < 17:
			op = opFailWrite
		case r < 18:
			op = opCapacity
		case r < 19:
			op, arg = opQuota, arg&^3|3 // plain's
		default:
			op = parkingOp(rng.IntN(int(opCount)))
		}
		ops = append(ops, byte(op), byte(arg))
	}
	return ops
}

// scenario is n random operations for runParkingScenario, a pass about every third.
func scenario(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	ops := make([]byte, 0, 2*n)
	for range n {
		op := byte(rng.IntN(int(opCount)))
		if rng.IntN(3) == 0 {
			op = byte(opPass)
		}
		ops = append(ops, op, byte(rng.IntN(256)))
	}
	return ops
}

type parkingOp byte

const (
	opAdd parkingOp = iota
	opPass
	opCopy
	opFinish
	opDelete
	opConnection
	opCapacity
	opQuota
	opClock
	opFailWrite
	opStop
	opCount
)

// parkingWorld is a hub of three clusters and four GlobalQueues, solo (StrictFIFO) and plain on their
// own and left and right in cohort co, each with a Queue of the same name in namespace ns. The
// dispatcher's cache is the server itself: it shows every write at once. Its passes cut a queue's
// tail after one settled workload.
type parkingWorld struct {
	t      *testing.T
	ctx    context.Context
	d      *Dispatcher
	server client.WithWatch
	clock  *clocktesting.FakeClock
	copies fakeCopies
	next   int

	mu       sync.Mutex
	failures []outcome // of the next Workload status writes
}

var parkingQueues = []string{"solo", "left", "right", "plain"}
var parkingClusters = []string{"w1", "w2", "w3"}

func newParkingWorld(t *testing.T) *parkingWorld {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := gantry.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	// quota is the GlobalQueue of Queue name, in a cohort or none, with the given GPUs on each cluster.
	quota := func(name, cohort string, gpus ...int) *hubtest.GlobalQueueWrapper {
		gq := hubtest.MakeGlobalQueue(name).SelectAll().Cohort(cohort)
		for i, n := range gpus {
			gq.Cluster(parkingClusters[i], gantry.GPUResource, strconv.Itoa(n))
		}
		return gq
	}
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, hubtest.MakeCohort("co").Obj(),
		quota("solo", "", 8, 8, 0).Strategy(gantry.StrictFIFO).Obj(), quota("left", "co", 4, 4, 4).Obj(),
		quota("right", "co", 0, 4, 8).Obj(), quota("plain", "", 6, 4, 2).Obj()}
	for _, name := range parkingQueues {
		objs = append(objs, hubtest.MakeQueue(name, "ns").GlobalQueue(name).Obj())
	}
	copies := fakeCopies{connected: map[string]bool{}, byName: map[string]*gantry.Workload{}}
	for _, c := range parkingClusters {
		copies.connected[c] = true
		wc := hubtest.MakeWorkerCluster(c).AgentReady().Obj()
		wc.Status.Capacity = capacityWith(8)
		objs = append(objs, wc)
	}
	server := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&gantry.Workload{}, &gantry.GlobalQueue{}, &gantry.Queue{}, &gantry.Cohort{}, &gantry.WorkerCluster{}).Build()
	w := &parkingWorld{t: t, ctx: context.Background(), server: server, clock: clocktesting.NewFakeClock(at.Time), copies: copies}
	cache := interceptor.NewClient(server, interceptor.Funcs{SubResourceUpdate: w.update})
	w.d = &Dispatcher{Client: cache, APIReader: server, Workers: copies, Recorder: &events.FakeRecorder{}, Clock: w.clock, cutAfter: 1}
	return w
}

// update fails the Workload status writes the scenario asked to fail.
func (w *parkingWorld) update(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	w.mu.Lock()
	o := outcome{applied: true}
	if _, ok := obj.(*gantry.Workload); ok && len(w.failures) > 0 {
		o, w.failures = w.failures[0], w.failures[1:]
	}
	w.mu.Unlock()
	if o.applied {
		if err := c.SubResource(sub).Update(ctx, obj, opts...); err != nil {
			return err
		}
	}
	return o.err
}

func capacityWith(free int64) *gantry.CapacitySummary {
	return &gantry.CapacitySummary{GPUProducts: []gantry.GPUProductCapacity{{Product: "A100", Nodes: 2, Allocatable: 16,
		Free: free, LargestFreeOnNode: min(free, 8), LargestAllocatableOnNode: 8}},
		Resources: []gantry.ResourceCapacity{{Name: gantry.GPUResource, Allocatable: *resource.NewQuantity(16, resource.DecimalSI),
			Free: *resource.NewQuantity(free, resource.DecimalSI), LargestFreeOnNode: *resource.NewQuantity(min(free, 8), resource.DecimalSI)}}}
}

// scenarioCounts are how many passes a scenario ran, and of them how many parked a queue's workloads,
// cut a queue's tail, and planned again without a cut.
type scenarioCounts struct{ passes, parked, cut, uncut int }

// runParkingScenario plays the operations, two bytes each, and counts its passes.
func runParkingScenario(t *testing.T, ops []byte) scenarioCounts {
	w := newParkingWorld(t)
	var c scenarioCounts
	for i := 0; i+1 < len(ops); i += 2 {
		op, arg := parkingOp(ops[i]%byte(opCount)), int(ops[i+1])
		if op != opPass {
			w.apply(op, arg)
			continue
		}
		c.passes++
		p := w.pass()
		if p.pass.Parked() > 0 {
			c.parked++
		}
		if len(p.pass.Snapshot().Cuts) > 0 {
			c.cut++
		}
		if p.pass.Uncuts() > 0 {
			c.uncut++
		}
	}
	return c
}

func (w *parkingWorld) apply(op parkingOp, arg int) {
	switch op {
	case opAdd:
		w.next++
		name := fmt.Sprintf("wl-%d", w.next)
		wl := hubtest.MakeWorkload(name, "ns").UID("uid-"+name).Created(w.clock.Now()).Queue(parkingQueues[arg%4]).
			PodSet("main", 1, gantry.GPUResource, strconv.Itoa(1+arg/4%4)).Priority(int32(arg / 16 % 3)).Obj()
		w.must(w.server.Create(w.ctx, wl))
	case opCopy:
		w.answerForACopy(arg)
	case opFinish:
		if wl := w.pick(arg, func(wl *gantry.Workload) bool { return wl.Status.ClusterName != "" }); wl != nil {
			apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: gantry.WorkloadFinished,
				Status: metav1.ConditionTrue, Reason: gantry.ReasonJobSucceeded})
			w.must(w.server.Status().Update(w.ctx, wl))
		}
	case opDelete:
		if wl := w.pick(arg, func(wl *gantry.Workload) bool { return wl.Status.ClusterName == "" }); wl != nil {
			w.must(w.server.Delete(w.ctx, wl))
		}
	case opConnection:
		c := parkingClusters[arg%3]
		w.copies.connected[c] = !w.copies.connected[c]
	case opCapacity:
		w.updateCluster(parkingClusters[arg%3], func(wc *gantry.WorkerCluster) { wc.Status.Capacity = capacityWith(int64(arg / 3 % 17)) })
	case opQuota:
		var gq gantry.GlobalQueue
		w.must(w.server.Get(w.ctx, client.ObjectKey{Name: parkingQueues[arg%4]}, &gq))
		gq.Spec.Clusters[arg/4%3].Quota[gantry.GPUResource] = *resource.NewQuantity(int64(arg/12%9), resource.DecimalSI)
		if arg >= 128 { // and the queue's mode
			if gq.Spec.Dispatch.Mode == gantry.DispatchIncremental {
				gq.Spec.Dispatch.Mode = gantry.DispatchAllAtOnce
			} else {
				gq.Spec.Dispatch.Mode = gantry.DispatchIncremental
			}
		}
		w.must(w.server.Update(w.ctx, &gq))
	case opClock:
		w.clock.Step(time.Duration(arg) * 5 * time.Second) // rejections lapse after 10 minutes
	case opStop: // its owner stops, or resumes, a workload that has no winner
		if wl := w.pick(arg, func(wl *gantry.Workload) bool { return wl.Status.ClusterName == "" }); wl != nil {
			wl.Spec.Stopped = !wl.Spec.Stopped
			w.must(w.server.Update(w.ctx, wl))
		}
	case opFailWrite:
		timeout := apierrors.NewTimeoutError("request did not complete within the allotted timeout", 0)
		o := []outcome{{err: apierrors.NewConflict(gantry.GroupVersion.WithResource("workloads").GroupResource(), "", nil)},
			{err: timeout, applied: true}, {err: timeout}}[arg%3]
		w.mu.Lock()
		w.failures = append(w.failures, o)
		w.mu.Unlock()
	}
}

// answerForACopy has a worker's agent admit, reject or hold a nominated workload's copy.
func (w *parkingWorld) answerForACopy(arg int) {
	wl := w.pick(arg, func(wl *gantry.Workload) bool {
		return wl.Status.ClusterName == "" && len(wl.Status.NominatedClusters) > 0
	})
	if wl == nil {
		return
	}
	c := wl.Status.NominatedClusters[arg/7%len(wl.Status.NominatedClusters)]
	cp := hubtest.MakeCopyOf(wl, wl.Status.DispatchEpoch).Admitted()
	switch arg % 3 {
	case 1:
		cp.Condition(metav1.ConditionFalse, gantry.ReasonNeverFits, "no node is large enough")
	case 2:
		cp.Condition(metav1.ConditionFalse, gantry.ReasonNoEligibleNode, fmt.Sprintf("busy (%d)", arg))
	}
	w.copies.byName[c+"/"+wl.Name] = cp.Since(w.clock.Now()).Obj()
}

// pick is the arg-th (round) of the Workloads that match.
func (w *parkingWorld) pick(arg int, match func(*gantry.Workload) bool) *gantry.Workload {
	var list gantry.WorkloadList
	w.must(w.server.List(w.ctx, &list))
	var matched []*gantry.Workload
	for i := range list.Items {
		if wl := &list.Items[i]; match(wl) && !apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadFinished) {
			matched = append(matched, wl)
		}
	}
	if len(matched) == 0 {
		return nil
	}
	slices.SortFunc(matched, func(a, b *gantry.Workload) int { return cmp.Compare(a.Name, b.Name) })
	return matched[arg%len(matched)]
}

func (w *parkingWorld) updateCluster(name string, change func(*gantry.WorkerCluster)) {
	var wc gantry.WorkerCluster
	w.must(w.server.Get(w.ctx, client.ObjectKey{Name: name}, &wc))
	change(&wc)
	w.must(w.server.Status().Update(w.ctx, &wc))
}

// pass plans a pass, checks it against a pass over every workload, writes what it decided and returns
// what it planned.
func (w *parkingWorld) pass() *planned {
	w.t.Helper()
	p, err := w.d.plan(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	_, usage := dispatch.PlanWithUsage(p.pass.Snapshot()) // before the full snapshot sets its workloads apart
	globals, locals := p.pass.Statuses(usage.Queues)
	fullPass := p.pass.Full()
	full, fullUsage := dispatch.PlanWithUsage(fullPass.Snapshot())
	if diff := gocmp.Diff(comparable(full), comparable(p.res), cmpopts.EquateEmpty()); diff != "" {
		w.t.Fatalf("a pass that parks decided otherwise than a full one (-full +parked):\n%s", diff)
	}
	fullGlobals, fullLocals := fullPass.Statuses(fullUsage.Queues)
	if diff := gocmp.Diff(fullGlobals, globals); diff != "" {
		w.t.Fatalf("a pass that parks counts GlobalQueues otherwise than a full one (-full +parked):\n%s", diff)
	}
	if diff := gocmp.Diff(fullLocals, locals); diff != "" {
		w.t.Fatalf("a pass that parks counts Queues otherwise than a full one (-full +parked):\n%s", diff)
	}
	w.d.act(w.ctx, p)
	waitForSlots(w.t, w.d)
	return p
}

// comparable is the result in an order of its own; ReadCapacity is left out (a parked queue is not
// asked again).
func comparable(r dispatch.Result) dispatch.Result {
	r.ReadCapacity = nil
	slices.SortFunc(r.Winners, func(a, b dispatch.Winner) int { return cmp.Compare(a.Key, b.Key) })
	slices.SortFunc(r.Nominations, func(a, b dispatch.Nomination) int { return cmp.Compare(a.Key, b.Key) })
	slices.SortFunc(r.Verdicts, func(a, b dispatch.Verdict) int { return cmp.Compare(a.Key, b.Key) })
	slices.SortFunc(r.Preemptions, func(a, b dispatch.Preemption) int { return cmp.Compare(a.Victim, b.Victim) })
	return r
}

func (w *parkingWorld) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

// A copy admitted while a pass goes (its agent answered between the start of the pass and the read of
// that copy) is decided on by the next pass: a nominated workload's queue is walked every pass, so no
// pass takes in a copy's change without deciding on it.
func TestACopyAdmittedDuringAPassIsDecidedOn(t *testing.T) {
	w := newParkingWorld(t)
	w.apply(opAdd, 0) // a one-GPU workload of solo, which has room
	w.pass()          // nominated
	w.pass()          // no copy answered yet: nothing to decide
	var wl gantry.Workload
	w.must(w.server.Get(w.ctx, client.ObjectKey{Namespace: "ns", Name: "wl-1"}, &wl))
	if len(wl.Status.NominatedClusters) == 0 {
		t.Fatalf("wl-1 was not nominated: %+v", wl.Status)
	}
	c := wl.Status.NominatedClusters[0]
	racing := &racingCopies{Workers: w.copies, after: func() {
		w.copies.byName[c+"/wl-1"] = hubtest.MakeCopyOf(&wl, wl.Status.DispatchEpoch).Admitted().Since(at.Time).Obj()
	}}
	w.d.Workers = racing
	for range 2 {
		p, err := w.d.plan(w.ctx)
		w.must(err)
		w.d.act(w.ctx, p)
		waitForSlots(t, w.d)
	}
	w.must(w.server.Get(w.ctx, client.ObjectKey{Namespace: "ns", Name: "wl-1"}, &wl))
	if wl.Status.ClusterName != c {
		t.Fatalf("two passes after its copy on %s was admitted, wl-1 has winner %q", c, wl.Status.ClusterName)
	}
}

// racingCopies are workers whose first read of a copy returns what they showed before after changed
// them: an agent that answers while a pass goes.
type racingCopies struct {
	Workers
	after func()
}

func (r *racingCopies) Worker(name string) (remote.Worker, bool) {
	w, ok := r.Workers.Worker(name)
	if !ok {
		return nil, false
	}
	return racingWorker{Worker: w, r: r}, true
}

type racingWorker struct {
	remote.Worker
	r *racingCopies
}

func (w racingWorker) CopyInPlace(key types.NamespacedName) *gantry.Workload {
	cp := w.Worker.CopyInPlace(key)
	if w.r.after != nil {
		w.r.after()
		w.r.after = nil
	}
	return cp
}

// A queue whose quota grew is still cut at its settled tail, and decides as a full pass does; one
// whose quota shrank is walked whole.
func TestAQueueWhoseQuotaGrewIsCutAtItsSettledTail(t *testing.T) {
	w := newParkingWorld(t)
	for range 40 {
		w.apply(opAdd, 3) // a one-GPU workload of plain, whose quota is 6, 4 and 2
	}
	w.pass() // nominates twelve, the others wait for quota
	w.pass() // and are settled
	setQuota := func(n int64) {
		var gq gantry.GlobalQueue
		w.must(w.server.Get(w.ctx, client.ObjectKey{Name: "plain"}, &gq))
		gq.Spec.Clusters[0].Quota[gantry.GPUResource] = *resource.NewQuantity(n, resource.DecimalSI)
		w.must(w.server.Update(w.ctx, &gq))
	}
	setQuota(8)
	if p := w.pass(); len(p.pass.Snapshot().Cuts) == 0 {
		t.Errorf("the pass after plain's quota grew walked all %d of its workloads", len(p.pass.Snapshot().Workloads))
	}
	setQuota(7)
	if p := w.pass(); len(p.pass.Snapshot().Cuts) > 0 {
		t.Error("the pass after plain's quota shrank cut its tail")
	}
}

// A queue whose pass planned again, walking eight times as many settled workloads, has its next passes
// start from half as many, then half of that, down to the least a pass walks.
func TestAQueueThatPlannedAgainIsWalkedFurtherForAWhile(t *testing.T) {
	w := newParkingWorld(t) // a pass walks one settled workload at least
	for range 40 {
		w.apply(opAdd, 3) // a one-GPU workload of plain, whose quota is 6, 4 and 2
	}
	w.pass()
	w.pass()
	var gq gantry.GlobalQueue
	w.must(w.server.Get(w.ctx, client.ObjectKey{Name: "plain"}, &gq))
	gq.Spec.Clusters[0].Quota[gantry.GPUResource] = *resource.NewQuantity(8, resource.DecimalSI)
	w.must(w.server.Update(w.ctx, &gq))
	if p := w.pass(); p.pass.Uncuts() != 1 {
		t.Fatalf("the pass after two GPUs more planned again %d times, want once (it walked one settled workload)", p.pass.Uncuts())
	}
	for _, want := range []int{queues.CutGrowth / 2, queues.CutGrowth / 4, 1} {
		if got := w.d.queues.WalksBeforeCut("plain"); got != want {
			t.Errorf("plain's next pass walks %d settled workloads first, want %d", got, want)
		}
		w.pass()
	}
}

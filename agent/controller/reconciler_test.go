package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/gantry-dev/gantry/agent/agenttest"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := gantryv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func counterValue(t *testing.T, result, outcome string) float64 {
	t.Helper()
	var m dto.Metric
	if err := admissionsTotal.WithLabelValues(result, outcome).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestReconcilerPass runs passes against a fake client with a fake clock: the copy is admitted once, the
// report is created, rewritten when capacity changes and on every heartbeat, and not otherwise.
func TestReconcilerPass(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(gpuNode("n1"), copyOf("a", 0, 1, "4").Obj(), copyOf("big", 1, 1, "16").Obj()).
		WithStatusSubresource(&gantryv1beta1.Workload{}, &gantryv1beta1.CapacityReport{}).
		Build()
	recorder := events.NewFakeRecorder(10)
	r, err := NewReconciler(c, recorder, clk, Options{ClusterName: "worker-1"})
	if err != nil {
		t.Fatal(err)
	}
	admittedBefore := counterValue(t, "Admitted", OutcomeAdmitted)

	pass := func(wantRequeue time.Duration) {
		t.Helper()
		res, err := r.Reconcile(ctx, passRequest)
		if err != nil {
			t.Fatalf("pass at %s: %v", clk.Now().Sub(start), err)
		}
		if res.RequeueAfter != wantRequeue {
			t.Errorf("pass at %s: requeue after %s, want %s", clk.Now().Sub(start), res.RequeueAfter, wantRequeue)
		}
	}
	report := func() *gantryv1beta1.CapacityReport {
		t.Helper()
		var rep gantryv1beta1.CapacityReport
		if err := c.Get(ctx, client.ObjectKey{Name: "worker-1"}, &rep); err != nil {
			t.Fatal(err)
		}
		return &rep
	}
	admitted := func(name string) *metav1.Condition {
		t.Helper()
		var w gantryv1beta1.Workload
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, &w); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(w.Status.Conditions, gantryv1beta1.WorkloadAdmitted)
	}
	wantGPU := func(free int64) {
		t.Helper()
		// One 8-GPU node: free/k pods of k GPUs fit.
		var shapes []gantryv1beta1.GPUShapeCount
		for _, k := range []int64{1, 2, 4, 8} {
			shapes = append(shapes, gantryv1beta1.GPUShapeCount{GPUs: k, Pods: int32(free / k)})
		}
		want := []gantryv1beta1.GPUProductCapacity{{Product: "NVIDIA-A100", Nodes: 1, Allocatable: 8, Free: free, LargestFreeOnNode: free, LargestAllocatableOnNode: 8, Shapes: shapes}}
		if diff := cmp.Diff(want, report().Status.Capacity.GPUProducts); diff != "" {
			t.Errorf("GPU products (-want +got):\n%s", diff)
		}
	}

	pass(30 * time.Second)
	if cond := admitted("a"); cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != gantryv1beta1.ReasonFits {
		t.Errorf("copy a: Admitted condition %+v, want True/Fits", cond)
	}
	if cond := admitted("big"); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != gantryv1beta1.ReasonNeverFits || cond.Message == "" {
		t.Errorf("copy big: Admitted condition %+v, want False/NeverFits with a message", cond)
	}
	if got := counterValue(t, "Admitted", OutcomeAdmitted) - admittedBefore; got != 1 {
		t.Errorf("gantry_agent_admissions_total{result=Admitted,outcome=admitted} grew by %v, want 1", got)
	}
	if got := testutil.ToFloat64(agent.reservations); got != 1 {
		t.Errorf("gantry_agent_reservations is %v, want 1: copy a holds its room until its pods are bound", got)
	}
	var evs []string
	for len(recorder.Events) > 0 {
		evs = append(evs, <-recorder.Events)
	}
	// Admissions are recorded on the hub Job by the hub; the agent only reports rejections.
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning NeverFits") {
		t.Errorf("events %q, want one Warning NeverFits", evs)
	}
	rep := report()
	if rep.Status.ClusterName != "worker-1" || !rep.Status.HeartbeatTime.Time.Equal(start) || rep.Status.Capacity.ReadyNodes != 1 {
		t.Errorf("report status %+v, want cluster worker-1, heartbeat at start, 1 ready node", rep.Status)
	}
	wantGPU(4)

	// Nothing changed and the heartbeat is not due: no write.
	clk.Step(10 * time.Second)
	version := report().ResourceVersion
	pass(20 * time.Second)
	if got := report().ResourceVersion; got != version {
		t.Errorf("report rewritten with nothing changed (resourceVersion %s -> %s)", version, got)
	}
	if cond := admitted("a"); cond.Status != metav1.ConditionTrue {
		t.Errorf("copy a no longer admitted: %+v", cond)
	}

	// The heartbeat falls due.
	clk.Step(20 * time.Second)
	pass(30 * time.Second)
	if got := report().Status.HeartbeatTime.Time; !got.Equal(start.Add(30 * time.Second)) {
		t.Errorf("heartbeat %s, want %s", got, start.Add(30*time.Second))
	}

	// A pod binds a second after the heartbeat: the capacity changes, and is written once the report is
	// MinReportInterval old.
	clk.Step(time.Second)
	if err := c.Create(ctx, agenttest.MakePod("other", "ns").Node("n1").Request("nvidia.com/gpu", "3").Obj()); err != nil {
		t.Fatal(err)
	}
	pass(MinReportInterval - time.Second)
	wantGPU(4)
	clk.Step(MinReportInterval - time.Second)
	pass(30 * time.Second)
	wantGPU(1)

	// The report is deleted: the next pass creates it again.
	if err := c.Delete(ctx, report()); err != nil {
		t.Fatal(err)
	}
	pass(30 * time.Second)
	wantGPU(1)
}

func TestReportDue(t *testing.T) {
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	capacity := gantryv1beta1.CapacitySummary{Nodes: 2, ReadyNodes: 2}
	want := gantryv1beta1.CapacityReportStatus{ClusterName: "w", AgentVersion: "v0.3.0", HeartbeatTime: metav1.NewTime(at), Capacity: capacity}
	cases := map[string]struct {
		cur gantryv1beta1.CapacityReportStatus
		// saidNothing: cur has no conditions; the others show those wanted.
		saidNothing bool
		now         time.Time
		due         bool
		nextWant    time.Duration
	}{
		"never written": {
			cur: gantryv1beta1.CapacityReportStatus{}, now: at, due: true, nextWant: 30 * time.Second,
		},
		"fresh and equal": {
			cur: want, now: at.Add(12 * time.Second), due: false, nextWant: 18 * time.Second,
		},
		"heartbeat due": {
			cur: want, now: at.Add(30 * time.Second), due: true, nextWant: 30 * time.Second,
		},
		"capacity changed right after a report": {
			cur: gantryv1beta1.CapacityReportStatus{ClusterName: "w", AgentVersion: "v0.3.0", HeartbeatTime: metav1.NewTime(at),
				Capacity: gantryv1beta1.CapacitySummary{Nodes: 2, ReadyNodes: 1}},
			now: at.Add(time.Second), due: false, nextWant: 4 * time.Second,
		},
		"capacity changed": {
			cur: gantryv1beta1.CapacityReportStatus{ClusterName: "w", AgentVersion: "v0.3.0", HeartbeatTime: metav1.NewTime(at),
				Capacity: gantryv1beta1.CapacitySummary{Nodes: 2, ReadyNodes: 1}},
			now: at.Add(5 * time.Second), due: true, nextWant: 30 * time.Second,
		},
		"cluster name changed": {
			cur: gantryv1beta1.CapacityReportStatus{ClusterName: "old", AgentVersion: "v0.3.0", HeartbeatTime: metav1.NewTime(at), Capacity: capacity},
			now: at.Add(time.Second), due: true, nextWant: 30 * time.Second,
		},
		"written by an agent of another version": {
			cur: gantryv1beta1.CapacityReportStatus{ClusterName: "w", AgentVersion: "v0.2.0", HeartbeatTime: metav1.NewTime(at), Capacity: capacity},
			now: at.Add(time.Second), due: true, nextWant: 30 * time.Second,
		},
		"written by an agent that said nothing of gang scheduling": {
			cur: gantryv1beta1.CapacityReportStatus{ClusterName: "w", AgentVersion: "v0.3.0", HeartbeatTime: metav1.NewTime(at), Capacity: capacity}, saidNothing: true,
			now: at.Add(time.Second), due: true, nextWant: 30 * time.Second,
		},
	}
	want.Conditions = []metav1.Condition{GangSchedulingCondition(nil, true, at)}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if !tc.cur.HeartbeatTime.IsZero() && !tc.saidNothing {
				tc.cur.Conditions = want.Conditions
			}
			due, next := ReportDue(tc.cur, want, tc.now, 30*time.Second)
			if due != tc.due || next != tc.nextWant {
				t.Errorf("ReportDue = %v, %s; want %v, %s", due, next, tc.due, tc.nextWant)
			}
		})
	}
}

// The GangScheduling condition says whether the cluster serves PodGroups, and keeps its transition time
// while that does not change.
func TestGangSchedulingCondition(t *testing.T) {
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	served := GangSchedulingCondition(nil, true, at)
	if served.Status != metav1.ConditionTrue || served.Reason != gantryv1beta1.ReasonPodGroupsServed {
		t.Errorf("served: %+v", served)
	}
	later := GangSchedulingCondition([]metav1.Condition{served}, true, at.Add(time.Hour))
	if !later.LastTransitionTime.Equal(&served.LastTransitionTime) {
		t.Errorf("the transition time moved without a transition: %v", later.LastTransitionTime)
	}
	gone := GangSchedulingCondition([]metav1.Condition{served}, false, at.Add(time.Hour))
	if gone.Status != metav1.ConditionFalse || gone.Reason != gantryv1beta1.ReasonNoPodGroupAPI || !gone.LastTransitionTime.Time.Equal(at.Add(time.Hour)) {
		t.Errorf("not served any more: %+v", gone)
	}
}

// TestPredicates checks that only changes that can change a pass queue one.
func TestPredicates(t *testing.T) {
	node := gpuNode("n1")
	heartbeat := node.DeepCopy()
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	cordoned := node.DeepCopy()
	cordoned.Spec.Unschedulable = true
	notReady := gpuNodeWrapper("n1").NotReady().Taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule).Obj()
	readyTainted := notReady.DeepCopy()
	readyTainted.Status.Conditions = node.Status.Conditions
	oldJob := agenttest.MakeJob("a", "ns").Workload("hub-a-before").Obj()
	oldJobRunning := oldJob.DeepCopy()
	oldJobRunning.Status.Active = 1

	pending := agenttest.MakePod("p", "ns").Request("cpu", "1").Obj()
	pendingLabelled := pending.DeepCopy()
	pendingLabelled.Annotations = map[string]string{"x": "y"}
	bound := pending.DeepCopy()
	bound.Spec.NodeName = "n1"
	running := bound.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	done := running.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded

	cases := map[string]struct {
		got, want bool
	}{
		"node heartbeat":             {nodeChanged.Update(updateEvent(node, heartbeat)), false},
		"node cordoned":              {nodeChanged.Update(updateEvent(node, cordoned)), true},
		"node uncordoned":            {nodeChanged.Update(updateEvent(cordoned, node)), true},
		"node becomes Ready":         {nodeChanged.Update(updateEvent(notReady, readyTainted)), true},
		"node's not-ready taint off": {nodeChanged.Update(updateEvent(readyTainted, node)), true},
		"node added":                 {nodeChanged.Create(createEvent(node)), true},
		"Job deleted":                {jobChanged.Delete(deleteEvent(oldJob)), true},
		"Job created":                {jobChanged.Create(createEvent(oldJob)), true},
		"Job status changed":         {jobChanged.Update(updateEvent(oldJob, oldJobRunning)), false},
		"pending pod created":        {podChanged.Create(createEvent(pending)), false},
		"pending pod annotated":      {podChanged.Update(updateEvent(pending, pendingLabelled)), false},
		"pod bound":                  {podChanged.Update(updateEvent(pending, bound)), true},
		"bound pod starts running":   {podChanged.Update(updateEvent(bound, running)), false},
		"pod terminates":             {podChanged.Update(updateEvent(running, done)), true},
		"bound pod deleted":          {podChanged.Delete(deleteEvent(running)), true},
		"unbound pod deleted":        {podChanged.Delete(deleteEvent(pending)), false},
		"workload without label":     {copyChanged.Create(createEvent(&gantryv1beta1.Workload{})), false},
		"copy created":               {copyChanged.Create(createEvent(copyOf("a", 0, 1, "1").Obj())), true},
		"copy deleted":               {copyChanged.Delete(deleteEvent(copyOf("a", 0, 1, "1").Obj())), true},
		"copy's status written":      {copyChanged.Update(updateEvent(copyOf("a", 0, 1, "1").Obj(), copyOf("a", 0, 1, "1").Admitted().Obj())), false},
		"copy's spec changed":        {copyChanged.Update(updateEvent(copyOf("a", 0, 1, "1").Obj(), withGeneration(copyOf("a", 0, 1, "1").Obj(), 2))), true},
		"report deleted":             {reportChanged("w").Delete(deleteEvent(&gantryv1beta1.CapacityReport{ObjectMeta: metav1.ObjectMeta{Name: "w"}})), true},
		"report updated":             {reportChanged("w").Update(updateEvent(&gantryv1beta1.CapacityReport{}, &gantryv1beta1.CapacityReport{})), false},
		"other cluster report gone":  {reportChanged("w").Delete(deleteEvent(&gantryv1beta1.CapacityReport{ObjectMeta: metav1.ObjectMeta{Name: "x"}})), false},
	}
	for name, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: queued %v, want %v", name, tc.got, tc.want)
		}
	}
}

func withGeneration(c *gantryv1beta1.Workload, g int64) *gantryv1beta1.Workload {
	c.Generation = g
	return c
}

func createEvent(o client.Object) event.CreateEvent { return event.CreateEvent{Object: o} }
func deleteEvent(o client.Object) event.DeleteEvent { return event.DeleteEvent{Object: o} }
func updateEvent(o, n client.Object) event.UpdateEvent {
	return event.UpdateEvent{ObjectOld: o, ObjectNew: n}
}

func TestNewReconcilerNeedsClusterName(t *testing.T) {
	if _, err := NewReconciler(nil, nil, clocktesting.NewFakeClock(time.Now()), Options{}); err == nil {
		t.Error("NewReconciler without a cluster name: want an error")
	}
}

// TestPassesUnderTheManagerArePaced: beyond passesInARow passes at once, a pass asked for within the
// gap is asked for again when it is due, and runs then; Reconcile called directly is never held back.
func TestPassesUnderTheManagerArePaced(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(gpuNode("n1")).
		WithStatusSubresource(&gantryv1beta1.Workload{}, &gantryv1beta1.CapacityReport{}).Build()
	r, err := NewReconciler(c, events.NewFakeRecorder(10), clk, Options{ClusterName: "worker-1"})
	if err != nil {
		t.Fatal(err)
	}
	passes := func() float64 {
		t.Helper()
		var m dto.Metric
		if err := passDuration.Write(&m); err != nil {
			t.Fatal(err)
		}
		return float64(m.GetHistogram().GetSampleCount())
	}
	paced := r.paced()
	before := passes()
	run := func(wantPasses float64) time.Duration {
		t.Helper()
		res, err := paced.Reconcile(ctx, passRequest)
		if err != nil {
			t.Fatal(err)
		}
		if got := passes() - before; got != wantPasses {
			t.Fatalf("at %s: %v passes, want %v", clk.Now().Sub(start), got, wantPasses)
		}
		return res.RequeueAfter
	}
	for i := 1; i <= passesInARow; i++ {
		run(float64(i))
	}
	wait := run(passesInARow) // held back
	if wait <= 0 || wait > DefaultPassGap {
		t.Fatalf("a pass beyond %d in a row is asked for again after %s, want within (0, %s]", passesInARow, wait, DefaultPassGap)
	}
	clk.Step(wait)
	run(passesInARow + 1) // due
	if _, err := r.Reconcile(ctx, passRequest); err != nil {
		t.Fatal(err)
	}
	if got := passes() - before; got != passesInARow+2 {
		t.Fatalf("Reconcile called directly: %v passes, want %d", got, passesInARow+2)
	}
}

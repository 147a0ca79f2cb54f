package dispatcher

import (
	"context"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/dispatch"
)

// pendingAs is a Workload of generation 1 whose Pending condition says reason.
func pendingAs(reason string) *gantry.Workload {
	wl := makeHubWorkload("w", "q").obj()
	wl.Generation = 1
	apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: gantry.WorkloadPending, Status: metav1.ConditionTrue,
		Reason: reason, Message: "shown", ObservedGeneration: 1})
	return wl
}

// TestHoldWaiting: only a waiting verdict in place of another waiting verdict waits, and only until passes
// proposed it for VerdictSteadyTime in a row; proposing something else starts the time anew.
func TestHoldWaiting(t *testing.T) {
	capacity := &dispatch.Verdict{Reason: gantry.ReasonWaitingForCapacity, Message: "waiting for GPUs"}
	quota := &dispatch.Verdict{Reason: gantry.ReasonWaitingForQuota, Message: "waiting for quota of GlobalQueue gq"}
	unavailable := &dispatch.Verdict{Reason: gantry.ReasonNoClusterAvailable, Message: "w1 is not connected"}
	withdraw := &dispatch.Verdict{Reason: gantry.ReasonWaitingForCapacity, Message: "waiting for GPUs", Withdraw: true}
	newer := pendingAs(gantry.ReasonWaitingForQuota)
	newer.Generation = 2
	type step struct {
		after time.Duration // since the previous step
		c     change
		want  time.Duration
	}
	cases := map[string][]step{
		"quota to capacity waits, then is written": {
			{0, change{wl: pendingAs(gantry.ReasonWaitingForQuota), verdict: capacity}, VerdictSteadyTime},
			{2 * time.Second, change{wl: pendingAs(gantry.ReasonWaitingForQuota), verdict: capacity}, 3 * time.Second},
			{3 * time.Second, change{wl: pendingAs(gantry.ReasonWaitingForQuota), verdict: capacity}, 0},
		},
		"another message starts anew": {
			{0, change{wl: pendingAs(gantry.ReasonWaitingForCapacity), verdict: quota}, VerdictSteadyTime},
			{4 * time.Second, change{wl: pendingAs(gantry.ReasonWaitingForCapacity), verdict: &dispatch.Verdict{Reason: gantry.ReasonWaitingForQuota, Message: "queued behind ns/x (StrictFIFO)"}}, VerdictSteadyTime},
		},
		"a proposal that lapsed starts anew": {
			{0, change{wl: pendingAs(gantry.ReasonWaitingForQuota), verdict: capacity}, VerdictSteadyTime},
			{time.Second, change{wl: pendingAs(gantry.ReasonWaitingForQuota), verdict: unavailable}, 0},
			{time.Second, change{wl: pendingAs(gantry.ReasonWaitingForQuota), verdict: capacity}, VerdictSteadyTime},
		},
		"out of the waiting reasons at once":  {{0, change{wl: pendingAs(gantry.ReasonWaitingForQuota), verdict: unavailable}, 0}},
		"into the waiting reasons at once":    {{0, change{wl: pendingAs(gantry.ReasonNoClusterAvailable), verdict: quota}, 0}},
		"a first verdict at once":             {{0, change{wl: makeHubWorkload("w", "q").obj(), verdict: quota}, 0}},
		"a withdrawal at once":                {{0, change{wl: pendingAs(gantry.ReasonWaitingForQuota), verdict: withdraw}, 0}},
		"with a rejection at once":            {{0, change{wl: pendingAs(gantry.ReasonWaitingForQuota), verdict: capacity, rejections: []dispatch.Rejection{{Cluster: "w1"}}}, 0}},
		"a Workload of a newer spec at once":  {{0, change{wl: newer, verdict: capacity}, 0}},
		"admission explanations are not held": {{0, change{wl: pendingAs(gantry.ReasonWaitingForQuota), verdict: &dispatch.Verdict{Reason: gantry.ReasonWaitingForAdmission}}, 0}},
	}
	for name, steps := range cases {
		h := newHarness(t, at.Time)
		h.d.init()
		for i, s := range steps {
			h.clock.Step(s.after)
			if got := h.d.holdWaiting("ns/w", &s.c); got != s.want {
				t.Errorf("%s, step %d: held for %v, want %v", name, i, got, s.want)
			}
		}
		if steps[len(steps)-1].want == 0 && len(h.d.proposed) > 0 {
			t.Errorf("%s: %d proposals remembered after the verdict went through", name, len(h.d.proposed))
		}
	}
}

// TestAPassHoldsAFlickeringVerdict: a waiting Workload whose verdict would flip from WaitingForCapacity to
// WaitingForQuota is not rewritten while the flip is new; the pass says when to look again, and the
// verdict is written once it held that long.
func TestAPassHoldsAFlickeringVerdict(t *testing.T) {
	running := makeHubWorkload("running", "q").nominated("gq", 1, "w1").admittedOn("w1").obj()
	waiting := makeHubWorkload("waiting", "q").obj()
	apimeta.SetStatusCondition(&waiting.Status.Conditions, metav1.Condition{Type: gantry.WorkloadPending, Status: metav1.ConditionTrue,
		Reason: gantry.ReasonWaitingForCapacity, Message: "waiting for GPUs", LastTransitionTime: at})
	h := newHarness(t, at.Time, append(hubObjects(), running, waiting)...)
	wait, err := h.d.pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if wait <= 0 || wait > VerdictSteadyTime {
		t.Errorf("the pass asks for the next in %v, want within %v", wait, VerdictSteadyTime)
	}
	h.clock.Step(VerdictSteadyTime - time.Second)
	h.pass()
	if writes, _ := h.counts(); writes["waiting"] > 0 {
		t.Fatalf("waiting Workload written %d times before its new verdict held", writes["waiting"])
	}
	h.clock.Step(time.Second)
	h.pass()
	if c := apimeta.FindStatusCondition(h.status("waiting").Conditions, gantry.WorkloadPending); c == nil || c.Reason != gantry.ReasonWaitingForQuota {
		t.Errorf("after %v pending as %+v, want %s", VerdictSteadyTime, c, gantry.ReasonWaitingForQuota)
	}
}

// TestAProposalLapsesWithAPassThatProposesNothing: a pass that proposes nothing for a workload (its
// verdict stands) forgets what earlier passes proposed for it, so a flip that comes back later waits
// its whole time again.
func TestAProposalLapsesWithAPassThatProposesNothing(t *testing.T) {
	h := newHarness(t, at.Time)
	h.d.init()
	c := change{wl: pendingAs(gantry.ReasonWaitingForQuota), verdict: &dispatch.Verdict{Reason: gantry.ReasonWaitingForCapacity, Message: "waiting for GPUs"}}
	if got := h.d.holdWaiting("ns/w", &c); got != VerdictSteadyTime {
		t.Fatalf("held for %v, want %v", got, VerdictSteadyTime)
	}
	h.d.execute(context.Background(), func(string) *gantry.Workload { return c.wl }, dispatch.Result{}, nil)
	h.clock.Step(VerdictSteadyTime)
	if got := h.d.holdWaiting("ns/w", &c); got != VerdictSteadyTime {
		t.Errorf("after a pass without a verdict for it, held for %v, want %v anew", got, VerdictSteadyTime)
	}
}

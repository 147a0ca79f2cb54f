package dispatcher

import (
	"context"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// TestAPassHoldsAFlickeringVerdict: a waiting Workload whose verdict would flip from WaitingForCapacity to
// WaitingForQuota is not rewritten while the flip is new; the pass says when to look again, and the
// verdict is written once it held that long.
func TestAPassHoldsAFlickeringVerdict(t *testing.T) {
	running := makeHubWorkload("running", "q").Nominated("gq", 1, "w1").AdmittedOn("w1").Obj()
	waiting := makeHubWorkload("waiting", "q").Pending(gantry.ReasonWaitingForCapacity, "waiting for GPUs").Obj()
	h := newHarness(t, at.Time, append(hubObjects(), running, waiting)...)
	wait, err := h.d.pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if wait <= 0 || wait > dispatch.VerdictSteadyTime {
		t.Errorf("the pass asks for the next in %v, want within %v", wait, dispatch.VerdictSteadyTime)
	}
	h.clock.Step(dispatch.VerdictSteadyTime - time.Second)
	h.pass()
	if writes, _ := h.counts(); writes["waiting"] > 0 {
		t.Fatalf("waiting Workload written %d times before its new verdict held", writes["waiting"])
	}
	h.clock.Step(time.Second)
	h.pass()
	if c := apimeta.FindStatusCondition(h.status("waiting").Conditions, gantry.WorkloadPending); c == nil || c.Reason != gantry.ReasonWaitingForQuota {
		t.Errorf("after %v pending as %+v, want %s", dispatch.VerdictSteadyTime, c, gantry.ReasonWaitingForQuota)
	}
}

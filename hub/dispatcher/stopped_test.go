package dispatcher

import (
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// The Stopped condition follows the Pending one: absent for a workload never stopped, True while a
// stop holds it, False (Resumed) from the first Pending written after, whatever it says.
func TestTheStoppedConditionFollowsPending(t *testing.T) {
	st := &gantry.WorkloadStatus{}
	stopped := func() *metav1.Condition { return apimeta.FindStatusCondition(st.Conditions, gantry.WorkloadStopped) }
	steps := []struct {
		status metav1.ConditionStatus
		reason string
		want   string // the Stopped condition as status/reason, "" for none
	}{
		{metav1.ConditionTrue, gantry.ReasonWaitingForQuota, ""},
		{metav1.ConditionTrue, gantry.ReasonStopped, "True/" + gantry.ReasonStopped},
		{metav1.ConditionTrue, gantry.ReasonStopped, "True/" + gantry.ReasonStopped},
		{metav1.ConditionTrue, gantry.ReasonWaitingForAdmission, "False/" + gantry.ReasonResumed},
		{metav1.ConditionFalse, gantry.ReasonAdmittedByCluster, "False/" + gantry.ReasonResumed},
		{metav1.ConditionTrue, gantry.ReasonEvicted, "False/" + gantry.ReasonResumed},
	}
	for i, s := range steps {
		setCondition(st, gantry.WorkloadPending, s.status, s.reason, "", 1)
		got := ""
		if c := stopped(); c != nil {
			got = string(c.Status) + "/" + c.Reason
		}
		if got != s.want {
			t.Errorf("step %d, Pending=%s/%s: Stopped %q, want %q", i, s.status, s.reason, got, s.want)
		}
	}
}

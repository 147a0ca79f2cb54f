package hubtest

import (
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// TestEveryStatusFieldHasOneWriter: each field of WorkloadStatus, and each condition type the hub sets,
// is named by exactly one writer's list; a field added to the type without an owner fails here.
func TestEveryStatusFieldHasOneWriter(t *testing.T) {
	owners := map[string][]string{}
	for who, fields := range map[string][]string{"dispatcher": DispatcherFields, "workload controller": WorkloadControllerFields,
		"accountant": AccountantFields, "agent": CopyOnlyFields} {
		for _, f := range fields {
			owners[f] = append(owners[f], who)
		}
	}
	want := []string{"conditions[" + gantry.WorkloadPending + "]", "conditions[" + gantry.WorkloadDispatched + "]",
		"conditions[" + gantry.WorkloadAdmitted + "]", "conditions[" + gantry.WorkloadClusterReachable + "]",
		"conditions[" + gantry.WorkloadJobCreated + "]", "conditions[" + gantry.WorkloadFinished + "]",
		"conditions[" + gantry.WorkloadDeleting + "]", "conditions[" + gantry.WorkloadStopped + "]"}
	st := reflect.TypeFor[gantry.WorkloadStatus]()
	for i := range st.NumField() {
		if name := StatusFieldName(st.Field(i)); name != "conditions" {
			want = append(want, name)
		}
	}
	for _, f := range want {
		if len(owners[f]) != 1 {
			t.Errorf("%s is written by %v, want exactly one writer", f, owners[f])
		}
	}
	for f := range owners {
		if !slices.Contains(want, f) {
			t.Errorf("%s is no field of WorkloadStatus", f)
		}
	}
}

func TestStatusFieldsChanged(t *testing.T) {
	before := MakeWorkload("train", "ns").Nominated("gpus", 2, "w1", "w2").AdmittedOn("w1").Obj().Status
	after := *before.DeepCopy()
	after.Evictions = append(after.Evictions, gantry.Eviction{Cluster: "w1", Epoch: 2, Reason: gantry.ReasonPreempted})
	after.Conditions = append(after.Conditions, metav1.Condition{Type: gantry.WorkloadJobCreated, Status: metav1.ConditionFalse, Reason: gantry.ReasonEvicted})
	after.Conditions[0].Message = "changed"
	got := StatusFieldsChanged(&before, &after)
	want := []string{"conditions[" + before.Conditions[0].Type + "]", "conditions[" + gantry.WorkloadJobCreated + "]", "evictions"}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	if got := StatusFieldsChanged(&before, before.DeepCopy()); len(got) != 0 {
		t.Errorf("unchanged status: %v", got)
	}
}

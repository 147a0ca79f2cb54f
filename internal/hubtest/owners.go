package hubtest

import (
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// The one writer of each field of a hub Workload's status (ARCHITECTURE.md, "Who writes a Workload's
// status"). A field is the JSON name of a WorkloadStatus field, or conditions[Type] for one condition.
var (
	// DispatcherFields are written by the dispatcher (hub/dispatcher): what it decided.
	DispatcherFields = []string{"dispatchEpoch", "globalQueue", "nominatedClusters", "clusterName", "admission",
		"preemption", "rejectedClusters", "conditions[Pending]", "conditions[Dispatched]", "conditions[Admitted]",
		"conditions[Stopped]"}
	// WorkloadControllerFields are written by the Workload controller (hub/workload, dispatch/workersync):
	// what became of the job on the workers.
	WorkloadControllerFields = []string{"evictions", "runs", "conditions[ClusterReachable]", "conditions[JobCreated]",
		"conditions[Finished]", "conditions[Deleting]"}
	// AccountantFields are written by the accountant (hub/usage): which runs its namespace's Usage counts.
	AccountantFields = []string{"accountedEpoch"}
	// CopyOnlyFields are written on a worker's copy, by its agent, and on the hub by no one.
	CopyOnlyFields = []string{"wouldFitWithout"}
)

// StatusFieldsChanged names the fields of a Workload's status that differ between before and after, in
// the terms of DispatcherFields and WorkloadControllerFields. Every field of the type is compared, so a
// field added to it is never missed.
func StatusFieldsChanged(before, after *gantry.WorkloadStatus) []string {
	var changed []string
	b, a := reflect.ValueOf(before).Elem(), reflect.ValueOf(after).Elem()
	for i := range b.NumField() {
		name := StatusFieldName(b.Type().Field(i))
		if name == "conditions" {
			changed = append(changed, conditionsChanged(before, after)...)
			continue
		}
		if !equality.Semantic.DeepEqual(b.Field(i).Interface(), a.Field(i).Interface()) {
			changed = append(changed, name)
		}
	}
	return changed
}

// StatusFieldName is the JSON name of a field of WorkloadStatus.
func StatusFieldName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

func conditionsChanged(before, after *gantry.WorkloadStatus) []string {
	var types []string
	for _, c := range append(slices.Clone(before.Conditions), after.Conditions...) {
		if !slices.Contains(types, c.Type) {
			types = append(types, c.Type)
		}
	}
	var changed []string
	for _, t := range types {
		if !equality.Semantic.DeepEqual(apimeta.FindStatusCondition(before.Conditions, t), apimeta.FindStatusCondition(after.Conditions, t)) {
			changed = append(changed, "conditions["+t+"]")
		}
	}
	return changed
}

package dispatcher

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/dispatch"
)

// ChangesAPass tells whether an update of a GlobalQueue, Queue, Cohort, WorkerCluster or Namespace
// changes what a pass decides over: its spec (generation) or labels, a WorkerCluster's agent readiness
// or GPUs (dispatch.GPUCapacityOf). Status the dispatcher writes itself (queue and cohort counts, once a second while jobs
// come and go) and a WorkerCluster's other conditions ask for no pass; the connection's own changes
// ask through ConnectionChanged.
func ChangesAPass(oldObj, newObj client.Object) bool {
	if oldObj.GetGeneration() != newObj.GetGeneration() || !maps.Equal(oldObj.GetLabels(), newObj.GetLabels()) {
		return true
	}
	switch n := newObj.(type) {
	case *gantry.WorkerCluster:
		o, ok := oldObj.(*gantry.WorkerCluster)
		return !ok || apimeta.IsStatusConditionTrue(o.Status.Conditions, gantry.ClusterAgentReady) !=
			apimeta.IsStatusConditionTrue(n.Status.Conditions, gantry.ClusterAgentReady) ||
			!equality.Semantic.DeepEqual(dispatch.GPUCapacityOf(o.Status.Capacity), dispatch.GPUCapacityOf(n.Status.Capacity))
	case *gantry.GlobalQueue, *gantry.Queue, *gantry.Cohort, *corev1.Namespace:
		return false
	}
	return true
}

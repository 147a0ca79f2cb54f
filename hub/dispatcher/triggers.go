package dispatcher

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// ChangesAPass tells whether an update of a GlobalQueue, Queue, Cohort, WorkerCluster or Namespace
// changes what a pass decides over: its spec (generation) or labels, or what a pass reads of a
// WorkerCluster's status (clusterOf: the same function builds the snapshot's clusters, so that what
// it reads is what asks for a pass). Status the dispatcher writes itself (queue and cohort counts, once
// a second while jobs come and go) and a WorkerCluster's other conditions ask for no pass; the
// connection's own changes ask through ConnectionChanged.
func ChangesAPass(oldObj, newObj client.Object) bool {
	if oldObj.GetGeneration() != newObj.GetGeneration() || !maps.Equal(oldObj.GetLabels(), newObj.GetLabels()) {
		return true
	}
	switch n := newObj.(type) {
	case *gantry.WorkerCluster:
		o, ok := oldObj.(*gantry.WorkerCluster)
		return !ok || !equality.Semantic.DeepEqual(clusterOf(o), clusterOf(n))
	case *gantry.GlobalQueue, *gantry.Queue, *gantry.Cohort, *corev1.Namespace:
		return false
	}
	return true
}

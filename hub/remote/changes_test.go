package remote

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

type seen struct{ objects []string }

func (s *seen) WorkerObjectChanged(cluster string, obj client.Object) {
	s.objects = append(s.objects, cluster+"/"+obj.GetName())
}
func (s *seen) CapacityReportChanged(string) {}
func (s *seen) ConnectionChanged(string)     {}

// Only what Gantry creates reaches the hub's controllers: an object another controller made from it
// (a JobSet's Jobs carry the workload's labels on their pods' template) is that controller's, and the
// hub must never take it for an orphan of its own.
func TestObjectsOfOtherControllersAreNotGantrys(t *testing.T) {
	s := &seen{}
	m := NewManager(runtime.NewScheme(), Options{})
	m.SetHandler(s)
	labels := map[string]string{gantry.WorkloadUIDLabel: "wl-uid"}
	ours := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ns", Labels: labels}}
	child := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train-workers-0", Namespace: "ns", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "train", UID: "js", Controller: ptr.To(true)}}}}
	m.objectChanged("w1", ours)
	m.objectChanged("w1", child)
	m.objectChanged("w1", toolscache.DeletedFinalStateUnknown{Key: "ns/train-workers-0", Obj: child})
	if len(s.objects) != 1 || s.objects[0] != "w1/train" {
		t.Fatalf("handed on %v, want only w1/train", s.objects)
	}
}

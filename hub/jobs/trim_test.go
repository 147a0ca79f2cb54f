package jobs

import (
	"context"
	"encoding/json"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

func queuedJob() *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: "u1", Labels: map[string]string{gantry.QueueLabel: "gpu"}},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(gantry.JobManagedBy), Suspend: ptr.To(true), Parallelism: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gantry.GPUResource: resource.MustParse("4")}}}}}}},
		Status: batchv1.JobStatus{Active: 1},
	}
}

// The cache keeps what every reader but the Workload's builder and the Job's creation reads.
func TestTrimJobKeepsAllButThePodTemplateAndSelector(t *testing.T) {
	job := queuedJob()
	job.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	job.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "u1"}}
	out, err := TrimJob(job.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	trimmed := out.(*batchv1.Job)
	if !Trimmed(trimmed) || Trimmed(job) {
		t.Fatalf("Trimmed says %v of the trimmed Job and %v of the whole one", Trimmed(trimmed), Trimmed(job))
	}
	want := job.DeepCopy()
	want.ManagedFields, want.Spec.Template, want.Spec.Selector = nil, corev1.PodTemplateSpec{}, nil
	if !equalJSON(t, trimmed, want) {
		t.Fatalf("trimmed to %+v, want %+v", trimmed, want)
	}
	js := &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js"}}
	if out, _ := TrimJob(js); out != js || Trimmed(js) {
		t.Fatal("a JobSet is not a batch Job: left as it is")
	}
}

// A Job the cache trimmed gets its Workload from the Job the API server holds, pods and all.
func TestAWorkloadIsBuiltFromTheWholeJob(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gantry.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	cached, _ := TrimJob(queuedJob())
	cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cached.(client.Object)).Build()
	live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(queuedJob()).Build()
	r := &Reconciler{Client: cache, APIReader: live, Recorder: events.NewFakeRecorder(10), Kind: jobkind.Job{}}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "train"}}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var wl gantry.Workload
	if err := cache.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: jobkind.WorkloadName(jobkind.Job{}, "train")}, &wl); err != nil {
		t.Fatal(err)
	}
	ps := wl.Spec.PodSets
	if len(ps) != 1 || ps[0].Count != 2 || !ps[0].Requests[gantry.GPUResource].Equal(resource.MustParse("4")) {
		t.Fatalf("pod sets %+v, want 2 pods of 4 GPUs", ps)
	}

	// Gone from the API server while the cache still shows it: nothing is built, nothing fails.
	if err := live.Delete(context.Background(), queuedJob()); err != nil {
		t.Fatal(err)
	}
	if err := cache.Delete(context.Background(), &wl); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("a Job gone from the API server: %v", err)
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	return string(ja) == string(jb)
}

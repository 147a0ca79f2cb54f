package jobs

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

// A Job whose PriorityClass cannot be read is never given up: a refused or failed read is retried with
// backoff, a missing class is reported and looked at again, and the Workload comes once the class does.
func TestAPriorityClassThatCannotBeReadHoldsTheJobWithoutLosingIt(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := gantry.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: "u1", Labels: map[string]string{gantry.QueueLabel: "gpu"}},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To(gantry.JobManagedBy), Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{PriorityClassName: "high",
				Containers: []corev1.Container{{Name: "main"}}}}},
	}
	forbidden := true
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(job).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*schedulingv1.PriorityClass); ok && forbidden {
				return apierrors.NewForbidden(schema.GroupResource{Group: "scheduling.k8s.io", Resource: "priorityclasses"}, key.Name, nil)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Recorder: recorder, Kind: jobkind.Job{}}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "train"}}
	wlKey := types.NamespacedName{Namespace: "team-a", Name: jobkind.WorkloadName(jobkind.Job{}, "train")}

	if _, err := r.Reconcile(context.Background(), req); !apierrors.IsForbidden(err) {
		t.Fatalf("a refused read: %v, want the error back for a retry", err)
	}
	forbidden = false
	res, err := r.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("a missing PriorityClass: %+v %v, want it looked at again later", res, err)
	}
	if ev := <-recorder.Events; !strings.Contains(ev, EventInvalidJob) || !strings.Contains(ev, `"high"`) {
		t.Errorf("event %q", ev)
	}
	if err := c.Get(context.Background(), wlKey, &gantry.Workload{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Workload before the PriorityClass exists: %v", err)
	}
	if err := c.Create(context.Background(), &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var wl gantry.Workload
	if err := c.Get(context.Background(), wlKey, &wl); err != nil || wl.Spec.Priority != 1000 {
		t.Fatalf("the Workload once the class exists: priority %d, %v", wl.Spec.Priority, err)
	}
}

// A TrainJob's pods are described by its runtime, read on the hub: a runtime not there yet is reported
// and looked at again, and the Workload comes, with the runtime's pods, once it is.
func TestATrainJobWaitsForItsRuntime(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gantry.AddToScheme, jobkind.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "tune", Namespace: "team-a", UID: "u1", Labels: map[string]string{gantry.QueueLabel: "gpu"}},
		Spec: trainer.TrainJobSpec{Suspend: ptr.To(true), RuntimeRef: trainer.RuntimeRef{Name: "torch"},
			Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](3)}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tj).Build()
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Recorder: recorder, Kind: jobkind.TrainJob{}}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "tune"}}

	res, err := r.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("a missing runtime: %+v %v, want it looked at again later", res, err)
	}
	if ev := <-recorder.Events; !strings.Contains(ev, EventInvalidJob) || !strings.Contains(ev, `ClusterTrainingRuntime "torch" not found`) {
		t.Errorf("event %q", ev)
	}
	runtimeSpec := trainer.TrainingRuntimeSpec{Template: trainer.JobSetTemplateSpec{Spec: jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{{
		Name: "node", Replicas: 1, Template: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
			Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "node"}}}}}},
	}}}}}
	if err := c.Create(context.Background(), &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}, Spec: runtimeSpec}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var wl gantry.Workload
	key := types.NamespacedName{Namespace: "team-a", Name: jobkind.WorkloadName(jobkind.TrainJob{}, "tune")}
	if err := c.Get(context.Background(), key, &wl); err != nil || len(wl.Spec.PodSets) != 1 || wl.Spec.PodSets[0].Count != 3 {
		t.Fatalf("the Workload once the runtime exists: %+v, %v", wl.Spec.PodSets, err)
	}
}

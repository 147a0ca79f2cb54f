package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/dispatch/workersync"
)

// Reasons of Events on hub Jobs.
const (
	EventNotManaged = "NotManaged"
	EventInvalidJob = "InvalidJob"
)

// Reconciler keeps one Workload per queued Job and deletes it with the Job.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
}

// SetupWithManager registers the controller for Jobs that carry the queue label.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	queued := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[gantry.QueueLabel] != "" })
	return ctrl.NewControllerManagedBy(mgr).
		Named("hub-jobs").
		For(&batchv1.Job{}, builder.WithPredicates(queued, predicate.GenerationChangedPredicate{})).
		// A Workload that appears (also each one listed when the hub starts) has its Job looked at, so a
		// Workload whose Job went while the hub was down is deleted even where no garbage collector
		// runs. A Workload that is gone brings its Job's name back here too: a Job resubmitted under that
		// name while the old Workload waited for its worker gets its own Workload then.
		Owns(&gantry.Workload{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return true },
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return true },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// Reconcile creates the Job's Workload, or deletes it once the Job is gone.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wlKey := types.NamespacedName{Namespace: req.Namespace, Name: WorkloadName(req.Name)}
	var job batchv1.Job
	if err := r.Client.Get(ctx, req.NamespacedName, &job); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.deleteWorkload(ctx, wlKey)
		}
		return ctrl.Result{}, err
	}
	if job.DeletionTimestamp != nil {
		return ctrl.Result{}, r.deleteWorkload(ctx, wlKey)
	}
	if ptr.Deref(job.Spec.ManagedBy, "") != gantry.JobManagedBy {
		// spec.managedBy is immutable: a Job created without it belongs to the hub's own Job controller.
		r.Recorder.Eventf(&job, nil, corev1.EventTypeWarning, EventNotManaged, "Dispatch",
			"Job has label %s but spec.managedBy is %q, not %q: it was created before Gantry's admission policy was installed; recreate it",
			gantry.QueueLabel, ptr.Deref(job.Spec.ManagedBy, ""), gantry.JobManagedBy)
		return ctrl.Result{}, nil
	}

	var existing gantry.Workload
	err := r.Client.Get(ctx, wlKey, &existing)
	if err == nil || !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err // one of this Job, or an earlier one's that is going: its deletion requeues
	}
	if ranBefore(&job) {
		return ctrl.Result{}, r.failRanBefore(ctx, &job)
	}
	priority, err := r.priority(ctx, &job)
	var invalid invalidJobError
	if err != nil && !errors.As(err, &invalid) {
		return ctrl.Result{}, err // the API server's answer, not the Job's fault: retried with backoff
	}
	if err == nil {
		_, _, err = PlacementOf(&job)
	}
	if err != nil {
		r.Recorder.Eventf(&job, nil, corev1.EventTypeWarning, EventInvalidJob, "Dispatch", "%v", err)
		// The PriorityClass may be created later, and no watch brings the Job back then.
		return ctrl.Result{RequeueAfter: invalidJobRecheck}, nil
	}
	wl := NewWorkload(&job, priority)
	if err := r.Client.Create(ctx, wl); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("creating workload for job %s: %w", req.NamespacedName, err)
	}
	return ctrl.Result{}, nil
}

// ranBefore tells whether the Job already started or ended on a worker: its status, mirrored from
// there, says so. Its Workload is gone (deleted by hand), and a new one would run the Job again.
func ranBefore(job *batchv1.Job) bool {
	if job.Status.StartTime != nil {
		return true
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// failRanBefore marks a Job whose Workload was deleted after it started as Failed, unless it finished;
// it is not run again.
func (r *Reconciler) failRanBefore(ctx context.Context, job *batchv1.Job) error {
	msg := "its Workload was deleted after the Job had started on a worker; it is not run again"
	st := workersync.FailedStatus(job, gantry.ReasonRanBefore, msg, metav1.Now())
	if st == nil {
		return nil // it finished: nothing to do
	}
	job.Status = *st
	if err := r.Client.Status().Update(ctx, job); err != nil {
		return fmt.Errorf("marking job %s failed: %w", client.ObjectKeyFromObject(job), err)
	}
	r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, gantry.ReasonRanBefore, "Dispatch", "%s", msg)
	return nil
}

// invalidJobRecheck is how often a Job that cannot be queued as it is gets looked at again.
const invalidJobRecheck = time.Minute

// invalidJobError is what is wrong with the Job itself, as opposed to a failed request.
type invalidJobError struct{ error }

func (r *Reconciler) priority(ctx context.Context, job *batchv1.Job) (int32, error) {
	name := job.Spec.Template.Spec.PriorityClassName
	if name == "" {
		return 0, nil
	}
	var pc schedulingv1.PriorityClass
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, &pc); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, invalidJobError{fmt.Errorf("PriorityClass %q of the pod template not found", name)}
		}
		return 0, fmt.Errorf("reading PriorityClass %q: %w", name, err)
	}
	return pc.Value, nil
}

// deleteWorkload starts the deletion of the Job's Workload without waiting for the garbage collector,
// which would delete it through its owner reference, only later.
func (r *Reconciler) deleteWorkload(ctx context.Context, key types.NamespacedName) error {
	wl := &gantry.Workload{}
	if err := r.Client.Get(ctx, key, wl); err != nil || wl.DeletionTimestamp != nil {
		// Gone or going: asking again would only cost a request. A Workload too new for the cache
		// still goes with its Job, through the owner reference.
		return client.IgnoreNotFound(err)
	}
	uid := wl.UID
	return client.IgnoreNotFound(r.Client.Delete(ctx, wl, client.Preconditions{UID: &uid}))
}

// Package jobs turns the jobs submitted to the hub, of every kind of jobkind, into Workloads.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

// Reasons of Events on hub Jobs.
const (
	EventNotManaged = "NotManaged"
	EventInvalidJob = "InvalidJob"
	// EventJobChanged: the job changed while it waited, and its Workload is made anew.
	EventJobChanged = "JobChanged"
	// EventChangeNotCarried: the job changed after its Job was created on the winner, which runs as
	// admitted.
	EventChangeNotCarried = "ChangeNotCarried"
	// EventStopped and EventResumed: the job's owner stopped or resumed it (gantry.dev/stopped).
	EventStopped = "Stopped"
	EventResumed = "Resumed"
)

// Reconciler keeps one Workload per queued job of its kind and deletes it with the job.
type Reconciler struct {
	Client client.Client
	// APIReader reads a Job whole when the cache trimmed it (TrimJob) and Templates does not keep its
	// template; nil uses Client.
	APIReader client.Reader
	Templates *Templates
	Recorder  events.EventRecorder
	Kind      jobkind.Kind
}

// SetupWithManager registers the controller for jobs of the kind that carry the queue label.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	queued := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[gantry.QueueLabel] != "" })
	// A job stopped or resumed changes only its metadata, which leaves its generation as it was.
	stoppedChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return jobkind.Stopped(e.ObjectOld) != jobkind.Stopped(e.ObjectNew)
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("hub-"+jobkind.Ref(r.Kind.Name())+"s").
		For(r.Kind.New(), builder.WithPredicates(queued, predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, stoppedChanged))).
		// A Workload that appears (also each one listed when the hub starts) has its job looked at, so a
		// Workload whose job went while the hub was down is deleted even where no garbage collector
		// runs, and so is one the collector orphaned (a job deleted with --cascade=orphan): the job is
		// found by the Workload's name, not its owner reference. A Workload that is gone brings its job's
		// name back here too: a job resubmitted under that name while the old Workload waited for its
		// worker gets its own Workload then.
		Watches(&gantry.Workload{}, handler.EnqueueRequestsFromMapFunc(r.jobOf), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return true },
			UpdateFunc:  func(event.UpdateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return true },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// jobOf is the job of the kind a Workload stands for, by the Workload's name; none for another kind's.
func (r *Reconciler) jobOf(_ context.Context, wl client.Object) []ctrl.Request {
	k, name, ok := jobkind.ParseWorkloadName(wl.GetName())
	if !ok || k.Name() != r.Kind.Name() {
		return nil
	}
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: wl.GetNamespace(), Name: name}}}
}

// Reconcile creates the job's Workload, or deletes it once the job is gone.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wlKey := types.NamespacedName{Namespace: req.Namespace, Name: jobkind.WorkloadName(r.Kind, req.Name)}
	// The job and its Workload are read in place, not copied: most reconciles, every one when the hub
	// starts over a deep queue, only find that the Workload is there. What is written is copied first.
	job := r.Kind.New()
	if err := r.Client.Get(ctx, req.NamespacedName, job, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.deleteWorkload(ctx, wlKey)
		}
		return ctrl.Result{}, err
	}
	if job.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, r.deleteWorkload(ctx, wlKey)
	}
	if held, why := r.Kind.Held(job); !held {
		// What holds it is set at creation only: a job created without it belongs to the hub's own controller.
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, EventNotManaged, "Dispatch",
			"%s: it was created before Gantry's admission policy was installed; recreate it", why)
		return ctrl.Result{}, nil
	}

	var existing gantry.Workload
	switch err := r.Client.Get(ctx, wlKey, &existing, client.UnsafeDisableDeepCopy); {
	case err == nil:
		return r.keepTrue(ctx, job, &existing)
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}
	if r.Kind.State(job).Started {
		// Its status, mirrored from a worker, says it ran: its Workload was deleted by hand, and a new one
		// would run it again.
		return ctrl.Result{}, r.failRanBefore(ctx, job)
	}
	job, err := r.wholeJob(ctx, job)
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // gone meanwhile: its deletion comes back here
	}
	wl, err := r.newWorkload(ctx, job)
	var invalid InvalidJobError
	if err != nil && !errors.As(err, &invalid) {
		return ctrl.Result{}, err // the API server's answer, not the job's fault: retried with backoff
	}
	if err != nil {
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, EventInvalidJob, "Dispatch", "%v", err)
		// The PriorityClass or the runtime may be created later, and no watch brings the job back then.
		return ctrl.Result{RequeueAfter: invalidJobRecheck}, nil
	}
	if err := r.Client.Create(ctx, wl); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("creating workload for %s %s: %w", r.Kind.Name(), req.NamespacedName, err)
	}
	return ctrl.Result{}, nil
}

// keepTrue keeps the Workload found under the job's Workload name true to the job. An earlier job's of
// the name goes: its job went and came back between two looks, and its deletion brings this job back
// here. The job's own is compared with the job once the job's spec moved on from the generation it
// describes.
func (r *Reconciler) keepTrue(ctx context.Context, job client.Object, wl *gantry.Workload) (ctrl.Result, error) {
	finished := apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadFinished)
	moved := wl.Spec.JobGeneration != 0 && wl.Spec.JobGeneration != job.GetGeneration()
	switch {
	case wl.DeletionTimestamp != nil:
		return ctrl.Result{}, nil // its deletion requeues
	case !metav1.IsControlledBy(wl, job):
		return ctrl.Result{}, r.deleteWorkload(ctx, client.ObjectKeyFromObject(wl))
	case !finished && wl.Spec.Stopped != jobkind.Stopped(job):
		if err := r.recordStopped(ctx, job, wl); err != nil {
			return ctrl.Result{}, err
		}
		if moved { // its spec changed too: looked at again once the cache shows this write
			return ctrl.Result{RequeueAfter: jobChangedRecheck}, nil
		}
		return ctrl.Result{}, nil
	case !moved || finished:
		return ctrl.Result{}, nil // it describes the job, or the job ran as it was
	}
	job, err := r.wholeJob(ctx, job)
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	want, err := r.newWorkload(ctx, job)
	var invalid InvalidJobError
	var changes []string
	switch {
	case errors.As(err, &invalid):
		changes = []string{err.Error()}
	case err != nil:
		return ctrl.Result{}, err
	default:
		changes = jobkind.Changes(&wl.Spec, &want.Spec)
	}
	return r.jobChanged(ctx, job, wl, changes)
}

// recordStopped copies the job's stop (its annotation gantry.dev/stopped) to its Workload's
// spec.stopped, where the dispatcher and the Workload controller act on it: the owner may change the
// job, not its Workload. The Workload keeps its place in its queue (it is the same Workload).
func (r *Reconciler) recordStopped(ctx context.Context, job client.Object, wl *gantry.Workload) error {
	stopped := jobkind.Stopped(job)
	patch := client.MergeFrom(wl.DeepCopy())
	wl = wl.DeepCopy() // read in place from the cache
	wl.Spec.Stopped = stopped
	if err := r.Client.Patch(ctx, wl, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	if stopped {
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, EventStopped, "Stop",
			"Stopped by its annotation %s: it is not dispatched, and is taken back from its cluster if it runs, until it is resumed", gantry.StoppedAnnotation)
	} else {
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, EventResumed, "Resume",
			"Resumed: it waits in its queue again, in its place, and is dispatched as usual")
	}
	return nil
}

// jobChangedRecheck is how often a job that changed between its admission and the creation of its Job
// on the winner is looked at again: the workload path takes its Workload back meanwhile.
const jobChangedRecheck = time.Second

// jobChanged acts on a job whose spec moved on from the generation its Workload describes. A change
// that leaves the demand as it was is recorded. One that changes it, while the job waits, makes the
// Workload anew: it is deleted (only as it was read: a winner written meanwhile fails the
// precondition) and its deletion brings the job back here. Once a winner admitted it, the job runs as
// admitted: the workload path takes it back before a Job is built from the change, and a change that
// came after the Job was created is not carried, which the job's Event says.
func (r *Reconciler) jobChanged(ctx context.Context, job client.Object, wl *gantry.Workload, changes []string) (ctrl.Result, error) {
	created := apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadJobCreated)
	switch {
	case len(changes) == 0:
		patch := client.MergeFrom(wl.DeepCopy())
		wl = wl.DeepCopy() // read in place from the cache
		wl.Spec.JobGeneration = job.GetGeneration()
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, wl, patch))
	case wl.Status.Winner() == "":
		uid, version := wl.UID, wl.ResourceVersion
		err := r.Client.Delete(ctx, wl.DeepCopy(), client.Preconditions{UID: &uid, ResourceVersion: &version})
		if err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err) // a conflict: looked at again with what changed
		}
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, EventJobChanged, "Dispatch",
			"The job changed while it waited (%s): its Workload is made anew and it waits in its queue again", strings.Join(changes, "; "))
	case !created:
		return ctrl.Result{RequeueAfter: jobChangedRecheck}, nil
	default:
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, EventChangeNotCarried, "Dispatch",
			"The job changed after it was admitted on %s (%s): it runs there as admitted; delete it and submit it again to run the change",
			wl.Status.Winner(), strings.Join(changes, "; "))
	}
	return ctrl.Result{}, nil
}

// wholeJob is the job whole (Templates.Whole), and never the cache's own object, which Reconcile reads in
// place: the Workload built from it may share its maps and slices, and a write decodes into them.
func (r *Reconciler) wholeJob(ctx context.Context, job client.Object) (client.Object, error) {
	live := r.APIReader
	if live == nil {
		live = r.Client
	}
	whole, err := r.Templates.Whole(ctx, live, job)
	if err == nil && whole == job {
		whole = job.DeepCopyObject().(client.Object)
	}
	return whole, err
}

// failRanBefore marks a job whose Workload was deleted after it started as Failed, unless it finished;
// it is not run again.
func (r *Reconciler) failRanBefore(ctx context.Context, job client.Object) error {
	msg := "its Workload was deleted after the job had started on a worker; it is not run again"
	job = job.DeepCopyObject().(client.Object) // read in place from the cache
	if !r.Kind.Fail(job, gantry.ReasonRanBefore, msg, metav1.Now()) {
		return nil // it finished: nothing to do
	}
	if err := r.Client.Status().Update(ctx, job); err != nil {
		return fmt.Errorf("marking %s %s failed: %w", r.Kind.Name(), client.ObjectKeyFromObject(job), err)
	}
	r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, gantry.ReasonRanBefore, "Dispatch", "%s", msg)
	return nil
}

// invalidJobRecheck is how often a Job that cannot be queued as it is gets looked at again.
const invalidJobRecheck = time.Minute

// newWorkload builds the job's Workload (NewWorkload) from the hub's cache.
func (r *Reconciler) newWorkload(ctx context.Context, job client.Object) (*gantry.Workload, error) {
	return NewWorkload(ctx, r.Client, r.Kind, job)
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

package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/hub/jobs"
	"github.com/gantry-dev/gantry/hub/remote"
)

// Reasons of Events on hub Jobs.
const (
	EventWithdrawn = "Withdrawn"
	EventFinished  = "Finished"
	EventEvicted   = "Evicted"
)

// Clusters gives access to connected workers.
type Clusters interface {
	Get(name string) (*remote.Cluster, bool)
	Connected() []string
}

// Reconciler syncs one hub Workload with the workers.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Clusters  Clusters
	Recorder  events.EventRecorder
	// Remote receives the hub Workload keys of changed objects on workers.
	Remote chan event.GenericEvent
	Clock  clock.Clock

	mirrored sync.Map // hub Job UID -> mirror, the last status mirror
	expected *expectations
}

// mirror is a status mirror to a hub Job: when, and the resourceVersion of the Job it replaced.
type mirror struct {
	at       time.Time
	replaced string
}

// cacheCatchUp is how long to wait for the cache to show a write of this controller's own.
const cacheCatchUp = 100 * time.Millisecond

// MirrorInterval is the least time between two status mirrors of a running Job: a Job whose pods start
// together would otherwise cost the hub a write per pod. A finished Job is mirrored at once.
const MirrorInterval = time.Second

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	r.expected = newExpectations(r.Clock)
	return ctrl.NewControllerManagedBy(mgr).
		Named("hub-workload").
		For(&gantry.Workload{}).
		WatchesRawSource(source.Channel(r.Remote, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// Reconcile carries out the Workload's recorded dispatch state on the workers.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var wl gantry.Workload
	if err := r.Client.Get(ctx, req.NamespacedName, &wl); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.collectOrphans(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if wl.DeletionTimestamp != nil {
		return ctrl.Result{}, r.finalize(ctx, &wl)
	}
	var err error
	switch {
	case wl.Status.ClusterName == "":
		err = r.syncCopies(ctx, &wl)
	case apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadFinished):
		if job := metav1.GetControllerOf(&wl); job != nil {
			r.mirrored.Delete(job.UID)
		}
		err = r.withdraw(ctx, &wl, wl.Status.ClusterName)
	default:
		if err = r.withdraw(ctx, &wl, wl.Status.ClusterName); err == nil {
			if c, cp := r.givenUp(ctx, &wl); cp != nil {
				err = r.evict(ctx, &wl, c, cp)
			} else {
				err = r.syncWinner(ctx, &wl)
			}
		}
	}
	var later *requeueAfter
	if errors.As(err, &later) {
		return ctrl.Result{RequeueAfter: later.after}, nil
	}
	return ctrl.Result{}, err
}

// requeueAfter asks for the Workload to be looked at again later; it is not a failure.
type requeueAfter struct{ after time.Duration }

func (r *requeueAfter) Error() string { return "requeue after " + r.after.String() }

// syncCopies makes the workers hold exactly the copies of the current nomination.
func (r *Reconciler) syncCopies(ctx context.Context, wl *gantry.Workload) error {
	var errs []error
	var withdrawn []string
	var later time.Duration
	for _, name := range r.Clusters.Connected() {
		c, ok := r.Clusters.Get(name)
		if !ok {
			continue
		}
		nominated := slices.Contains(wl.Status.NominatedClusters, name) && wl.Status.DispatchEpoch > 0
		var cp gantry.Workload
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(wl), &cp)
		switch {
		case apierrors.IsNotFound(err):
			if !nominated {
				continue
			}
			if wait, ok := r.expected.pending(copyKey(name, wl)); ok {
				later = max(later, wait) // created; this cache has not shown it yet
				continue
			}
			if err := r.createCopy(ctx, c, wl); err != nil {
				errs = append(errs, err)
			} else {
				r.expected.expect(copyKey(name, wl))
			}
		case err != nil:
			errs = append(errs, err)
		case cp.Labels[gantry.WorkloadUIDLabel] != string(wl.UID):
			errs = append(errs, deleteExact(ctx, c, &cp)) // left by an earlier Workload of the same name
		case !nominated || epochOf(cp.Labels) != wl.Status.DispatchEpoch:
			// A copy of an earlier epoch is fenced: removed first; its deletion event brings the Workload
			// back here to create the current epoch's copy.
			if err := deleteExact(ctx, c, &cp); err != nil {
				errs = append(errs, err)
			} else {
				withdrawn = append(withdrawn, name)
			}
		default:
			r.expected.observe(copyKey(name, wl))
		}
	}
	if len(withdrawn) > 0 {
		r.jobEvent(ctx, wl, corev1.EventTypeNormal, EventWithdrawn, "Withdrew copies from %s", strings.Join(withdrawn, ", "))
	}
	if err := errors.Join(errs...); err != nil || later == 0 {
		return err
	}
	// Should the copy never show up (deleted before this cache saw it), look again when the
	// expectation lapses.
	return &requeueAfter{later}
}

// copyKey names the creation of the Workload's copy of the current epoch on a cluster.
func copyKey(cluster string, wl *gantry.Workload) string {
	return fmt.Sprintf("copy/%s/%s/%d", cluster, wl.UID, wl.Status.DispatchEpoch)
}

// remoteJobKey names the creation of the Workload's Job on a cluster.
func remoteJobKey(cluster string, wl *gantry.Workload) string {
	return fmt.Sprintf("job/%s/%s", cluster, wl.UID)
}

// finalizedKey names the removal of the Workload's finalizer.
func finalizedKey(wl *gantry.Workload) string {
	return "finalized/" + string(wl.UID)
}

func (r *Reconciler) createCopy(ctx context.Context, c *remote.Cluster, wl *gantry.Workload) error {
	return createInNamespace(ctx, c, NewCopy(wl))
}

// createInNamespace creates obj, creating its namespace on the worker when it is missing.
func createInNamespace(ctx context.Context, c *remote.Cluster, obj client.Object) error {
	err := c.Client.Create(ctx, obj)
	if apierrors.IsNotFound(err) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: obj.GetNamespace()}}
		if nsErr := c.Client.Create(ctx, ns); nsErr != nil && !apierrors.IsAlreadyExists(nsErr) {
			return fmt.Errorf("creating namespace %s on %s: %w", ns.Name, c.Name, nsErr)
		}
		err = c.Client.Create(ctx, obj)
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %T %s on %s: %w", obj, client.ObjectKeyFromObject(obj), c.Name, err)
	}
	return nil
}

// withdraw removes the Workload's copies from every connected cluster but keep, and its Jobs from every
// cluster but keep. An empty keep withdraws everything.
func (r *Reconciler) withdraw(ctx context.Context, wl *gantry.Workload, keep string) error {
	var errs []error
	for _, name := range r.Clusters.Connected() {
		c, ok := r.Clusters.Get(name)
		if !ok || name == keep {
			continue
		}
		if _, err := deleteOwned(ctx, c, wl.Namespace, wl.Name, jobNameOf(wl), string(wl.UID)); err != nil {
			errs = append(errs, err)
		}
	}
	// No Event here: the Admitted Event already names the clusters the copies are withdrawn from.
	return errors.Join(errs...)
}

// deleteOwned deletes the copy and the Job Gantry created for the hub Workload of the given UID (any
// UID when uid is empty) on one cluster. It reports whether it deleted something.
func deleteOwned(ctx context.Context, c *remote.Cluster, namespace, name, jobName, uid string) (bool, error) {
	deleted := false
	var cp gantry.Workload
	err := c.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &cp)
	if err == nil && (uid == "" || cp.Labels[gantry.WorkloadUIDLabel] == uid) {
		if err := deleteExact(ctx, c, &cp); err != nil {
			return false, err
		}
		deleted = true
	} else if client.IgnoreNotFound(err) != nil {
		return false, err
	}
	if jobName == "" {
		return deleted, nil
	}
	var job batchv1.Job
	err = c.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: jobName}, &job)
	if err == nil && (uid == "" || job.Labels[gantry.WorkloadUIDLabel] == uid) {
		// The cache only holds Jobs labelled as Gantry's, so a Job of the same name that Gantry did not
		// create is never seen here, let alone deleted.
		if err := deleteExact(ctx, c, &job); err != nil {
			return false, err
		}
		deleted = true
	} else if client.IgnoreNotFound(err) != nil {
		return false, err
	}
	return deleted, nil
}

// deleteExact deletes exactly the object that was read (UID precondition), with its dependents in the
// background so that a Job's pods go with it.
func deleteExact(ctx context.Context, c *remote.Cluster, obj client.Object) error {
	uid := obj.GetUID()
	err := c.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground),
		client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting %T %s on %s: %w", obj, client.ObjectKeyFromObject(obj), c.Name, err)
	}
	return nil
}

// givenUp returns the winner and its copy of the current epoch if its agent gave the workload up because
// its pods could not all be placed; a nil copy otherwise.
func (r *Reconciler) givenUp(ctx context.Context, wl *gantry.Workload) (*remote.Cluster, *gantry.Workload) {
	c, ok := r.Clusters.Get(wl.Status.ClusterName)
	if !ok {
		return nil, nil
	}
	var cp gantry.Workload
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(wl), &cp); err != nil {
		return nil, nil
	}
	if cp.Labels[gantry.WorkloadUIDLabel] != string(wl.UID) || epochOf(cp.Labels) != wl.Status.DispatchEpoch {
		return nil, nil
	}
	cond := apimeta.FindStatusCondition(cp.Status.Conditions, gantry.WorkloadAdmitted)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != gantry.ReasonPlacementTimeout {
		return nil, nil
	}
	return c, &cp
}

// evict takes the workload back from a winner that gave it up: it deletes the Job there and waits until
// the Job and its pods are gone, clears the hub Job's mirrored status, then records the eviction and
// clears the winner in one status update, after which the dispatcher dispatches it in a new epoch. The
// Job never runs in two places: the winner is cleared only once its Job there is gone.
func (r *Reconciler) evict(ctx context.Context, wl *gantry.Workload, c *remote.Cluster, cp *gantry.Workload) error {
	jobName := jobNameOf(wl)
	var remoteJob batchv1.Job
	err := c.Reader.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: jobName}, &remoteJob)
	switch {
	case err == nil && remoteJob.Labels[gantry.WorkloadUIDLabel] == string(wl.UID):
		if remoteJob.DeletionTimestamp == nil {
			// Foreground: the Job stays until its pods are gone, so "gone" means nothing runs there.
			uid := remoteJob.UID
			if err := c.Client.Delete(ctx, &remoteJob, client.PropagationPolicy(metav1.DeletePropagationForeground),
				client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting job %s on %s to dispatch it again: %w", jobName, c.Name, err)
			}
		}
		return &requeueAfter{time.Second} // its deletion event usually comes first
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}

	var hubJob batchv1.Job
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: jobName}, &hubJob); err == nil {
		if !equality.Semantic.DeepEqual(hubJob.Status, batchv1.JobStatus{}) {
			hubJob.Status = batchv1.JobStatus{}
			if err := r.Client.Status().Update(ctx, &hubJob); err != nil {
				return fmt.Errorf("clearing the status of job %s mirrored from %s: %w", jobName, c.Name, err)
			}
		}
		r.mirrored.Delete(hubJob.UID)
	} else if !apierrors.IsNotFound(err) {
		return err
	}

	cond := apimeta.FindStatusCondition(cp.Status.Conditions, gantry.WorkloadAdmitted)
	st := &wl.Status
	st.Evictions = append(st.Evictions, gantry.Eviction{Cluster: st.ClusterName, Epoch: st.DispatchEpoch,
		Reason: cond.Reason, Message: cond.Message, Time: metav1.NewTime(r.Clock.Now())})
	if n := len(st.Evictions); n > gantry.MaxEvictions {
		st.Evictions = st.Evictions[n-gantry.MaxEvictions:]
	}
	msg := fmt.Sprintf("%s gave it up (%s: %s); dispatching it again", st.ClusterName, cond.Reason, cond.Message)
	from := st.ClusterName
	st.ClusterName, st.Admission, st.NominatedClusters = "", nil, nil
	for _, t := range []string{gantry.WorkloadAdmitted, gantry.WorkloadDispatched} {
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionFalse,
			Reason: gantry.ReasonEvicted, Message: msg, ObservedGeneration: wl.Generation})
	}
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: gantry.WorkloadPending, Status: metav1.ConditionTrue,
		Reason: gantry.ReasonEvicted, Message: msg, ObservedGeneration: wl.Generation})
	if err := r.Client.Status().Update(ctx, wl); err != nil {
		return fmt.Errorf("recording the eviction of workload %s from %s: %w", client.ObjectKeyFromObject(wl), from, err)
	}
	r.jobEvent(ctx, wl, corev1.EventTypeWarning, EventEvicted, "Pods not placed on %s (%s); dispatching again", from, cond.Message)
	return nil
}

// syncWinner creates the Job on the winner and mirrors its status to the hub Job.
func (r *Reconciler) syncWinner(ctx context.Context, wl *gantry.Workload) error {
	c, ok := r.Clusters.Get(wl.Status.ClusterName)
	if !ok {
		return nil // reconnecting requeues the cluster's objects
	}
	var hubJob batchv1.Job
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: jobNameOf(wl)}, &hubJob); err != nil {
		return client.IgnoreNotFound(err) // the Workload goes with its Job
	}
	var remoteJob batchv1.Job
	err := c.Client.Get(ctx, client.ObjectKeyFromObject(&hubJob), &remoteJob)
	if apierrors.IsNotFound(err) {
		if wait, ok := r.expected.pending(remoteJobKey(c.Name, wl)); ok {
			return &requeueAfter{wait} // created; this cache has not shown it yet
		}
		if hubJob.Status.StartTime != nil {
			// The Job ran there and is gone without a final status. Running it again could run it twice.
			return r.finish(ctx, wl, &hubJob, gantry.ReasonRemoteJobLost,
				fmt.Sprintf("the Job disappeared from %s before it finished; it is not run again", c.Name))
		}
		return r.createRemoteJob(ctx, c, wl, &hubJob)
	}
	if err != nil {
		return err
	}
	r.expected.observe(remoteJobKey(c.Name, wl))
	if remoteJob.Labels[gantry.WorkloadUIDLabel] != string(wl.UID) {
		return nil // an older Workload's Job; orphan collection removes it, then the Job is created
	}
	t, done := jobFinished(&remoteJob)
	last, mirroredBefore := r.mirrored.Load(hubJob.UID)
	switch {
	case equality.Semantic.DeepEqual(hubJob.Status, remoteJob.Status):
	case mirroredBefore && hubJob.ResourceVersion == last.(mirror).replaced:
		// The cache still shows the hub Job as it was before the last mirror: writing now would only
		// conflict, and finishing now could finish before the final status is mirrored. Hub Jobs are
		// not watched here, so look again shortly.
		return &requeueAfter{cacheCatchUp}
	default:
		if mirroredBefore && !done {
			if wait := MirrorInterval - r.Clock.Since(last.(mirror).at); wait > 0 {
				return &requeueAfter{wait}
			}
		}
		replaced := hubJob.ResourceVersion
		hubJob.Status = *remoteJob.Status.DeepCopy()
		if err := r.Client.Status().Update(ctx, &hubJob); err != nil {
			return fmt.Errorf("mirroring status of job %s from %s: %w", client.ObjectKeyFromObject(&hubJob), c.Name, err)
		}
		r.mirrored.Store(hubJob.UID, mirror{at: r.Clock.Now(), replaced: replaced})
	}
	if done {
		reason := gantry.ReasonJobSucceeded
		if t == batchv1.JobFailed {
			reason = gantry.ReasonJobFailed
		}
		return r.finish(ctx, wl, &hubJob, reason, fmt.Sprintf("the Job %s on %s", strings.ToLower(string(t)), c.Name))
	}
	return nil
}

func (r *Reconciler) createRemoteJob(ctx context.Context, c *remote.Cluster, wl *gantry.Workload, hubJob *batchv1.Job) error {
	job := NewRemoteJob(hubJob, wl)
	err := c.Client.Create(ctx, job)
	if apierrors.IsNotFound(err) { // namespace missing: the copy normally created it
		err = createInNamespace(ctx, c, job)
	}
	if apierrors.IsAlreadyExists(err) {
		var existing batchv1.Job
		if getErr := c.Reader.Get(ctx, client.ObjectKeyFromObject(job), &existing); getErr != nil {
			return getErr
		}
		if existing.Labels[gantry.WorkloadUIDLabel] == string(wl.UID) {
			r.expected.expect(remoteJobKey(c.Name, wl))
			return nil
		}
		// Never adopt or delete a Job Gantry did not create.
		return r.finish(ctx, wl, hubJob, gantry.ReasonRemoteJobConflict,
			fmt.Sprintf("a Job named %s that Gantry did not create already exists on %s", job.Name, c.Name))
	}
	if err != nil {
		return fmt.Errorf("creating job %s on %s: %w", client.ObjectKeyFromObject(job), c.Name, err)
	}
	r.expected.expect(remoteJobKey(c.Name, wl))
	return nil
}

// finish records that the Workload ended, which releases its quota.
func (r *Reconciler) finish(ctx context.Context, wl *gantry.Workload, hubJob *batchv1.Job, reason, message string) error {
	status := metav1.ConditionTrue
	changed := apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: gantry.WorkloadFinished, Status: status, Reason: reason, Message: message, ObservedGeneration: wl.Generation,
	})
	apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
		Type: gantry.WorkloadPending, Status: metav1.ConditionFalse, Reason: reason, Message: message, ObservedGeneration: wl.Generation,
	})
	if !changed {
		return nil
	}
	if err := r.Client.Status().Update(ctx, wl); err != nil {
		return fmt.Errorf("recording that workload %s finished: %w", client.ObjectKeyFromObject(wl), err)
	}
	// A Job that succeeded or failed shows it in its mirrored status; only what the status cannot say gets
	// an Event.
	if reason != gantry.ReasonJobSucceeded && reason != gantry.ReasonJobFailed {
		r.Recorder.Eventf(hubJob, nil, corev1.EventTypeWarning, EventFinished, "Run", "%s", message)
	}
	return nil
}

// finalize withdraws everything from the workers, then lets the Workload go. A cluster that is not
// connected does not hold the Workload back: orphan collection cleans it when it reconnects.
func (r *Reconciler) finalize(ctx context.Context, wl *gantry.Workload) error {
	if job := metav1.GetControllerOf(wl); job != nil {
		r.mirrored.Delete(job.UID)
	}
	if !controllerutil.ContainsFinalizer(wl, gantry.WorkloadFinalizer) {
		return nil
	}
	if _, ok := r.expected.pending(finalizedKey(wl)); ok {
		return nil // already let go; the cache still shows the finalizer
	}
	if err := r.withdraw(ctx, wl, ""); err != nil {
		return err
	}
	patch := client.MergeFrom(wl.DeepCopy())
	controllerutil.RemoveFinalizer(wl, gantry.WorkloadFinalizer)
	if err := r.Client.Patch(ctx, wl, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.expected.expect(finalizedKey(wl))
	return nil
}

// collectOrphans removes objects left on workers for a hub Workload that no longer exists.
func (r *Reconciler) collectOrphans(ctx context.Context, key types.NamespacedName) error {
	// The cache may lag behind a Workload that was just created: ask the API server before deleting.
	var live gantry.Workload
	err := r.APIReader.Get(ctx, key, &live)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	var errs []error
	for _, name := range r.Clusters.Connected() {
		c, ok := r.Clusters.Get(name)
		if !ok {
			continue
		}
		gone, err := deleteOwned(ctx, c, key.Namespace, key.Name, jobs.JobName(key.Name), "")
		if err != nil {
			errs = append(errs, err)
		} else if gone {
			ctrllog.FromContext(ctx).Info("Collected orphaned objects", "cluster", name, "workload", key)
		}
	}
	return errors.Join(errs...)
}

// jobEvent records an Event on the Workload's hub Job.
func (r *Reconciler) jobEvent(ctx context.Context, wl *gantry.Workload, eventType, reason, format string, args ...any) {
	var job batchv1.Job
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: jobNameOf(wl)}, &job); err != nil {
		return
	}
	r.Recorder.Eventf(&job, nil, eventType, reason, "Dispatch", format, args...)
}

// jobNameOf returns the name of the Job that owns the Workload.
func jobNameOf(wl *gantry.Workload) string {
	if ref := metav1.GetControllerOf(wl); ref != nil && ref.Kind == "Job" {
		return ref.Name
	}
	return ""
}

// KeyForWorkerObject returns the hub Workload key of a Gantry object on a worker.
func KeyForWorkerObject(obj client.Object) types.NamespacedName {
	name := obj.GetName()
	if _, isJob := obj.(*batchv1.Job); isJob {
		name = jobs.WorkloadName(name)
	}
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}
}

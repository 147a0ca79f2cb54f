// Package workload carries out, for each hub Workload, what dispatch/workersync decides: it gathers a
// view of the Workload from the hub's cache, the workers' caches and its memory of its own writes, and
// applies the plan. It makes no decision of its own.
package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch/workersync"
	"github.com/gantry-dev/gantry/hub/jobs"
	"github.com/gantry-dev/gantry/hub/metrics"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/internal/expectations"
	"github.com/gantry-dev/gantry/jobkind"
)

// Workers gives access to connected workers.
type Workers interface {
	// Worker returns the connected worker of that name; false when it is not connected.
	Worker(name string) (remote.Worker, bool)
	// Connected lists the connected workers.
	Connected() []string
}

// Leases tells how the hub's lease on each worker stands (remote.LeaseRenewer).
type Leases interface {
	// FenceDue is when the jobs of a cluster the hub does not reach may go elsewhere under Fence.
	FenceDue(cluster string, timeout time.Duration) time.Time
	// Renewed tells whether the lease was renewed on the cluster's current connection.
	Renewed(cluster string) bool
}

// Reconciler syncs one hub Workload with the workers.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	// Templates are the pod templates the hub's cache kept of the newest jobs; the winner's Job is
	// built from one when it is there, else from the job read through APIReader.
	Templates *jobs.Templates
	Workers   Workers
	Leases    Leases
	Recorder  events.EventRecorder
	// Remote receives the hub Workload keys of changed objects on workers.
	Remote chan event.GenericEvent
	Clock  clock.Clock
	// Timeline tells when the dispatcher persisted each winner, for the latency of the Job's creation;
	// nil measures from creation only.
	Timeline *metrics.Timeline

	// mirrored is the last status mirror to each hub Job, by UID: when, and the version it replaced.
	mirrored *expectations.Written[types.UID, time.Time]
	// statuses is each Workload as this controller's last status write left it, until the cache shows
	// the write: a reconcile in between would decide again on the version it replaced and be refused.
	statuses *expectations.Written[types.NamespacedName, *gantry.Workload]
	foreign  sync.Map // "cluster/namespace/name" -> true: a live read found a Job Gantry did not create
	refusals sync.Map // "workload UID/cluster" -> refusal: the cluster did not take the job of an epoch
	// podChecks are the pods the workers admitted in a dry run lately (podsRefused).
	podChecks podChecks
	// deletions sends the deletions on workers, those that come together in one request.
	deletions deletions
	expected  *expectations.Created
}

// namedClusterIndex indexes the hub's Workloads by the clusters they name (namedClusters), so that what a
// cluster's change concerns is found without going over every Workload (and, when the hub starts over
// a deep queue, once for each cluster that connects).
const namedClusterIndex = "gantry.dev/named-cluster"

// IndexByNamedCluster adds the index RequestsForCluster reads to the hub's cache.
func IndexByNamedCluster(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &gantry.Workload{}, namedClusterIndex, namedClusters)
}

// namedClusters are the Workload's winner and the clusters of its nomination.
func namedClusters(obj client.Object) []string {
	wl, ok := obj.(*gantry.Workload)
	if !ok {
		return nil
	}
	out := slices.Clone(wl.Status.NominatedClusters)
	if c := wl.Status.ClusterName; c != "" && !slices.Contains(out, c) {
		out = append(out, c)
	}
	return out
}

// RequestsForCluster lists the Workloads whose winner or nomination is the cluster, from the cache's
// index (IndexByNamedCluster).
func RequestsForCluster(ctx context.Context, c client.Reader, cluster string) []ctrl.Request {
	var list gantry.WorkloadList
	if err := c.List(ctx, &list, client.MatchingFields{namedClusterIndex: cluster}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the Workloads that name a cluster", "cluster", cluster)
		return nil
	}
	out := make([]ctrl.Request, len(list.Items))
	for i := range list.Items {
		out[i] = ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return out
}

// connectedChanged passes WorkerCluster updates that change the Connected condition, and deletions.
var connectedChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		was, is := e.ObjectOld.(*gantry.WorkerCluster), e.ObjectNew.(*gantry.WorkerCluster)
		a := apimeta.FindStatusCondition(was.Status.Conditions, gantry.ClusterConnected)
		b := apimeta.FindStatusCondition(is.Status.Conditions, gantry.ClusterConnected)
		return (a == nil) != (b == nil) || (a != nil && (a.Status != b.Status || a.Reason != b.Reason || !a.LastTransitionTime.Equal(&b.LastTransitionTime)))
	},
}

// concernsWorkers says whether the Workload, as it is, may need anything done on the workers or for its
// hub job: a Workload that waits with no cluster named, is not being deleted, has not finished, has no
// admission deadline to keep and is in no drained queue may have only strays of earlier epochs or
// Workloads on workers, whose own events bring it here. The dispatcher rewrites such Workloads' waiting
// verdicts, and a hub that starts lists every one of a deep queue: neither asks for a reconcile.
func (r *Reconciler) concernsWorkers(obj client.Object) bool {
	wl, ok := obj.(*gantry.Workload)
	if !ok {
		return true
	}
	if wl.DeletionTimestamp != nil || wl.Status.ClusterName != "" || len(wl.Status.NominatedClusters) > 0 ||
		apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadFinished) {
		return true
	}
	t := r.queueTerms(context.Background(), wl)
	return t.deadline > 0 || t.drainedBy != ""
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	r.init()
	if err := IndexByNamedCluster(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexing Workloads by the clusters they name: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("hub-workload").
		For(&gantry.Workload{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { return r.concernsWorkers(e.Object) },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return r.concernsWorkers(e.ObjectOld) || r.concernsWorkers(e.ObjectNew)
			},
		})).
		WatchesRawSource(source.Channel(r.Remote, &handler.EnqueueRequestForObject{})).
		// What a Workload says of an unreachable cluster (since when, why) comes from its WorkerCluster,
		// whose status is written after the connection went.
		Watches(&gantry.WorkerCluster{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, wc client.Object) []ctrl.Request {
			return RequestsForCluster(ctx, r.Client, wc.GetName())
		}), builder.WithPredicates(connectedChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

func (r *Reconciler) init() {
	if r.expected == nil {
		r.expected = expectations.NewCreated(r.Clock)
		r.mirrored = expectations.NewWritten[types.UID, time.Time]()
		r.statuses = expectations.NewWritten[types.NamespacedName, *gantry.Workload]()
	}
}

// rounds bounds how often one Reconcile decides again after its own creates: a Job created on the
// winner is recorded (JobCreated) in the round after it, before anything else can happen to it.
const rounds = 3

// Reconcile carries out the Workload's recorded dispatch state on the workers.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.init()
	var wl gantry.Workload
	if err := r.Client.Get(ctx, req.NamespacedName, &wl); err != nil {
		if apierrors.IsNotFound(err) {
			r.statuses.Forget(req.NamespacedName)
			return ctrl.Result{}, r.collectOrphans(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if written, behind := r.statuses.Behind(req.NamespacedName, wl.ResourceVersion); behind {
		wl = *written.DeepCopy()
	} else {
		r.statuses.Forget(req.NamespacedName)
	}
	for range rounds {
		v, err := r.view(ctx, &wl)
		if err != nil {
			return ctrl.Result{}, err
		}
		plan := workersync.Decide(v)
		again, err := r.execute(ctx, &wl, v.HubJob, plan)
		var there *stillThere
		if errors.As(err, &there) {
			return ctrl.Result{RequeueAfter: workersync.DeletionPoll}, nil
		}
		if err != nil || !again {
			return ctrl.Result{RequeueAfter: plan.RequeueAfter}, err
		}
	}
	return ctrl.Result{RequeueAfter: workersync.CacheCatchUp}, nil
}

// view gathers what Decide needs from the caches and from the memory of this controller's writes.
func (r *Reconciler) view(ctx context.Context, wl *gantry.Workload) (workersync.View, error) {
	v := workersync.View{Now: r.Clock.Now(), Workload: wl, Clusters: map[string]workersync.Cluster{},
		FinalizerRemoved: r.expected.IsPending(finalizedKey(wl))}
	if wl.Status.Winner() == "" && !apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadFinished) {
		// Only a Workload still waiting has a deadline to keep, or is drained.
		t := r.queueTerms(ctx, wl)
		v.AdmissionDeadline, v.DrainedBy = t.deadline, t.drainedBy
	}
	if name := workersync.JobNameOf(wl); name != "" {
		hubJob := jobkind.Of(wl).New()
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: name}, hubJob)
		switch {
		case err == nil && workersync.HubJobOf(wl, hubJob) == nil:
			// Another job under its name, resubmitted while this Workload lets go: not its job.
		case err == nil:
			if v.HubJob, err = r.jobToCreate(ctx, wl, hubJob); err != nil {
				return v, err
			}
			if at, replaced, ok := r.mirrored.Get(hubJob.GetUID()); ok {
				v.LastMirror = &workersync.Mirror{At: at, Replaced: replaced}
			}
		case !apierrors.IsNotFound(err):
			return v, err
		}
	}
	for _, name := range r.clustersToView(wl) {
		if _, done := v.Clusters[name]; done {
			continue
		}
		reg, err := r.registration(ctx, name)
		if err != nil {
			return v, err
		}
		c, err := r.clusterView(ctx, name, wl, reg)
		if err != nil {
			return v, err
		}
		v.Clusters[name] = c
	}
	return v, nil
}

// clustersToView are the clusters the Workload names (its nomination and winner) and the connected ones
// whose caches hold a copy or a job under its names: a leftover of an earlier epoch or of an earlier
// Workload of the same name. Asking every connected cluster's cache would cost each reconcile in
// proportion to the fleet, most of it for nothing.
func (r *Reconciler) clustersToView(wl *gantry.Workload) []string {
	names := slices.Clone(wl.Status.NominatedClusters)
	if wl.Status.ClusterName != "" {
		names = append(names, wl.Status.ClusterName)
	}
	key := client.ObjectKeyFromObject(wl)
	kind, jobName := jobkind.Of(wl).Name(), workersync.JobNameOf(wl)
	for _, name := range r.Workers.Connected() {
		if slices.Contains(names, name) {
			continue
		}
		w, ok := r.Workers.Worker(name)
		if ok && (w.HoldsCopy(key) || jobName != "" && w.HoldsJob(kind, types.NamespacedName{Namespace: wl.Namespace, Name: jobName})) {
			names = append(names, name)
		}
	}
	return names
}

// jobToCreate is the hub job as the view needs it: whole, pod template and all, while its Job may be
// created on the winner (a winner and no Job recorded yet), else as the cache has it (jobs.TrimJob).
func (r *Reconciler) jobToCreate(ctx context.Context, wl *gantry.Workload, hubJob client.Object) (client.Object, error) {
	if wl.Status.Winner() == "" || apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadJobCreated) {
		return hubJob, nil
	}
	whole, err := r.Templates.Whole(ctx, r.APIReader, hubJob)
	if apierrors.IsNotFound(err) {
		return nil, nil // gone since the cache showed it
	}
	return whole, err
}

// clusterView reads the Workload's objects on one cluster from its cache.
func (r *Reconciler) clusterView(ctx context.Context, name string, wl *gantry.Workload, wc *gantry.WorkerCluster) (workersync.Cluster, error) {
	c := workersync.Cluster{Name: name}
	if wc != nil {
		r.readRegistration(wc, &c)
		c.KueueLocalQueue = wc.Spec.Kueue.LocalQueueFor(wl.Namespace)
	}
	w, ok := r.Workers.Worker(name)
	if !ok {
		return c, nil
	}
	c.DisconnectedSince, c.DisconnectedReason = time.Time{}, ""
	c.Connected = true
	var cp gantry.Workload
	switch err := w.Cached().Get(ctx, client.ObjectKeyFromObject(wl), &cp); {
	case err == nil:
		c.Copy = &cp
		r.showDeletion(&cp)
		if cp.Labels[gantry.WorkloadUIDLabel] == string(wl.UID) && cp.Labels[gantry.DispatchEpochLabel] == fmt.Sprint(wl.Status.DispatchEpoch) {
			r.expected.Observe(copyKey(name, wl))
		}
	case !apierrors.IsNotFound(err):
		return c, fmt.Errorf("reading the copy of %s on %s: %w", client.ObjectKeyFromObject(wl), name, err)
	}
	c.CopyExpected = r.expected.Deadline(copyKey(name, wl))
	jobName := workersync.JobNameOf(wl)
	if jobName == "" || !w.Serves(jobkind.Of(wl).Name()) {
		return c, nil // no such job can be there
	}
	job := jobkind.Of(wl).New()
	switch err := w.Cached().Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: jobName}, job); {
	case err == nil:
		c.Job = job
		r.showDeletion(job)
		if job.GetLabels()[gantry.WorkloadUIDLabel] == string(wl.UID) {
			r.expected.Observe(remoteJobKey(name, wl))
			r.foreign.Delete(name + "/" + wl.Namespace + "/" + jobName) // the foreign one went, ours came
		}
	case !apierrors.IsNotFound(err):
		return c, fmt.Errorf("reading %s %s/%s on %s: %w", jobkind.Of(wl).Name(), wl.Namespace, jobName, name, err)
	}
	c.JobExpected = r.expected.Deadline(remoteJobKey(name, wl))
	_, c.ForeignJob = r.foreign.Load(name + "/" + wl.Namespace + "/" + jobName)
	r.readCopyRefusal(&c, wl)
	r.readRefusal(&c, wl)
	return c, nil
}

// queueTerms are what the GlobalQueue its Queue points at now asks of a waiting Workload.
type queueTerms struct {
	// deadline is how long it may wait for a winner: its job's own, else its GlobalQueue's; 0 for none.
	deadline time.Duration
	// drainedBy names its GlobalQueue when that is held and drained (spec.drainWhileHeld).
	drainedBy string
}

// queueTerms reads the Workload's terms; none while its queue cannot be read (the dispatcher says why
// such a Workload waits).
func (r *Reconciler) queueTerms(ctx context.Context, wl *gantry.Workload) queueTerms {
	var t queueTerms
	if d := wl.Spec.AdmissionDeadline; d != nil {
		t.deadline = d.Duration
	}
	// Read in place, not copied: a few fields of each are all this needs.
	var q gantry.Queue
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: wl.Spec.QueueName}, &q, client.UnsafeDisableDeepCopy); err != nil {
		return t
	}
	var gq gantry.GlobalQueue
	if err := r.Client.Get(ctx, types.NamespacedName{Name: q.Spec.GlobalQueue}, &gq, client.UnsafeDisableDeepCopy); err != nil {
		return t
	}
	if t.deadline == 0 && gq.Spec.AdmissionDeadline != nil {
		t.deadline = gq.Spec.AdmissionDeadline.Duration
	}
	if gq.Spec.Held && gq.Spec.DrainWhileHeld {
		t.drainedBy = gq.Name
	}
	return t
}

// readRegistration fills in what the WorkerCluster says: whether the operator fenced it, and since when
// and why it is not Connected. A WorkerCluster that is not registered is neither.
func (r *Reconciler) readRegistration(wc *gantry.WorkerCluster, c *workersync.Cluster) {
	c.Fenced = wc.Spec.Fenced
	if wc.Spec.Failover.Policy == gantry.FailoverFence && r.Leases != nil {
		c.FenceDue = r.Leases.FenceDue(c.Name, wc.Spec.Failover.TimeoutOrDefault())
		c.LeaseRenewed = r.Leases.Renewed(c.Name)
	}
	if cond := apimeta.FindStatusCondition(wc.Status.Conditions, gantry.ClusterConnected); cond != nil && cond.Status != metav1.ConditionTrue {
		c.DisconnectedSince, c.DisconnectedReason = cond.LastTransitionTime.Time, cond.Reason
	}
}

// registration is the cluster's WorkerCluster, read from the cache without a copy (read only: a copy
// would carry its whole capacity summary); nil when it is not registered.
func (r *Reconciler) registration(ctx context.Context, name string) (*gantry.WorkerCluster, error) {
	var wc gantry.WorkerCluster
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: name}, &wc, client.UnsafeDisableDeepCopy); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading WorkerCluster %s: %w", name, err)
	}
	return &wc, nil
}

// execute applies a plan and says whether it created something on a worker, after which the caller
// decides again.
func (r *Reconciler) execute(ctx context.Context, wl *gantry.Workload, hubJob client.Object, plan workersync.Plan) (bool, error) {
	created, err := r.applyWorkers(ctx, wl, plan.Worker)
	if hubErr := r.applyHub(ctx, wl, hubJob, plan); hubErr != nil {
		err = errors.Join(err, hubErr)
	}
	return created, err
}

// applyWorkers carries out the worker writes, each cluster's in the plan's order, stopping at the first
// that fails, and the clusters at the same time: no write to one cluster waits on another's (the copies of a new epoch go out together,
// and the winner's Job does not wait for the losers' withdrawals). It says whether one created an object.
func (r *Reconciler) applyWorkers(ctx context.Context, wl *gantry.Workload, actions []workersync.WorkerAction) (bool, error) {
	var byCluster [][]workersync.WorkerAction
	for _, a := range actions {
		i := slices.IndexFunc(byCluster, func(g []workersync.WorkerAction) bool { return g[0].Cluster == a.Cluster })
		if i < 0 {
			byCluster = append(byCluster, nil)
			i = len(byCluster) - 1
		}
		byCluster[i] = append(byCluster[i], a)
	}
	created := make([]bool, len(byCluster))
	errs := make([]error, len(byCluster))
	apply := func(i int) {
		for _, a := range byCluster[i] {
			ok, err := r.applyWorker(ctx, wl, a)
			created[i] = created[i] || ok
			if err != nil {
				errs[i] = err // the later writes may depend on it (a suspension before a deletion)
				return
			}
		}
	}
	var wg sync.WaitGroup
	for i := 1; i < len(byCluster); i++ {
		wg.Go(func() { apply(i) })
	}
	if len(byCluster) > 0 {
		apply(0)
	}
	wg.Wait()
	return slices.Contains(created, true), errors.Join(errs...)
}

// applyWorker carries out one write to a worker and says whether it created the object.
func (r *Reconciler) applyWorker(ctx context.Context, wl *gantry.Workload, a workersync.WorkerAction) (bool, error) {
	w, ok := r.Workers.Worker(a.Cluster)
	if !ok {
		return false, nil // reconnecting requeues the Workload
	}
	switch a.Op {
	case workersync.CreateCopy:
		key := copyRefusalKey(wl, a.Cluster)
		if err := createInNamespace(ctx, w, a.Cluster, a.Object); err != nil && !apierrors.IsAlreadyExists(err) {
			// Said on the hub Job and asked again at the decision's pace, not the controller's backoff.
			r.refuseCopy(key, wl, apiMessage(err))
			return true, nil
		}
		r.refusals.Delete(key)
		r.expected.Expect(copyKey(a.Cluster, wl))
		return true, nil
	case workersync.CreateJob:
		return r.createJob(ctx, w, wl, a)
	case workersync.Resume:
		return false, resume(ctx, w, a.Cluster, a.Object)
	case workersync.Suspend:
		return false, suspend(ctx, w, a.Cluster, a.Object)
	default:
		deleted, err := r.deletions.delete(ctx, w, a.Cluster, a.Object, a.Op == workersync.DeleteForeground)
		if deleted {
			r.expected.Expect(deletedKey(a.Object))
		}
		if cp, isCopy := a.Object.(*gantry.Workload); isCopy && deleted {
			metrics.Withdrawn(a.Cluster, withdrawalReason(wl, a.Cluster, cp))
		}
		return false, err
	}
}

// createJob creates the Job on the winner, once a dry run of its pods there passed (podsRefused); pods
// refused are the job refused. A Job of that name that exists already is read live: when
// Gantry created it for this Workload the create counts as done; otherwise it is remembered as foreign,
// which the next decision turns into RemoteJobConflict. A Job Gantry did not create is never adopted.
func (r *Reconciler) createJob(ctx context.Context, w remote.Worker, wl *gantry.Workload, a workersync.WorkerAction) (bool, error) {
	key := string(wl.UID) + "/" + a.Cluster
	if msg, final := r.podsRefused(ctx, w, wl, a); msg != "" {
		r.refusals.Store(key, refusal{epoch: wl.Status.DispatchEpoch, message: msg, final: final, at: r.Clock.Now()})
		return true, nil
	}
	err := createInNamespace(ctx, w, a.Cluster, a.Object)
	if apierrors.IsAlreadyExists(err) {
		existing := jobkind.Of(wl).New()
		if getErr := w.Live().Get(ctx, client.ObjectKeyFromObject(a.Object), existing); getErr != nil {
			return false, getErr
		}
		if existing.GetLabels()[gantry.WorkloadUIDLabel] != string(wl.UID) {
			r.foreign.Store(a.Cluster+"/"+existing.GetNamespace()+"/"+existing.GetName(), true)
			return true, nil
		}
		err = nil
	}
	if err != nil {
		// Not created. Refused for good, the next decision takes it back; else it says why, and when to
		// ask again. Either way it decides again now.
		r.refusals.Store(key, refusal{epoch: wl.Status.DispatchEpoch, message: apiMessage(err), final: refusedByWorker(err), at: r.Clock.Now()})
		return true, nil
	}
	r.refusals.Delete(key)
	r.expected.Expect(remoteJobKey(a.Cluster, wl))
	return true, nil
}

// refusedByWorker tells a worker's final answer to a create from a passing failure: the object is
// invalid there (a schema, CEL rule or admission policy refused it: 422 or 400), or an admission webhook
// or policy denied it, which a webhook may do with 403 (controller-runtime's webhooks do). A 403 of RBAC
// or of an exhausted ResourceQuota is not a refusal of the job: rights and quota may come back.
func refusedByWorker(err error) bool {
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return true
	}
	if !apierrors.IsForbidden(err) {
		return false
	}
	return deniedByPolicy(apiMessage(err))
}

// deniedByPolicy says whether an API server's message is an admission webhook's or policy's denial.
func deniedByPolicy(msg string) bool {
	return strings.HasPrefix(msg, "admission webhook ") && strings.Contains(msg, " denied the request") ||
		strings.HasPrefix(msg, "ValidatingAdmissionPolicy ") && strings.Contains(msg, " denied request")
}

// refusal is a worker's API server's answer to the last create of the job of one dispatch epoch that
// failed: final when it would be refused again (refusedByWorker), else a failure that may pass.
type refusal struct {
	epoch   int64
	message string
	final   bool
	at      time.Time
	// untold: a copy's refusal no decision has heard of yet.
	untold bool
}

// copyRefusalKey keys the refusal of the Workload's copy on the cluster, beside its job's.
func copyRefusalKey(wl *gantry.Workload, cluster string) string {
	return string(wl.UID) + "/" + cluster + "/copy"
}

// refuseCopy remembers that the cluster did not take the copy of the Workload's current epoch; untold
// until a decision heard of a refusal of that epoch.
func (r *Reconciler) refuseCopy(key string, wl *gantry.Workload, message string) {
	untold := true
	if v, ok := r.refusals.Load(key); ok && v.(refusal).epoch == wl.Status.DispatchEpoch {
		untold = v.(refusal).untold
	}
	r.refusals.Store(key, refusal{epoch: wl.Status.DispatchEpoch, message: message, at: r.Clock.Now(), untold: untold})
}

// readCopyRefusal fills in why the cluster did not take the copy of the Workload's current epoch; the
// decision that reads it first is told it is new.
func (r *Reconciler) readCopyRefusal(c *workersync.Cluster, wl *gantry.Workload) {
	key := copyRefusalKey(wl, c.Name)
	v, ok := r.refusals.Load(key)
	if !ok {
		return
	}
	ref := v.(refusal)
	if ref.epoch != wl.Status.DispatchEpoch {
		r.refusals.Delete(key)
		return
	}
	c.CopyRefused, c.CopyRefusedAt, c.CopyRefusedNew = ref.message, ref.at, ref.untold
	if ref.untold {
		ref.untold = false
		r.refusals.Store(key, ref)
	}
}

// readRefusal fills in why the cluster did not take the job of the Workload's current epoch, for good
// or for now; a refusal of an earlier epoch is forgotten.
func (r *Reconciler) readRefusal(c *workersync.Cluster, wl *gantry.Workload) {
	key := string(wl.UID) + "/" + c.Name
	v, ok := r.refusals.Load(key)
	if !ok {
		return
	}
	ref := v.(refusal)
	switch {
	case ref.epoch != wl.Status.DispatchEpoch:
		r.refusals.Delete(key)
	case ref.final:
		c.JobRefused = ref.message
	default:
		c.JobCreateFailing, c.JobCreateFailedAt = ref.message, ref.at
	}
}

// apiMessage is the API server's own message of a refusal, without the client's wrapping.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

// applyHub writes the plan's hub side in order, each step only after the one before succeeded.
func (r *Reconciler) applyHub(ctx context.Context, wl *gantry.Workload, hubJob client.Object, plan workersync.Plan) error {
	if plan.ConfirmGone != "" && (plan.Status != nil || plan.RemoveFinalizer) {
		if err := r.confirmGone(ctx, plan.ConfirmGone, wl); err != nil {
			return err
		}
	}
	if plan.HubJobStatus != nil && hubJob != nil {
		replaced := hubJob.GetResourceVersion()
		if err := r.Client.Status().Update(ctx, plan.HubJobStatus); err != nil {
			return fmt.Errorf("writing the status of %s %s: %w", jobkind.Of(wl).Name(), client.ObjectKeyFromObject(hubJob), err)
		}
		r.mirrored.Record(hubJob.GetUID(), replaced, r.Clock.Now())
	}
	if plan.Status != nil {
		before, replaced := wl.Status, wl.ResourceVersion
		wl.Status = *plan.Status
		if err := r.Client.Status().Update(ctx, wl); err != nil {
			return fmt.Errorf("writing the status of workload %s: %w", client.ObjectKeyFromObject(wl), err)
		}
		r.statuses.Record(client.ObjectKeyFromObject(wl), replaced, wl.DeepCopy())
		r.recordStatus(wl, &before)
	}
	if plan.RemoveFinalizer {
		if err := r.removeFinalizer(ctx, wl, hubJob); err != nil {
			return err
		}
	}
	for _, e := range plan.Events {
		if hubJob != nil {
			r.Recorder.Eventf(hubJob, nil, e.Type, e.Reason, "Dispatch", "%s", e.Message)
		}
	}
	return nil
}

// confirmGone reads the worker's API server: the Workload's Job there must be gone.
func (r *Reconciler) confirmGone(ctx context.Context, cluster string, wl *gantry.Workload) error {
	w, ok := r.Workers.Worker(cluster)
	if !ok {
		return fmt.Errorf("cannot confirm that the job of %s is gone from %s: not connected", client.ObjectKeyFromObject(wl), cluster)
	}
	job := jobkind.Of(wl).New()
	err := w.Live().Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: workersync.JobNameOf(wl)}, job)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("confirming that the job of %s is gone from %s: %w", client.ObjectKeyFromObject(wl), cluster, err)
	case job.GetLabels()[gantry.WorkloadUIDLabel] != string(wl.UID):
		return nil // not this Workload's
	}
	return &stillThere{cluster: cluster}
}

// stillThere: the worker's cache trails a Job that is still there; the deletion event requeues.
type stillThere struct{ cluster string }

func (e *stillThere) Error() string { return "the job is still on " + e.cluster }

func (r *Reconciler) removeFinalizer(ctx context.Context, wl *gantry.Workload, hubJob client.Object) error {
	if hubJob != nil {
		r.mirrored.Forget(hubJob.GetUID())
	}
	r.refusals.Range(func(key, _ any) bool { // a Workload that goes takes its refusals along
		if strings.HasPrefix(key.(string), string(wl.UID)+"/") {
			r.refusals.Delete(key)
		}
		return true
	})
	jobPath := "/" + wl.Namespace + "/" + workersync.JobNameOf(wl)
	r.foreign.Range(func(key, _ any) bool { // and what it found in the way of its job
		if strings.HasSuffix(key.(string), jobPath) {
			r.foreign.Delete(key)
		}
		return true
	})
	patch := client.MergeFrom(wl.DeepCopy())
	wl.Finalizers = slices.DeleteFunc(wl.Finalizers, func(f string) bool { return f == gantry.WorkloadFinalizer })
	if err := r.Client.Patch(ctx, wl, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.statuses.Forget(client.ObjectKeyFromObject(wl)) // the patch moved it past that write; finalizedKey covers the gap
	r.expected.Expect(finalizedKey(wl))
	return nil
}

// showDeletion marks a cached object that this controller deleted, and whose deletion the cache does not
// show yet, as being deleted, as the API server has it: deciding on the stale object would only send the
// same deletion again (a Job waiting for its pods to go sees many status events meanwhile).
func (r *Reconciler) showDeletion(obj client.Object) {
	key := deletedKey(obj)
	switch {
	case obj.GetDeletionTimestamp() != nil:
		r.expected.Observe(key)
	case r.expected.IsPending(key):
		obj.SetDeletionTimestamp(ptr.To(metav1.NewTime(r.Clock.Now())))
	}
}

// deletedKey names this controller's deletion of one object on a worker.
func deletedKey(obj client.Object) string {
	return "deleted/" + string(obj.GetUID())
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

// createInNamespace creates obj, creating its namespace on the worker when it is missing.
func createInNamespace(ctx context.Context, w remote.Worker, cluster string, obj client.Object, opts ...client.CreateOption) error {
	err := w.Writer().Create(ctx, obj, opts...)
	if apierrors.IsNotFound(err) {
		ns := &corev1.Namespace{}
		ns.Name = obj.GetNamespace()
		if nsErr := w.Writer().Create(ctx, ns); nsErr != nil && !apierrors.IsAlreadyExists(nsErr) {
			return fmt.Errorf("creating namespace %s on %s: %w", ns.Name, cluster, nsErr)
		}
		err = w.Writer().Create(ctx, obj, opts...)
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %T %s on %s: %w", obj, client.ObjectKeyFromObject(obj), cluster, err)
	}
	return err
}

// deleteExact deletes exactly the object that was read (UID precondition) and says whether this call
// deleted it. Gone or replaced meanwhile is success.
func deleteExact(ctx context.Context, w remote.Worker, cluster string, obj client.Object, foreground bool) (bool, error) {
	uid := obj.GetUID()
	policy := metav1.DeletePropagationBackground
	if foreground {
		policy = metav1.DeletePropagationForeground
	}
	err := w.Writer().Delete(ctx, obj, client.PropagationPolicy(policy), client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return false, fmt.Errorf("deleting %T %s on %s: %w", obj, client.ObjectKeyFromObject(obj), cluster, err)
	}
	return err == nil, nil
}

// resume lifts the agent's suspension of a Job, guarded by its UID so that only that Job is changed.
func resume(ctx context.Context, w remote.Worker, cluster string, obj client.Object) error {
	patch := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:null}},"spec":{"suspend":false}}`, obj.GetUID(), gantry.SuspendedByAnnotation)
	err := w.Writer().Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("resuming job %s on %s: %w", client.ObjectKeyFromObject(obj), cluster, err)
	}
	return nil
}

// suspend suspends a job before it is deleted, guarded by its UID so that only that job is changed.
func suspend(ctx context.Context, w remote.Worker, cluster string, obj client.Object) error {
	patch := fmt.Sprintf(`{"metadata":{"uid":%q},"spec":{"suspend":true}}`, obj.GetUID())
	err := w.Writer().Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("suspending job %s on %s before deleting it: %w", client.ObjectKeyFromObject(obj), cluster, err)
	}
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
	for _, name := range r.Workers.Connected() {
		w, ok := r.Workers.Worker(name)
		if !ok {
			continue
		}
		errs = append(errs, r.deleteOrphans(ctx, w, name, key))
	}
	return errors.Join(errs...)
}

// deleteOrphans deletes Gantry's copy and job under the Workload key on one worker, unless they are
// going already: the Workload's finalizer usually deleted them just before it let go, and a second
// deletion would cost a request and, for a Job deleted pods first, turn its deletion into one that
// lets the Job go before its pods.
func (r *Reconciler) deleteOrphans(ctx context.Context, w remote.Worker, cluster string, key types.NamespacedName) error {
	var errs []error
	var cp gantry.Workload
	// Most clusters hold nothing of a given Workload: only those that do are read.
	if w.HoldsCopy(key) && w.Cached().Get(ctx, key, &cp) == nil && !r.going(&cp) {
		deleted, err := deleteExact(ctx, w, cluster, &cp, false)
		if deleted {
			r.expected.Expect(deletedKey(&cp))
			metrics.Withdrawn(cluster, metrics.WithdrawnOrphan)
		}
		errs = append(errs, err)
	}
	if k, jobName, ok := jobkind.ParseWorkloadName(key.Name); ok && w.HoldsJob(k.Name(), types.NamespacedName{Namespace: key.Namespace, Name: jobName}) {
		job := k.New()
		if err := w.Cached().Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: jobName}, job); err == nil && !r.going(job) {
			deleted, err := deleteExact(ctx, w, cluster, job, false)
			if deleted {
				r.expected.Expect(deletedKey(job))
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// going says whether a cached object is being deleted, as the cache shows it or as this controller
// deleted it.
func (r *Reconciler) going(obj client.Object) bool {
	r.showDeletion(obj)
	return obj.GetDeletionTimestamp() != nil
}

// KeyForWorkerObject returns the hub Workload key of a Gantry object on a worker.
func KeyForWorkerObject(obj client.Object) types.NamespacedName {
	name := obj.GetName()
	if k, isJob := jobkind.ForObject(obj); isJob {
		name = jobkind.WorkloadName(k, name)
	}
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}
}

// Package workercluster keeps each WorkerCluster connected and its status true: whether the hub reaches
// it, whether its agent reports, and what capacity the agent reported.
package workercluster

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/internal/version"
)

// Timing of health checks, reconnects and agent heartbeats.
const (
	// HealthInterval is how often a connected cluster is checked.
	HealthInterval = 30 * time.Second
	// MaxBackoff caps the wait between reconnect attempts.
	MaxBackoff = time.Minute
	// HeartbeatTimeout is how old an agent's heartbeat may be before the agent counts as gone.
	HeartbeatTimeout = 90 * time.Second
	// ConcurrentClusters is how many clusters are connected or checked at once: a cluster that does not
	// answer holds one of them until its attempt times out, not the rest of the fleet, and a starting
	// hub connects a large fleet that many at a time.
	ConcurrentClusters = 8
)

// Connections is what the controller needs of the remote manager.
type Connections interface {
	Ensure(ctx context.Context, name string, target remote.Target) error
	Disconnect(name string)
	Get(name string) (*remote.Cluster, bool)
	// MarkTried records that the cluster's connection was tried since the hub started, so that the
	// dispatcher may take its being disconnected for a fact.
	MarkTried(name string)
}

// Reconciler connects WorkerClusters and writes their status.
type Reconciler struct {
	Client client.Client
	// Access makes each cluster's Target from its kubeconfig Secret or ClusterProfile.
	Access      *remote.Access
	Connections Connections
	Clock       clock.Clock
	// Reports receives WorkerCluster names whose capacity report changed.
	Reports chan event.GenericEvent
	// WatchProfiles watches ClusterProfiles, whose CRD the hub's API server serves.
	WatchProfiles bool
	// HubVersion is the hub's version, which each agent's is judged against; empty for none.
	HubVersion string

	mu       sync.Mutex
	failures map[string]failures
}

// failures are the consecutive failed attempts to connect a cluster, all for the same reason.
type failures struct {
	count int
	last  string
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.failures = map[string]failures{}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("hub-workercluster").
		WithOptions(controller.Options{MaxConcurrentReconciles: ConcurrentClusters}).
		// Its own status writes are no reason to try again.
		For(&gantry.WorkerCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, r.clustersNaming(func(wc *gantry.WorkerCluster) string {
			if ref := wc.Spec.KubeconfigSecretRef; ref != nil {
				return ref.Name
			}
			return ""
		})).
		WatchesRawSource(source.Channel(r.Reports, &handler.EnqueueRequestForObject{}))
	if r.WatchProfiles {
		b = b.Watches(&inventory.ClusterProfile{}, r.clustersNaming(func(wc *gantry.WorkerCluster) string {
			if ref := wc.Spec.ClusterProfileRef; ref != nil {
				return ref.Name
			}
			return ""
		}))
	}
	return b.Complete(r)
}

// clustersNaming enqueues the WorkerClusters whose registration names an object of the hub's namespace.
func (r *Reconciler) clustersNaming(ref func(*gantry.WorkerCluster) string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		if o.GetNamespace() != r.Access.Namespace {
			return nil
		}
		var list gantry.WorkerClusterList
		if err := r.Client.List(ctx, &list); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			if ref(&list.Items[i]) == o.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
			}
		}
		return reqs
	})
}

// Reconcile connects the cluster and records what it found.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var wc gantry.WorkerCluster
	if err := r.Client.Get(ctx, req.NamespacedName, &wc); err != nil {
		if apierrors.IsNotFound(err) {
			r.Connections.Disconnect(req.Name)
			r.forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if wc.DeletionTimestamp != nil {
		r.Connections.Disconnect(wc.Name)
		return ctrl.Result{}, nil
	}
	status := wc.Status.DeepCopy()
	result := ctrl.Result{RequeueAfter: HealthInterval}
	err := r.connect(ctx, &wc)
	r.Connections.MarkTried(wc.Name)
	if err != nil {
		r.Connections.Disconnect(wc.Name)
		setCondition(status, wc.Generation, gantry.ClusterConnected, metav1.ConditionFalse, remote.ReasonOf(err), err.Error())
		setCondition(status, wc.Generation, gantry.ClusterAgentReady, metav1.ConditionUnknown, gantry.ReasonUnreachable, "the cluster is not connected")
		setCondition(status, wc.Generation, gantry.ClusterLeastPrivilege, metav1.ConditionUnknown, gantry.ReasonUnreachable, "the cluster is not connected")
		result.RequeueAfter = r.backoff(wc.Name, remote.ReasonOf(err))
	} else {
		r.forget(wc.Name)
		setCondition(status, wc.Generation, gantry.ClusterConnected, metav1.ConditionTrue, gantry.ReasonConnected, "connected")
		r.observeRights(wc.Name, wc.Generation, status)
		r.observeAgent(ctx, wc.Name, status)
	}
	if !equality.Semantic.DeepEqual(&wc.Status, status) {
		wc.Status = *status
		if err := r.Client.Status().Update(ctx, &wc); err != nil {
			return ctrl.Result{}, err
		}
	}
	return result, nil
}

func (r *Reconciler) connect(ctx context.Context, wc *gantry.WorkerCluster) error {
	target, err := r.Access.For(ctx, wc)
	if err != nil {
		return err
	}
	return r.Connections.Ensure(ctx, wc.Name, target)
}

// observeRights records whether the hub holds more rights on the worker than it needs.
func (r *Reconciler) observeRights(name string, gen int64, status *gantry.WorkerClusterStatus) {
	c, ok := r.Connections.Get(name)
	if !ok {
		return
	}
	st, reason, msg := remote.LeastPrivilege(c.Rights())
	setCondition(status, gen, gantry.ClusterLeastPrivilege, st, reason, msg)
}

// observeAgent reads the agent's capacity report through the connection.
func (r *Reconciler) observeAgent(ctx context.Context, name string, status *gantry.WorkerClusterStatus) {
	c, ok := r.Connections.Get(name)
	if !ok {
		return
	}
	var reports gantry.CapacityReportList
	if err := c.Client.List(ctx, &reports); err != nil {
		setCondition(status, 0, gantry.ClusterAgentReady, metav1.ConditionUnknown, gantry.ReasonUnreachable, err.Error())
		return
	}
	var newest *gantry.CapacityReport
	for i := range reports.Items {
		if newest == nil || reports.Items[i].Status.HeartbeatTime.After(newest.Status.HeartbeatTime.Time) {
			newest = &reports.Items[i]
		}
	}
	observeReported(newest, status, gantry.ClusterGangScheduling)
	observeReported(newest, status, gantry.ClusterKueue)
	r.observeAgentVersion(newest, status)
	switch {
	case newest == nil:
		setCondition(status, 0, gantry.ClusterAgentReady, metav1.ConditionFalse, gantry.ReasonNoCapacityReport, "no agent has published a CapacityReport in the cluster")
	case r.Clock.Since(newest.Status.HeartbeatTime.Time) > HeartbeatTimeout:
		setCondition(status, 0, gantry.ClusterAgentReady, metav1.ConditionFalse, gantry.ReasonReportStale,
			"the agent's last heartbeat is older than "+HeartbeatTimeout.String())
		status.Capacity = newest.Status.Capacity.DeepCopy()
	default:
		setCondition(status, 0, gantry.ClusterAgentReady, metav1.ConditionTrue, gantry.ReasonAgentReporting, "agent "+newest.Status.ClusterName+" is reporting")
		status.Capacity = newest.Status.Capacity.DeepCopy()
	}
}

// observeAgentVersion shows the agent's version and whether it and the hub's are within the
// version-skew policy; nothing while no agent reports.
func (r *Reconciler) observeAgentVersion(report *gantry.CapacityReport, status *gantry.WorkerClusterStatus) {
	if report == nil {
		status.AgentVersion = ""
		apimeta.RemoveStatusCondition(&status.Conditions, gantry.ClusterAgentVersionSupported)
		return
	}
	agent := report.Status.AgentVersion
	status.AgentVersion = agent
	shown := agent
	if shown == "" {
		shown = "an agent older than v0.3.0, which does not report its version,"
	}
	switch version.SkewOf(r.HubVersion, agent) {
	case version.SkewSupported:
		setCondition(status, 0, gantry.ClusterAgentVersionSupported, metav1.ConditionTrue, gantry.ReasonWithinSkewPolicy,
			fmt.Sprintf("agent %s and hub %s are within one minor release of each other", agent, r.HubVersion))
	case version.SkewUnsupported:
		setCondition(status, 0, gantry.ClusterAgentVersionSupported, metav1.ConditionFalse, gantry.ReasonOutsideSkewPolicy,
			fmt.Sprintf("agent %s and hub %s are more than one minor release apart; upgrade the older one (docs/upgrading.md)", agent, r.HubVersion))
	default:
		setCondition(status, 0, gantry.ClusterAgentVersionSupported, metav1.ConditionUnknown, gantry.ReasonVersionUnknown,
			fmt.Sprintf("the cluster runs %s and the hub %s: not both releases, so the version-skew policy cannot be judged", shown, cmp.Or(r.HubVersion, "an unknown version")))
	}
}

// observeReported shows on the WorkerCluster a condition of its agent's report (GangScheduling: its
// scheduler binds gangs all or none; Kueue: it serves Kueue's API); nothing when no agent said.
func observeReported(report *gantry.CapacityReport, status *gantry.WorkerClusterStatus, typ string) {
	var said *metav1.Condition
	if report != nil {
		said = apimeta.FindStatusCondition(report.Status.Conditions, typ)
	}
	if said == nil {
		apimeta.RemoveStatusCondition(&status.Conditions, typ)
		return
	}
	setCondition(status, 0, typ, said.Status, said.Reason, said.Message)
}

// backoff is the wait before the next attempt: it doubles while failures of the same reason repeat, and
// starts over when the reason changes, since something was done about the last one.
func (r *Reconciler) backoff(name, failure string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.failures[name]
	if f.last != failure {
		f = failures{last: failure}
	}
	d := time.Second << min(f.count, 6)
	f.count++
	r.failures[name] = f
	return min(d, MaxBackoff)
}

func (r *Reconciler) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failures, name)
}

func setCondition(st *gantry.WorkerClusterStatus, gen int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
}

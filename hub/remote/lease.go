package remote

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// FenceMargin is added to a cluster's failover timeout before the hub dispatches its jobs elsewhere under
// the policy Fence. The agent stops the jobs once it has not seen the lease renewed for the timeout,
// measured from the earlier of the lease's renewTime and its own sighting of that renewal
// (agent/controller.ReadHubLease), so never from later than the renewal. The margin covers what lies
// between that and the jobs being gone: its pass noticing the lapse (a few seconds), the pods'
// termination after the suspension (30 s, the default grace period), clocks that differ (up to 10 s)
// and run at different rates (1% of the timeout).
func FenceMargin(timeout time.Duration) time.Duration {
	return 45*time.Second + timeout/100
}

// LeaseRenewInterval is how often the hub renews its lease on a cluster with the given failover timeout:
// a few renewals fit in one timeout, so one failed renewal does not make the agent stop anything.
func LeaseRenewInterval(timeout time.Duration) time.Duration {
	return min(15*time.Second, timeout/4)
}

// Failovers tells the renewer each cluster's failover policy.
type Failovers interface {
	// Failover returns the cluster's failover spec; false when the cluster is not registered.
	Failover(cluster string) (gantry.Failover, bool)
}

// LeaseRenewer renews the hub's Lease on every connected worker, and remembers when it last may have
// renewed each, which is what the hub's failover under Fence counts from.
type LeaseRenewer struct {
	Workers interface {
		Worker(name string) (Worker, bool)
		Connected() []string
	}
	Failovers Failovers
	Clock     clock.WithTicker

	mu      sync.Mutex
	last    map[string]time.Time       // start of the newest renewal that may have reached the cluster
	due     map[string]time.Time       // next renewal
	renewed map[string]Worker          // the connection on which the last renewal succeeded
	wrote   map[string]gantry.Failover // what the last renewal that succeeded carried
	// renewedAt is the start of the last renewal that succeeded, on any connection.
	renewedAt map[string]time.Time
	busy      map[string]bool
}

// Start renews until ctx ends. It runs only on the elected hub.
func (r *LeaseRenewer) Start(ctx context.Context) error {
	r.init()
	tick := r.Clock.NewTicker(time.Second)
	defer tick.Stop()
	for {
		r.renewDue(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		}
	}
}

// NeedLeaderElection makes only the elected hub renew.
func (r *LeaseRenewer) NeedLeaderElection() bool { return true }

func (r *LeaseRenewer) init() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last, r.due, r.renewed, r.busy = map[string]time.Time{}, map[string]time.Time{}, map[string]Worker{}, map[string]bool{}
		r.wrote, r.renewedAt = map[string]gantry.Failover{}, map[string]time.Time{}
	}
}

func (r *LeaseRenewer) renewDue(ctx context.Context) {
	now := r.Clock.Now()
	for _, name := range r.Workers.Connected() {
		w, ok := r.Workers.Worker(name)
		f, registered := r.Failovers.Failover(name)
		if !ok || !registered {
			continue
		}
		r.mu.Lock()
		// A changed policy or timeout is written at once: the agent must know it before the hub acts on it.
		due := !r.busy[name] && (r.renewed[name] != w || !now.Before(r.due[name]) || !sameFailover(r.wrote[name], f))
		if due {
			r.busy[name] = true
		}
		r.mu.Unlock()
		if due {
			go r.renew(ctx, name, w, f)
		}
	}
}

// renew writes the Lease on one worker: its renewTime, the policy and the timeout.
func (r *LeaseRenewer) renew(ctx context.Context, name string, w Worker, f gantry.Failover) {
	start := r.Clock.Now()
	timeout := f.TimeoutOrDefault()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := writeLease(ctx, w, f, timeout, start)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.busy[name] = false
	if err == nil || !refused(err) {
		r.last[name] = start // it may have reached the cluster even when the answer did not come back
	}
	if err == nil {
		r.renewed[name] = w
		r.renewedAt[name] = start
		r.wrote[name] = f
		r.due[name] = start.Add(LeaseRenewInterval(timeout))
		return
	}
	delete(r.renewed, name)
	r.due[name] = start.Add(time.Second)
	ctrllog.FromContext(ctx).V(1).Info("Renewing the hub's lease failed", "cluster", name, "err", err.Error())
}

func writeLease(ctx context.Context, w Worker, f gantry.Failover, timeout time.Duration, now time.Time) error {
	policy := f.Policy
	if policy == "" {
		policy = gantry.FailoverWait
	}
	var lease coordinationv1.Lease
	err := w.Live().Get(ctx, types.NamespacedName{Namespace: gantry.GantryNamespace, Name: gantry.HubLeaseName}, &lease)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	lease.Namespace, lease.Name = gantry.GantryNamespace, gantry.HubLeaseName
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[gantry.FailoverPolicyAnnotation] = string(policy)
	lease.Spec.HolderIdentity = ptr.To("gantry-hub")
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(timeout / time.Second))
	lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if !apierrors.IsNotFound(err) {
		return w.Writer().Update(ctx, &lease)
	}
	err = w.Writer().Create(ctx, &lease)
	if apierrors.IsNotFound(err) { // no namespace yet
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gantry.GantryNamespace}}
		if nsErr := w.Writer().Create(ctx, ns); nsErr != nil && !apierrors.IsAlreadyExists(nsErr) {
			return nsErr
		}
		err = w.Writer().Create(ctx, &lease)
	}
	return err
}

// refused tells whether err means the write surely did not happen.
func refused(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) ||
		apierrors.IsUnauthorized(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// FenceDue is when the hub may dispatch elsewhere the jobs of a cluster it does not reach, under the
// policy Fence with the given timeout: the timeout plus FenceMargin after the newest renewal that may
// have reached it. Only a cluster whose agent surely knows the policy is failed over: the zero time,
// never, unless this hub's last renewal there that succeeded carried Fence. Of that renewal's timeout and
// the given one, the longer counts, since the agent goes by the one it last read.
func (r *LeaseRenewer) FenceDue(cluster string, timeout time.Duration) time.Time {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	wrote, ok := r.wrote[cluster]
	if !ok || wrote.Policy != gantry.FailoverFence {
		return time.Time{}
	}
	timeout = max(timeout, wrote.TimeoutOrDefault())
	return r.last[cluster].Add(timeout + FenceMargin(timeout))
}

func sameFailover(a, b gantry.Failover) bool {
	policy := func(f gantry.Failover) gantry.FailoverPolicy {
		if f.Policy == "" {
			return gantry.FailoverWait
		}
		return f.Policy
	}
	return policy(a) == policy(b) && a.TimeoutOrDefault() == b.TimeoutOrDefault()
}

// Renewed tells whether the lease was renewed on the cluster's current connection: only then does its
// agent no longer stop jobs, and may a job it suspended be resumed.
func (r *LeaseRenewer) Renewed(cluster string) bool {
	r.init()
	w, ok := r.Workers.Worker(cluster)
	r.mu.Lock()
	defer r.mu.Unlock()
	return ok && r.renewed[cluster] == w
}

// RenewedAt is the start of the last renewal of the lease on the cluster that succeeded, from which its
// agent counts the failover timeout at the latest; false when this hub renewed none there.
func (r *LeaseRenewer) RenewedAt(cluster string) (time.Time, bool) {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.renewedAt[cluster]
	return t, ok
}

package controller

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

// HubLease is what the agent knows of the hub's lease on this cluster.
type HubLease struct {
	// Fence: the cluster's failover policy is Fence, so the agent stops the hub's Jobs once Deadline
	// passes without a renewal.
	Fence bool
	// Timeout is the failover timeout the lease carries.
	Timeout time.Duration
	// Deadline is when the agent stops the hub's Jobs unless the lease is renewed before.
	Deadline time.Time
}

// LeaseSighting is when the agent last saw the hub's lease change, by its own clock.
type LeaseSighting struct {
	ResourceVersion string
	At              time.Time
}

// ReadHubLease turns the hub's Lease (nil when there is none) and the agent's last sighting of a change
// into what a pass needs, and returns the sighting to keep. The deadline is the timeout after the earlier
// of the lease's renewTime (the hub's clock) and the agent's own sighting of that renewal: the first
// needs the clocks to agree, the second misses the time the watch trailed, and the earlier of the two
// is the one the hub counts on. With no lease, or the policy Wait, nothing is ever stopped.
func ReadHubLease(lease *coordinationv1.Lease, seen LeaseSighting, now time.Time) (HubLease, LeaseSighting) {
	if lease == nil {
		return HubLease{}, LeaseSighting{}
	}
	if lease.ResourceVersion != seen.ResourceVersion {
		seen = LeaseSighting{ResourceVersion: lease.ResourceVersion, At: now}
	}
	if lease.Annotations[gantryv1beta1.FailoverPolicyAnnotation] != string(gantryv1beta1.FailoverFence) ||
		lease.Spec.LeaseDurationSeconds == nil || *lease.Spec.LeaseDurationSeconds <= 0 {
		return HubLease{}, seen
	}
	timeout := time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	from := seen.At
	if rt := lease.Spec.RenewTime; rt != nil && rt.Before(&metav1.MicroTime{Time: from}) {
		from = rt.Time
	}
	return HubLease{Fence: true, Timeout: timeout, Deadline: from.Add(timeout)}, seen
}

// lapsed tells whether the hub's lease lapsed under the policy Fence.
func (l HubLease) lapsed(now time.Time) bool { return l.Fence && !now.Before(l.Deadline) }

// SuspendedByFence tells whether the agent suspended job, of copy w's kind, because the hub's lease lapsed.
func SuspendedByFence(w *gantryv1beta1.Workload, job client.Object) bool {
	return job.GetAnnotations()[gantryv1beta1.SuspendedByAnnotation] == gantryv1beta1.SuspendedByFence &&
		jobkind.Of(w).State(job).Suspended
}

// fence stops the Job of an admitted copy while the hub's lease has lapsed: the Job is suspended (its
// pods are deleted by the Job controller; suspending rather than deleting lets the hub resume it in
// place when it comes back and the cluster is still the winner), and the copy says so. Once the lease is
// renewed and the hub resumed the Job, the copy says that too. It reports whether the fence holds the
// Job stopped (another suspension, such as Kueue's while it waits to admit the job, is not the fence's).
func (p *Plan) fence(in Input, c *gantryv1beta1.Workload, job client.Object) bool {
	suspended := jobkind.Of(c).State(job).Suspended
	cur := meta.FindStatusCondition(c.Status.Conditions, gantryv1beta1.WorkloadSuspended)
	switch {
	case in.HubLease.lapsed(in.Now):
		if !SuspendedByFence(c, job) {
			p.Suspend = append(p.Suspend, job)
		}
		p.setOther(c, cur, conditionOf(c, gantryv1beta1.WorkloadSuspended, metav1.ConditionTrue, gantryv1beta1.ReasonHubLeaseExpired,
			fmt.Sprintf("the hub did not renew its lease for %s (failover policy Fence): the Job is suspended and its pods deleted until the hub resumes or removes it",
				in.HubLease.Timeout), in.Now))
		return true
	case in.HubLease.Fence:
		p.wakeAt(in.Now, in.HubLease.Deadline)
	}
	if cur != nil && cur.Status == metav1.ConditionTrue && !suspended {
		p.setOther(c, cur, conditionOf(c, gantryv1beta1.WorkloadSuspended, metav1.ConditionFalse, gantryv1beta1.ReasonResumed,
			"the hub renewed its lease and resumed the Job", in.Now))
	}
	return SuspendedByFence(c, job)
}

// setOther plans to write a condition other than Admitted, unless the copy already shows its status and
// reason.
func (p *Plan) setOther(c *gantryv1beta1.Workload, cur *metav1.Condition, want metav1.Condition) {
	if cur != nil && cur.Status == want.Status && cur.Reason == want.Reason {
		return
	}
	p.Updates = append(p.Updates, Update{Copy: c, Condition: want})
}

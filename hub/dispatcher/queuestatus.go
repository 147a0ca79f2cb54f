package dispatcher

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// queueStatusInterval bounds how often queue and cohort statuses are written: during a burst every pass
// changes the counts, and the counts are for people, not for the dispatch path.
const queueStatusInterval = time.Second

// statusesDue says how long until queue and cohort statuses are due again; 0 or less: they are. While
// the last ones are being written they are not due: the pass after them writes what changed meanwhile.
func (d *Dispatcher) statusesDue() time.Duration {
	if d.statusesInFlight.Load() {
		return queueStatusInterval
	}
	return queueStatusInterval - d.Clock.Now().Sub(d.lastQueueStatus)
}

// writeStatuses publishes counts and usage on GlobalQueues and Queues, and each Cohort's place in the
// tree, from the snapshot's usage. The pass works out which statuses changed; their writes go to a writer
// slot, one after another, so that a pass never waits on the API server (under load, a few dozen status
// writes in a row held each pass for seconds). Without a usage (the statuses were not due when the pass
// began) it writes nothing and returns how long to wait before a pass should write them.
func (d *Dispatcher) writeStatuses(ctx context.Context, p *planned) time.Duration {
	if p.usage == nil {
		return max(d.statusesDue(), time.Millisecond)
	}
	now := d.Clock.Now()
	d.lastQueueStatus = now
	snap, read := p.pass.Snapshot(), &p.read
	globals, locals := p.pass.Statuses(p.usage.Queues)
	changed := changedGlobalQueues(read.GlobalQueues, globals, snap)
	changed = append(changed, changedQueues(read.Queues, locals, snap)...)
	changed = append(changed, changedCohorts(read.Cohorts, cohortStatuses(read.Cohorts, snap, p.usage.Cohorts, metav1.NewTime(now)))...)
	if len(changed) > 0 {
		d.statusesInFlight.Store(true)
		d.startInSlot(ctx, deferred, func() { d.writeStatusesInSlot(ctx, changed) })
	}
	return 0
}

// writeStatusesInSlot writes the statuses a pass found changed. A write that fails (a conflict: the cache
// had not seen the last one) is retried by a pass after the interval rather than left stale until the
// next resync.
func (d *Dispatcher) writeStatusesInSlot(ctx context.Context, objs []client.Object) {
	failed := false
	for _, obj := range objs {
		if err := d.Client.Status().Update(ctx, obj); err != nil {
			failed = true
			ctrllog.FromContext(ctx).V(2).Info("Writing status", "kind", fmt.Sprintf("%T", obj), "name", obj.GetName(),
				"namespace", obj.GetNamespace(), "err", err.Error())
		}
	}
	d.statusesInFlight.Store(false)
	if failed {
		d.triggerAfter(queueStatusInterval)
	}
}

// changedGlobalQueues are copies of the GlobalQueues whose status differs from want, carrying want.
func changedGlobalQueues(gqs []gantry.GlobalQueue, want map[string]gantry.GlobalQueueStatus, snap *dispatch.Snapshot) []client.Object {
	return changedStatuses(gqs, func(gq *gantry.GlobalQueue) *gantry.GlobalQueueStatus { return &gq.Status },
		func(gq *gantry.GlobalQueue) gantry.GlobalQueueStatus {
			status := want[gq.Name]
			status.Conditions = slices.Clone(gq.Status.Conditions) // set apart, or the change would not show
			apimeta.SetStatusCondition(&status.Conditions, activeCondition(gq, snap))
			return status
		})
}

// changedQueues are copies of the Queues whose status differs from want, carrying want.
func changedQueues(qs []gantry.Queue, want map[string]gantry.QueueStatus, snap *dispatch.Snapshot) []client.Object {
	return changedStatuses(qs, func(q *gantry.Queue) *gantry.QueueStatus { return &q.Status },
		func(q *gantry.Queue) gantry.QueueStatus {
			status := want[q.Namespace+"/"+q.Name]
			status.Conditions = slices.Clone(q.Status.Conditions)
			cond := metav1.Condition{Type: gantry.QueueActive, Status: metav1.ConditionTrue, Reason: gantry.ReasonReady, Message: "GlobalQueue " + q.Spec.GlobalQueue + " exists"}
			if snap.Queues[q.Spec.GlobalQueue] == nil {
				cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, gantry.ReasonGlobalQueueNotFound, "GlobalQueue "+q.Spec.GlobalQueue+" not found"
			}
			apimeta.SetStatusCondition(&status.Conditions, cond)
			return status
		})
}

// changedCohorts are copies of the Cohorts whose status differs from want, carrying want.
func changedCohorts(cohorts []gantry.Cohort, want map[string]gantry.CohortStatus) []client.Object {
	return changedStatuses(cohorts, func(c *gantry.Cohort) *gantry.CohortStatus { return &c.Status },
		func(c *gantry.Cohort) gantry.CohortStatus { return want[c.Name] })
}

// changedStatuses are copies of the objects whose status (at) differs from the one want gives them,
// carrying it. The objects are the cache's own: read, never changed.
func changedStatuses[T any, PT interface {
	*T
	client.Object
}, S any](objs []T, at func(PT) *S, want func(PT) S) []client.Object {
	var out []client.Object
	for i := range objs {
		obj := PT(&objs[i])
		status := want(obj)
		if equality.Semantic.DeepEqual(*at(obj), status) {
			continue
		}
		changed := obj.DeepCopyObject().(PT)
		*at(changed) = status
		out = append(out, changed)
	}
	return out
}

// cohortStatuses is the status each Cohort should have: its Active condition and what its tree lends,
// uses and borrows on each cluster.
func cohortStatuses(cohorts []gantry.Cohort, snap *dispatch.Snapshot, usage map[string]map[string]dispatch.CohortUse, now metav1.Time) map[string]gantry.CohortStatus {
	parentOf := make(map[string]string, len(cohorts))
	for _, c := range cohorts {
		parentOf[c.Name] = c.Spec.Parent
	}
	out := make(map[string]gantry.CohortStatus, len(cohorts))
	for i := range cohorts {
		c := &cohorts[i]
		status := gantry.CohortStatus{Conditions: slices.Clone(c.Status.Conditions), Usage: cohortUsage(usage[c.Name])}
		apimeta.SetStatusCondition(&status.Conditions, cohortActiveCondition(c, snap, parentOf, now))
		out[c.Name] = status
	}
	return out
}

// cohortUsage lists a cohort's use per cluster, by cluster name.
func cohortUsage(byCluster map[string]dispatch.CohortUse) []gantry.CohortUsage {
	var out []gantry.CohortUsage
	for _, name := range slices.Sorted(maps.Keys(byCluster)) {
		u := byCluster[name]
		out = append(out, gantry.CohortUsage{Name: name, Lendable: u.Lendable.ToResourceList(),
			Used: u.Used.ToResourceList(), Borrowed: u.Borrowed.ToResourceList()})
	}
	return out
}

// cohortActiveCondition says whether the cohort is in the tree as its spec says, or, its parents leading
// back to it, was made a root; the message names the cycle.
func cohortActiveCondition(c *gantry.Cohort, snap *dispatch.Snapshot, parentOf map[string]string, now metav1.Time) metav1.Condition {
	cond := metav1.Condition{Type: gantry.CohortActive, Status: metav1.ConditionTrue, Reason: gantry.ReasonInTree,
		ObservedGeneration: c.Generation, LastTransitionTime: now}
	switch {
	case dispatch.OnParentCycle(snap.Cohorts, c.Name):
		cond.Status, cond.Reason = metav1.ConditionFalse, gantry.ReasonParentCycle
		cond.Message = "its parents lead back to it (" + strings.Join(parentCycle(c.Name, parentOf), " -> ") +
			"): it is treated as a root"
	case c.Spec.Parent == "":
		cond.Message = "a root"
	default:
		cond.Message = "under cohort " + c.Spec.Parent
		if _, ok := parentOf[c.Spec.Parent]; !ok {
			cond.Message += ", which has no Cohort object: a root without quota of its own"
		}
	}
	return cond
}

// parentCycle follows parents from name back to it: [x y x].
func parentCycle(name string, parentOf map[string]string) []string {
	path := []string{name}
	seen := map[string]bool{name: true}
	for p := parentOf[name]; p != "" && !seen[p]; p = parentOf[p] {
		path = append(path, p)
		seen[p] = true
	}
	return append(path, name)
}

func activeCondition(gq *gantry.GlobalQueue, snap *dispatch.Snapshot) metav1.Condition {
	if gq.Spec.Held {
		msg := "held (spec.held): nothing of it is dispatched; what runs goes on"
		if gq.Spec.DrainWhileHeld {
			msg = "held and drained (spec.drainWhileHeld): what waits in it is finished; what runs goes on"
		}
		return metav1.Condition{Type: gantry.QueueActive, Status: metav1.ConditionFalse, Reason: gantry.ReasonQueueHeld, Message: msg}
	}
	for _, c := range gq.Spec.Clusters {
		if _, ok := snap.Clusters[c.Name]; !ok {
			return metav1.Condition{Type: gantry.QueueActive, Status: metav1.ConditionFalse, Reason: gantry.ReasonUnknownCluster,
				Message: "WorkerCluster " + c.Name + " does not exist"}
		}
	}
	return metav1.Condition{Type: gantry.QueueActive, Status: metav1.ConditionTrue, Reason: gantry.ReasonReady, Message: "all clusters exist"}
}

package workload

import (
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/metrics"
)

// transition is what one status write of a Workload recorded, for metrics.
type transition struct {
	jobCreated bool
	eviction   *gantry.Eviction
	finished   string // the reason, when it finished
}

// transitionOf compares a Workload's status before and after a write.
func transitionOf(before, after *gantry.WorkloadStatus) transition {
	var t transition
	became := func(typ string) bool {
		return !apimeta.IsStatusConditionTrue(before.Conditions, typ) && apimeta.IsStatusConditionTrue(after.Conditions, typ)
	}
	t.jobCreated = became(gantry.WorkloadJobCreated)
	if became(gantry.WorkloadFinished) {
		t.finished = apimeta.FindStatusCondition(after.Conditions, gantry.WorkloadFinished).Reason
	}
	if n := len(after.Evictions); n > 0 {
		last := after.Evictions[n-1]
		if m := len(before.Evictions); m == 0 || !sameEviction(before.Evictions[m-1], last) {
			t.eviction = &last
		}
	}
	return t
}

func sameEviction(a, b gantry.Eviction) bool {
	return a.Cluster == b.Cluster && a.Epoch == b.Epoch && a.Reason == b.Reason && a.Time.Equal(&b.Time)
}

// recordStatus records the metrics of a status write that succeeded: the Job created on the winner,
// with the latency of the steps that led to it, an eviction, a finish.
func (r *Reconciler) recordStatus(wl *gantry.Workload, before *gantry.WorkloadStatus) {
	t := transitionOf(before, &wl.Status)
	now := r.Clock.Now()
	if t.jobCreated {
		if since, ok := r.Timeline.JobCreated(wl.UID, now); ok {
			metrics.Step(metrics.StepWinnerToJobCreated, since)
		}
		if created := wl.CreationTimestamp.Time; !created.IsZero() {
			metrics.Step(metrics.StepCreatedToJobCreated, now.Sub(created))
		}
	}
	if t.eviction != nil {
		metrics.Evicted(t.eviction.Cluster, t.eviction.Reason)
	}
	if t.finished != "" {
		metrics.Finished(t.finished)
	}
}

// withdrawalReason says why the hub deletes the copy cp of wl from cluster.
func withdrawalReason(wl *gantry.Workload, cluster string, cp *gantry.Workload) string {
	switch {
	case cp.Labels[gantry.WorkloadUIDLabel] != string(wl.UID):
		return metrics.WithdrawnLeftover
	case wl.DeletionTimestamp != nil:
		return metrics.WithdrawnDeleted
	case wl.Status.Winner() != "" && wl.Status.Winner() != cluster:
		return metrics.WithdrawnLost
	case cp.Labels[gantry.DispatchEpochLabel] != fmt.Sprint(wl.Status.DispatchEpoch):
		return metrics.WithdrawnStaleEpoch
	}
	return metrics.WithdrawnNotNominated
}

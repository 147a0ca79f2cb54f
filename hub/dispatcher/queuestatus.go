package dispatcher

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/dispatch"
)

// queueStatusInterval bounds how often queue statuses are written: during a burst every pass changes
// the counts, and the counts are for people, not for the dispatch path.
const queueStatusInterval = time.Second

// writeQueueStatus publishes counts and usage on GlobalQueues and Queues. When the last write was too
// recent it writes nothing and returns how long to wait before the next pass should write.
func (d *Dispatcher) writeQueueStatus(ctx context.Context, st *hubState, snap *dispatch.Snapshot) time.Duration {
	now := d.Clock.Now()
	if wait := queueStatusInterval - now.Sub(d.lastQueueStatus); wait > 0 {
		return wait
	}
	d.lastQueueStatus = now
	globals, locals := queueStatuses(st, snap)
	log := ctrllog.FromContext(ctx)
	// A write fails with a conflict when the cache has not seen this queue's last write yet; it is
	// retried after the interval rather than left stale until the next resync.
	failed := false
	for i := range st.globals {
		gq := st.globals[i].DeepCopy() // the pass read the cache's own objects
		want := globals[gq.Name]
		want.Conditions = gq.Status.Conditions
		apimeta.SetStatusCondition(&want.Conditions, activeCondition(gq, snap))
		if equality.Semantic.DeepEqual(gq.Status, want) {
			continue
		}
		gq.Status = want
		if err := d.Client.Status().Update(ctx, gq); err != nil {
			failed = true
			log.V(2).Info("Writing GlobalQueue status", "globalQueue", gq.Name, "err", err.Error())
		}
	}
	for i := range st.queues {
		q := st.queues[i].DeepCopy()
		want := locals[q.Namespace+"/"+q.Name]
		want.Conditions = q.Status.Conditions
		cond := metav1.Condition{Type: gantry.QueueActive, Status: metav1.ConditionTrue, Reason: gantry.ReasonReady, Message: "GlobalQueue " + q.Spec.GlobalQueue + " exists"}
		if snap.Queues[q.Spec.GlobalQueue] == nil {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, gantry.ReasonGlobalQueueNotFound, "GlobalQueue "+q.Spec.GlobalQueue+" not found"
		}
		apimeta.SetStatusCondition(&want.Conditions, cond)
		if equality.Semantic.DeepEqual(q.Status, want) {
			continue
		}
		q.Status = want
		if err := d.Client.Status().Update(ctx, q); err != nil {
			failed = true
			log.V(2).Info("Writing Queue status", "queue", q.Namespace+"/"+q.Name, "err", err.Error())
		}
	}
	if failed {
		return queueStatusInterval
	}
	return 0
}

func activeCondition(gq *gantry.GlobalQueue, snap *dispatch.Snapshot) metav1.Condition {
	for _, c := range gq.Spec.Clusters {
		if _, ok := snap.Clusters[c.Name]; !ok {
			return metav1.Condition{Type: gantry.QueueActive, Status: metav1.ConditionFalse, Reason: gantry.ReasonUnknownCluster,
				Message: "WorkerCluster " + c.Name + " does not exist"}
		}
	}
	return metav1.Condition{Type: gantry.QueueActive, Status: metav1.ConditionTrue, Reason: gantry.ReasonReady, Message: "all clusters exist"}
}

// queueStatuses counts pending and admitted workloads and sums usage per cluster.
func queueStatuses(st *hubState, snap *dispatch.Snapshot) (map[string]gantry.GlobalQueueStatus, map[string]gantry.QueueStatus) {
	type usage struct{ admitted, reserved dispatch.Resources }
	perCluster := map[string]map[string]*usage{}
	globals := map[string]gantry.GlobalQueueStatus{}
	locals := map[string]gantry.QueueStatus{}
	localOf := make(map[string]string, len(st.workloads))
	for _, wl := range st.workloads {
		localOf[wl.Namespace+"/"+wl.Name] = wl.Namespace + "/" + wl.Spec.QueueName
	}
	for _, w := range snap.Workloads {
		g := globals[w.GlobalQueue]
		if perCluster[w.GlobalQueue] == nil {
			perCluster[w.GlobalQueue] = map[string]*usage{}
		}
		at := func(c string) *usage {
			u := perCluster[w.GlobalQueue][c]
			if u == nil {
				u = &usage{admitted: dispatch.Resources{}, reserved: dispatch.Resources{}}
				perCluster[w.GlobalQueue][c] = u
			}
			return u
		}
		local := localOf[w.Key]
		l := locals[local]
		switch w.Phase {
		case dispatch.Pending:
			g.PendingWorkloads++
			l.PendingWorkloads++
			for _, c := range w.Nominated {
				at(c).reserved.Add(w.Requests)
			}
		case dispatch.Admitted:
			g.AdmittedWorkloads++
			l.AdmittedWorkloads++
			at(w.Winner).admitted.Add(w.Requests)
		}
		globals[w.GlobalQueue] = g
		locals[local] = l
	}
	shares := dispatch.CohortShares(snap)
	for qName, q := range snap.Queues {
		g := globals[qName]
		for _, c := range q.Clusters {
			u := perCluster[qName][c]
			cu := gantry.ClusterUsage{Name: c}
			if u != nil {
				cu.Admitted = nonZero(u.admitted).ToResourceList()
				cu.Reserved = nonZero(u.reserved).ToResourceList()
			}
			if sh, ok := shares[qName][c]; ok {
				cu.Borrowed, cu.Lent = nonZero(sh.Borrowed).ToResourceList(), nonZero(sh.Lent).ToResourceList()
			}
			g.Usage = append(g.Usage, cu)
		}
		globals[qName] = g
	}
	return globals, locals
}

func nonZero(r dispatch.Resources) dispatch.Resources {
	out := dispatch.Resources{}
	for k, v := range r {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

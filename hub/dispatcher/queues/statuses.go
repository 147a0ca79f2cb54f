package queues

import (
	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// Statuses are the statuses of the GlobalQueues and Queues (by namespace/name) this pass counts: their
// pending and admitted workloads, parked ones included, and their usage per cluster, with the shares
// of the quota they borrowed and lent (dispatch.Usage.Queues).
func (p *Pass) Statuses(shares map[string]map[string]dispatch.Share) (map[string]gantry.GlobalQueueStatus, map[string]gantry.QueueStatus) {
	in := p.out
	snap := in.snap
	qc := queueCounts{globals: map[string]*queueTally{}, locals: map[queueKey]*gantry.QueueStatus{}}
	for i, w := range snap.Workloads {
		if w.QueueProblem != nil {
			continue // counted under no GlobalQueue, nor in its Queue, until its Queue resolves
		}
		g, l := qc.of(w.GlobalQueue, in.locals[i].queueKey)
		switch w.Phase {
		case dispatch.Pending:
			g.status.PendingWorkloads++
			l.PendingWorkloads++
			for _, c := range w.Nominated {
				g.on(c).reserved.Add(w.Requests)
			}
		case dispatch.Admitted:
			g.status.AdmittedWorkloads++
			l.AdmittedWorkloads++
			g.on(w.Winner).admitted.Add(w.Requests)
		}
	}
	for _, q := range in.parked {
		g, l := qc.of(q.globalQueue, q.queueKey)
		g.status.PendingWorkloads += int32(q.parked)
		l.PendingWorkloads += int32(q.parked)
	}
	for i := range snap.Tallies {
		t := &snap.Tallies[i]
		g, l := qc.of(t.GlobalQueue, in.tallyQueues[i])
		g.status.AdmittedWorkloads += int32(t.Workloads)
		l.AdmittedWorkloads += int32(t.Workloads)
		g.on(t.Cluster).admitted.Add(t.Requests)
	}
	globals := make(map[string]gantry.GlobalQueueStatus, len(qc.globals))
	for qName, g := range qc.globals {
		globals[qName] = g.status
	}
	for qName, q := range snap.Queues {
		g := globals[qName]
		for _, c := range q.Clusters {
			cu := gantry.ClusterUsage{Name: c}
			if t := qc.globals[qName]; t != nil && t.clusters[c] != nil {
				cu.Admitted = nonZero(t.clusters[c].admitted).ToResourceList()
				cu.Reserved = nonZero(t.clusters[c].reserved).ToResourceList()
			}
			if sh, ok := shares[qName][c]; ok {
				cu.Borrowed, cu.Lent = nonZero(sh.Borrowed).ToResourceList(), nonZero(sh.Lent).ToResourceList()
			}
			g.Usage = append(g.Usage, cu)
		}
		globals[qName] = g
	}
	locals := make(map[string]gantry.QueueStatus, len(qc.locals))
	for q, l := range qc.locals {
		locals[q.namespace+"/"+q.name] = *l
	}
	return globals, locals
}

// queueCounts are what the workloads of each GlobalQueue and of each Queue add up to.
type queueCounts struct {
	globals map[string]*queueTally
	locals  map[queueKey]*gantry.QueueStatus
}

func (qc *queueCounts) of(globalQueue string, queue queueKey) (*queueTally, *gantry.QueueStatus) {
	g := qc.globals[globalQueue]
	if g == nil {
		g = &queueTally{clusters: map[string]*clusterUse{}}
		qc.globals[globalQueue] = g
	}
	l := qc.locals[queue]
	if l == nil {
		l = &gantry.QueueStatus{}
		qc.locals[queue] = l
	}
	return g, l
}

// queueTally is what a GlobalQueue's workloads add up to.
type queueTally struct {
	status   gantry.GlobalQueueStatus
	clusters map[string]*clusterUse
}

type clusterUse struct{ admitted, reserved dispatch.Resources }

func (t *queueTally) on(cluster string) *clusterUse {
	u := t.clusters[cluster]
	if u == nil {
		u = &clusterUse{admitted: dispatch.Resources{}, reserved: dispatch.Resources{}}
		t.clusters[cluster] = u
	}
	return u
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

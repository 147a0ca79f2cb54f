package fleetsim

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// apply carries out a pass as the hub does: winners start (losers' copies withdrawn), nominations
// replace the copies, verdicts are recorded and withdraw what they void, victims are taken back.
func (sm *sim) apply(res dispatch.Result) {
	for _, win := range res.Winners {
		r := sm.jobs[win.Key]
		for c := range r.holds {
			if c != win.Cluster {
				sm.release(r, c)
			}
		}
		w := r.w
		w.Phase, w.Winner, w.Copies, w.Nominated = dispatch.Admitted, win.Cluster, nil, nil
		w.PendingReason, w.PendingMessage = "", ""
		r.outcome.Cluster, r.outcome.Started = win.Cluster, sm.now
		r.start = len(sm.starts[w.GlobalQueue])
		sm.starts[w.GlobalQueue] = append(sm.starts[w.GlobalQueue], dispatch.Start{At: epoch.Add(sm.now), Cluster: w.Winner, GPUs: w.GPU.Total})
		r.endsAt = sm.now + r.job.Run - r.saved
		if sm.opts.KnowCheckpoints {
			w.Run = &gantry.Run{Cluster: win.Cluster, Started: metav1.NewTime(epoch.Add(sm.now))}
			if r.job.CheckpointEvery > 0 {
				w.CheckpointInterval = &metav1.Duration{Duration: r.job.CheckpointEvery}
			}
		}
	}
	for _, n := range res.Nominations {
		r := sm.jobs[n.Key]
		sm.withdraw(r)
		r.w.Epoch, r.w.Nominated, r.w.NominatedQueue = n.Epoch, n.Clusters, n.GlobalQueue
	}
	for _, v := range res.Verdicts {
		r := sm.jobs[v.Key]
		r.w.PendingReason, r.w.PendingMessage = v.Reason, v.Message
		if v.Withdraw {
			sm.withdraw(r)
			r.w.Nominated = nil
		}
	}
	for key, rejections := range res.Rejections {
		refused := sm.jobs[key].w
		if refused.Refused == nil {
			refused.Refused = &dispatch.Refusals{RejectedAt: map[string]time.Time{}}
		}
		for _, rj := range rejections {
			refused.Refused.RejectedAt[rj.Cluster] = epoch.Add(sm.now)
		}
	}
	for _, p := range res.Preemptions {
		sm.takeBack(sm.jobs[p.Victim])
	}
}

// withdraw deletes the job's copies, freeing what admitted ones held.
func (sm *sim) withdraw(r *running) {
	for c := range r.holds {
		sm.release(r, c)
	}
	r.w.Copies = nil
}

// takeBack stops a preempted job, frees its GPUs and queues it again to run from its last checkpoint:
// what it did since is lost.
func (sm *sim) takeBack(r *running) {
	w := r.w
	sm.release(r, w.Winner)
	sm.starts[w.GlobalQueue][r.start].Ended = epoch.Add(sm.now)
	ran := sm.now - r.outcome.Started
	kept := time.Duration(0)
	if every := r.job.CheckpointEvery; every > 0 {
		kept = ran / every * every
	}
	r.saved += kept
	r.outcome.GPUHours += ran.Hours() * float64(w.GPU.Total)
	r.outcome.LostGPUHours += (ran - kept).Hours() * float64(w.GPU.Total)
	r.outcome.Cost += ran.Hours() * float64(w.GPU.Total) * sm.price(w.Winner)
	r.outcome.TakenBack++
	w.Phase, w.Winner, w.Nominated, w.Copies, w.Run = dispatch.Pending, "", nil, nil, nil
}

// release gives back what the job holds on the cluster.
func (sm *sim) release(r *running, cluster string) {
	held, ok := r.holds[cluster]
	if !ok {
		return
	}
	free := sm.nodes[cluster]
	for i, n := range held {
		free[i] += n
	}
	delete(r.holds, cluster)
}

// admit plays the agents: each answers the copies it holds no answer for yet, by priority then age,
// admitting a gang whose pods all find a node with their GPUs free (and holding them), rejecting one no
// node could ever take, and saying the rest wait.
func (sm *sim) admit() {
	pending := slices.Clone(sm.s.Workloads)
	dispatch.SortByQueueOrder(pending)
	for _, w := range pending {
		if w.Phase != dispatch.Pending {
			continue
		}
		r := sm.jobs[w.Key]
		for _, c := range w.Nominated {
			if slices.ContainsFunc(w.Copies, func(cp dispatch.Copy) bool { return cp.Cluster == c && !cp.Waiting }) {
				continue
			}
			w.Copies = slices.DeleteFunc(w.Copies, func(cp dispatch.Copy) bool { return cp.Cluster == c })
			w.Copies = append(w.Copies, sm.answer(r, c))
		}
	}
}

// answer is the agent of the cluster's word on the job's copy.
func (sm *sim) answer(r *running, cluster string) dispatch.Copy {
	spec := sm.cluster(cluster)
	if r.job.GPUsPerPod > spec.GPUsPerNode || r.job.Pods*r.job.GPUsPerPod > spec.Nodes*spec.GPUsPerNode {
		return dispatch.Copy{Cluster: cluster, Rejected: true, Reason: gantry.ReasonNeverFits, Message: "no node can hold a pod"}
	}
	take := fits(sm.nodes[cluster], r.job.Pods, r.job.GPUsPerPod)
	if take == nil {
		return dispatch.Copy{Cluster: cluster, Waiting: true, Reason: "InsufficientResources", Message: "no room now"}
	}
	free := sm.nodes[cluster]
	for i, n := range take {
		free[i] -= n
	}
	r.holds[cluster] = take
	return dispatch.Copy{Cluster: cluster, Admitted: true, AdmittedAt: epoch.Add(sm.now)}
}

func (sm *sim) cluster(name string) Cluster {
	i := slices.IndexFunc(sm.fleet.Clusters, func(c Cluster) bool { return c.Name == name })
	return sm.fleet.Clusters[i]
}

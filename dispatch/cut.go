package dispatch

import "slices"

// A deep queue's walk mostly finds again that its waiting workloads wait for quota: once the quota a
// pass has left cannot hold even the least of them, the rest of the walk decides nothing. A snapshot
// may then leave out the tail of a queue's settled workloads (ones that, the last time they were
// walked, waited for quota and already said so, unchanged since), handing over a Cut in their place:
// where the tail starts and the least any of it requests. The pass checks, at the place in the walk
// where the tail starts, that the quota left there holds none of it. Quota only shrinks as a walk goes
// on, so none of the tail would have found any later either: walked, each would have waited for quota
// again and been told what it shows. Where the check fails, the pass says so (Result.Uncut) and its
// result is not to be used: the snapshot's builder plans again with less of the tail cut.

// Cut is the tail of one queue's waiting workloads that a snapshot leaves out.
type Cut struct {
	// First is the first workload left out, in CompareInQueue's order; only its Priority, Created and
	// Key are read.
	First *Workload
	// Least is, per resource, the least any workload left out requests; a resource it lacks is 0.
	Least Resources
}

// CanCut says whether a pass can take a Cut of the named queue: the queue is walked alone (no cohort
// whose members take turns), in order (not StrictFIFO, which tells each waiting workload what it
// waits behind), and proposes no preemptions (which may say more of any waiting workload).
func CanCut(s *Snapshot, queue string) bool {
	q := s.Queues[queue]
	return q != nil && q.Cohort == "" && !q.StrictFIFO && !q.preempts()
}

// LeastOf lowers least to what r requests of each resource, in place: a resource r lacks is 0.
func LeastOf(least, r Resources) {
	for name, v := range least {
		if r[name] < v {
			if r[name] <= 0 {
				delete(least, name)
			} else {
				least[name] = r[name]
			}
		}
	}
}

// takeCuts hands each queue its cut; a cut the pass cannot take is given back at once.
func (l *ledger) takeCuts(s *Snapshot, res *Result) {
	for name, cut := range s.Cuts {
		ql := l.queues[name]
		switch {
		case ql == nil:
		case !CanCut(s, name):
			res.Uncut = append(res.Uncut, name)
		default:
			ql.cut = &cut
		}
	}
}

// walkAlone nominates for a queue without a cohort, in queue order, and checks its cut where the cut's
// tail starts.
func (ql *queueLedger) walkAlone(res *Result) {
	cut := ql.cut
	for h := ql.nom.head(); h != nil; h = ql.nom.head() {
		if cut != nil && CompareInQueue(h, cut.First) > 0 {
			ql.checkCut(cut, res)
			cut = nil
		}
		ql.nom.step(res)
	}
	if cut != nil {
		ql.checkCut(cut, res)
	}
}

// checkCut gives the cut back when the quota left on some cluster might hold the least of its tail (it
// passes the quota filter there), or might grow before the walk ends: a workload still to be walked
// widens, giving back what it holds.
func (ql *queueLedger) checkCut(cut *Cut, res *Result) {
	if n := ql.nom; n != nil && slices.ContainsFunc(n.pending[n.next:], func(w nominee) bool { return w.widening }) {
		res.Uncut = append(res.Uncut, ql.q.Name)
		return
	}
	vec := ql.vector(cut.Least)
	for i := range ql.clusters {
		if (quotaRoom{}).admits(nil, vec, &ql.clusters[i]) {
			res.Uncut = append(res.Uncut, ql.q.Name)
			return
		}
	}
}

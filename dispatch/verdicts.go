package dispatch

import (
	"fmt"
	"time"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// A waiting workload's Pending condition is rewritten only when a person reading it learns something:
// a pass proposes a verdict for waiting workloads, and many proposals repeat or flicker. Plan writes a
// verdict that comes alone (no rejection, winner, nomination or preemption with it) only when:
//   - the workload does not show it already (a queue that may preempt proposes every one, since a
//     preemption may still say more);
//   - it replaces another waiting-for-room verdict only once passes proposed it for VerdictSteadyTime in
//     a row (Snapshot.Proposed, Result.Proposed);
//   - it refreshes the agents' explanations no sooner than AgentNewsInterval after the last refresh
//     (Snapshot.AgentNews, Result.AgentNews).

// VerdictSteadyTime is how long passes must propose the same waiting verdict before it replaces another
// waiting verdict a Workload shows. While jobs finish, the hub frees their quota at once and their
// cluster's capacity report follows a moment later: in between, every workload of the queue would flip
// from WaitingForQuota to WaitingForCapacity and back, two status writes and two Events per workload
// for each job that ends. Held back, a deep queue is rewritten only when what it waits for has changed
// for good.
const VerdictSteadyTime = 5 * time.Second

// AgentNewsInterval is the least time between two rewrites of a waiting workload's Pending message that
// only repeat newer explanations of its agents: they change with every pod that starts or ends on the
// workers, and the hub would otherwise rewrite every waiting Workload each time.
const AgentNewsInterval = 30 * time.Second

// Proposal is a waiting verdict that passes propose in place of the one a workload shows, since when.
type Proposal struct {
	Reason, Message string
	Since           time.Time
}

// waitingForRoom says whether a Pending reason only says the workload waits for room: quota or capacity.
func waitingForRoom(reason string) bool {
	return reason == gantry.ReasonWaitingForQuota || reason == gantry.ReasonWaitingForCapacity
}

// verdictWorkloads are the workloads of a pass's verdicts, in the order of Result.Verdicts.
type verdictWorkloads struct{ of []*Workload }

// add gives the workload the verdict.
func (vw *verdictWorkloads) add(res *Result, w *Workload, v Verdict) {
	res.Verdicts = append(res.Verdicts, v)
	vw.of = append(vw.of, w)
}

// holdVerdicts leaves in res.Verdicts those to write now, and moves the others' keys to res.Held.
// workloads are the verdicts' workloads, in their order. A workload with a verdict has no winner or
// nomination in the same pass, and is no victim of a preemption (those are admitted): what may come
// with a verdict is a withdrawal or rejections, and then it is written.
func holdVerdicts(s *Snapshot, res *Result, workloads []*Workload) {
	kept := res.Verdicts[:0]
	for i, v := range res.Verdicts {
		w := workloads[i]
		if v.Withdraw || len(res.Rejections[v.Key]) > 0 {
			kept = append(kept, v)
			continue
		}
		if wait, write := verdictDue(s, res, w, v); !write {
			res.Held = append(res.Held, v.Key)
			if wait > 0 && (res.HeldFor == 0 || wait < res.HeldFor) {
				res.HeldFor = wait
			}
			continue
		}
		kept = append(kept, v)
	}
	res.Verdicts = kept
}

// verdictDue says whether a verdict that comes alone is written now, and if it is held for steadiness,
// for how much longer. It records in res the proposals it holds and the agents' news it writes.
func verdictDue(s *Snapshot, res *Result, w *Workload, v Verdict) (time.Duration, bool) {
	switch {
	case w.Shows(v):
		return 0, false
	case waitingForRoom(v.Reason) && waitingForRoom(w.PendingReason):
		p, ok := s.Proposed[v.Key]
		if !ok || p.Reason != v.Reason || p.Message != v.Message {
			p = Proposal{Reason: v.Reason, Message: v.Message, Since: s.Now}
		}
		if wait := VerdictSteadyTime - s.Now.Sub(p.Since); wait > 0 {
			if res.Proposed == nil {
				res.Proposed = map[string]Proposal{}
			}
			res.Proposed[v.Key] = p
			return wait, false
		}
	case v.Reason == gantry.ReasonWaitingForAdmission:
		if last, ok := s.AgentNews[v.Key]; ok && w.PendingReason == gantry.ReasonWaitingForAdmission && s.Now.Sub(last) < AgentNewsInterval {
			return 0, false
		}
		if res.AgentNews == nil {
			res.AgentNews = map[string]time.Time{}
		}
		res.AgentNews[v.Key] = s.Now
	}
	return 0, true
}

// TakenBackMessage says for a person that the winner gave the workload up, and why; or, for a stopped
// one, that it was taken back and waits to be resumed.
func TakenBackMessage(e gantry.Eviction) string {
	if e.Reason == gantry.ReasonStopped {
		return fmt.Sprintf("taken back from %s (%s: %s); it waits until it is resumed", e.Cluster, e.Reason, e.Message)
	}
	return fmt.Sprintf("%s gave it up (%s: %s); dispatching it again", e.Cluster, e.Reason, e.Message)
}

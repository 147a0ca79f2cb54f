package dispatcher

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
)

// A waiting workload's Pending condition is rewritten only when a person reading it learns something:
// a pass proposes a verdict for every waiting workload, and most proposals repeat or flicker. Three
// rules hold rewrites back: a verdict the Workload already shows is dropped (dispatch.Plan proposes
// none but for queues that may preempt; verdictStands drops those and the blocked ones); a waiting
// verdict that would replace another waiting verdict waits until passes proposed it for VerdictSteadyTime
// in a row (holdWaiting); a refresh of the agents' explanations waits for AgentNewsInterval since the
// last (agentNewsTooSoon).

// onlyVerdict says whether the change is a verdict and nothing else: no winner, nomination, preemption,
// rejection or withdrawal.
func (c *change) onlyVerdict() bool {
	v := c.verdict
	return v != nil && !v.Withdraw && c.winner == "" && c.nomination == nil && c.preemption == nil && len(c.rejections) == 0
}

// verdictStands says whether the change is only a verdict that the Workload already shows: most of a
// deep queue in every pass, which then costs no copy of the Workload.
func verdictStands(c *change) bool {
	if !c.onlyVerdict() {
		return false
	}
	v, p := c.verdict, apimeta.FindStatusCondition(c.wl.Status.Conditions, gantry.WorkloadPending)
	return p != nil && p.Status == metav1.ConditionTrue && p.Reason == v.Reason && p.Message == v.Message &&
		p.ObservedGeneration == c.wl.Generation
}

// VerdictSteadyTime is how long passes must propose the same waiting verdict before it replaces another
// waiting verdict a Workload shows. While jobs finish, the hub frees their quota at once and their
// cluster's capacity report follows a moment later: in between, every workload of the queue would flip
// from WaitingForQuota to WaitingForCapacity and back, two status writes and two Events per workload
// for each job that ends. Held back, a deep queue is rewritten only when what it waits for has changed
// for good.
const VerdictSteadyTime = 5 * time.Second

// proposal is a waiting verdict passes propose in place of the one the Workload shows, since when.
type proposal struct {
	reason, message string
	since           time.Time
}

// waitingForRoom says whether a Pending reason only says the workload waits for room: quota or capacity.
func waitingForRoom(reason string) bool {
	return reason == gantry.ReasonWaitingForQuota || reason == gantry.ReasonWaitingForCapacity
}

// holdWaiting tells how long the change must still wait: it is only a waiting verdict in place of
// another waiting verdict the Workload shows, and passes have proposed it for less than
// VerdictSteadyTime; 0 lets it be written. It remembers the proposal since the first pass that made it.
func (d *Dispatcher) holdWaiting(key string, c *change) time.Duration {
	prev := apimeta.FindStatusCondition(c.wl.Status.Conditions, gantry.WorkloadPending)
	if !c.onlyVerdict() || !waitingForRoom(c.verdict.Reason) || prev == nil || prev.Status != metav1.ConditionTrue ||
		!waitingForRoom(prev.Reason) || prev.ObservedGeneration != c.wl.Generation {
		delete(d.proposed, key)
		return 0
	}
	now := d.Clock.Now()
	p, ok := d.proposed[key]
	if !ok || p.reason != c.verdict.Reason || p.message != c.verdict.Message {
		p = proposal{reason: c.verdict.Reason, message: c.verdict.Message, since: now}
		d.proposed[key] = p
	}
	if wait := VerdictSteadyTime - now.Sub(p.since); wait > 0 {
		return wait
	}
	delete(d.proposed, key)
	return 0
}

// AgentNewsInterval is the least time between two rewrites of a waiting workload's Pending message that
// only repeat newer explanations of its agents: they change with every pod that starts or ends on the
// workers, and the hub would otherwise rewrite every waiting Workload each time. A pass at least every
// Resync brings the message up to date.
const AgentNewsInterval = 30 * time.Second

// agentNewsTooSoon tells whether the change for key only refreshes the agents' explanations, and the
// last refresh was less than AgentNewsInterval ago. It remembers the refreshes it lets through.
func (d *Dispatcher) agentNewsTooSoon(key string, c *change) bool {
	if !c.onlyVerdict() || c.verdict.Reason != gantry.ReasonWaitingForAdmission {
		return false
	}
	prev := apimeta.FindStatusCondition(c.wl.Status.Conditions, gantry.WorkloadPending)
	now := d.Clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if prev != nil && prev.Reason == gantry.ReasonWaitingForAdmission {
		if last, ok := d.agentNews[key]; ok && now.Sub(last) < AgentNewsInterval {
			return true
		}
	}
	d.agentNews[key] = now
	return false
}

package dispatch

import (
	"maps"
	"testing"
	"time"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// TestVerdictsAreWrittenWhenAPersonLearnsSomething runs passes one after another, each proposing one
// verdict for a workload that shows a Pending reason, and checks which of them are written and for how
// long the held ones wait: a waiting verdict in place of another waits until passes proposed it for
// VerdictSteadyTime in a row, proposing something else starts the time anew, the agents' news is
// refreshed at most every AgentNewsInterval, and a verdict the workload shows is not written again.
func TestVerdictsAreWrittenWhenAPersonLearnsSomething(t *testing.T) {
	capacity := Verdict{Key: "ns/w", Reason: gantry.ReasonWaitingForCapacity, Message: "waiting for GPUs"}
	quota := Verdict{Key: "ns/w", Reason: gantry.ReasonWaitingForQuota, Message: "waiting for quota of GlobalQueue gq"}
	behind := Verdict{Key: "ns/w", Reason: gantry.ReasonWaitingForQuota, Message: "queued behind ns/x (StrictFIFO)"}
	unavailable := Verdict{Key: "ns/w", Reason: gantry.ReasonNoClusterAvailable, Message: "w1 is not connected"}
	withdraw := Verdict{Key: "ns/w", Reason: gantry.ReasonWaitingForCapacity, Message: "waiting for GPUs", Withdraw: true}
	news := func(msg string) Verdict {
		return Verdict{Key: "ns/w", Reason: gantry.ReasonWaitingForAdmission, Message: msg}
	}
	type step struct {
		after    time.Duration // since the previous pass
		shows    string        // the Pending reason the workload shows ("": none for its spec)
		verdict  Verdict
		rejected bool // the pass records a rejection with it
		none     bool // the pass proposes nothing for it
		written  bool
		heldFor  time.Duration
	}
	cases := map[string][]step{
		"quota to capacity waits, then is written": {
			{shows: quota.Reason, verdict: capacity, heldFor: VerdictSteadyTime},
			{after: 2 * time.Second, shows: quota.Reason, verdict: capacity, heldFor: 3 * time.Second},
			{after: 3 * time.Second, shows: quota.Reason, verdict: capacity, written: true},
		},
		"another message starts anew": {
			{shows: capacity.Reason, verdict: quota, heldFor: VerdictSteadyTime},
			{after: 4 * time.Second, shows: capacity.Reason, verdict: behind, heldFor: VerdictSteadyTime},
		},
		"a proposal that lapsed starts anew": {
			{shows: quota.Reason, verdict: capacity, heldFor: VerdictSteadyTime},
			{after: time.Second, shows: quota.Reason, none: true},
			{after: 4 * time.Second, shows: quota.Reason, verdict: capacity, heldFor: VerdictSteadyTime},
		},
		"out of the waiting reasons at once":  {{shows: quota.Reason, verdict: unavailable, written: true}},
		"into the waiting reasons at once":    {{shows: unavailable.Reason, verdict: quota, written: true}},
		"a first verdict at once":             {{verdict: quota, written: true}},
		"a withdrawal at once":                {{shows: withdraw.Reason, verdict: withdraw, written: true}},
		"with a rejection at once":            {{shows: quota.Reason, verdict: capacity, rejected: true, written: true}},
		"admission explanations are not held": {{shows: quota.Reason, verdict: news("b: InsufficientResources"), written: true}},
		"a verdict shown is not written again": {
			{shows: quota.Reason, verdict: Verdict{Key: "ns/w", Reason: quota.Reason, Message: "shown"}},
		},
		"agents' news at most every AgentNewsInterval": {
			{shows: gantry.ReasonWaitingForAdmission, verdict: news("b: one"), written: true},
			{after: AgentNewsInterval - time.Second, shows: gantry.ReasonWaitingForAdmission, verdict: news("b: two")},
			{after: time.Second, shows: gantry.ReasonWaitingForAdmission, verdict: news("b: three"), written: true},
		},
		"agents' news after another reason at once": {
			{shows: gantry.ReasonWaitingForAdmission, verdict: news("b: one"), written: true},
			{after: time.Second, shows: quota.Reason, verdict: news("b: two"), written: true},
		},
	}
	for name, steps := range cases {
		s := &Snapshot{Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), AgentNews: map[string]time.Time{}}
		for i, st := range steps {
			s.Now = s.Now.Add(st.after)
			w := &Workload{Key: "ns/w", PendingReason: st.shows, PendingMessage: "shown"}
			res := Result{Rejections: map[string][]Rejection{}}
			if !st.none {
				res.Verdicts = []Verdict{st.verdict}
			}
			if st.rejected {
				res.Rejections[w.Key] = []Rejection{{Cluster: "w1", Reason: gantry.ReasonNeverFits}}
			}
			holdVerdicts(s, &res, []*Workload{w})
			if written := len(res.Verdicts) == 1; written != st.written || res.HeldFor != st.heldFor {
				t.Errorf("%s, pass %d: written %v, held for %v; want %v, %v", name, i, written, res.HeldFor, st.written, st.heldFor)
			}
			if st.written == (len(res.Held) == 1) && !st.none {
				t.Errorf("%s, pass %d: held %v, want it held only when not written", name, i, res.Held)
			}
			s.Proposed = res.Proposed
			maps.Copy(s.AgentNews, res.AgentNews)
		}
		if last := steps[len(steps)-1]; last.written && len(s.Proposed) > 0 {
			t.Errorf("%s: %d proposals remembered after the verdict went through", name, len(s.Proposed))
		}
	}
}

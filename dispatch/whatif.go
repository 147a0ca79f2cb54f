package dispatch

import (
	"math"
	"slices"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Prediction is what the dispatcher would do, in a pass over the snapshot, with one more workload: the
// hub's answer to "where would this job go, and why not elsewhere", before it is submitted.
type Prediction struct {
	// Nomination is where its copies would go now; nil when it would wait (Verdict says why).
	Nomination *Nomination
	Verdict    *Verdict
	// Preemptions are what it would preempt to make room (none unless its queue's rules allow).
	Preemptions []Preemption
	// Clusters judge each cluster of its GlobalQueue, in the queue's order.
	Clusters []ClusterPrediction
	// Position, Pending and AheadOfShape are where it would stand in its GlobalQueue (QueuePosition).
	Position, Pending, AheadOfShape int
}

// ClusterPrediction is one cluster of the workload's GlobalQueue, as the candidate pipeline sees it.
type ClusterPrediction struct {
	Name string
	// LeftOut is the Pending reason of the first filter that leaves the cluster out (NoClusterCanHold,
	// NoClusterAvailable, WaitingForQuota, WaitingForCapacity); empty for a candidate.
	LeftOut string
	// Quota, Used and Reserved are, per resource the queue limits there, its quota and what admitted and
	// nominated workloads hold of it; Ceiling is the most the queue may use there, borrowing included.
	Quota, Used, Reserved, Ceiling Resources
	// WithinQuota says it would run within the queue's own quota there; else it would borrow.
	WithinQuota bool
	// Scores are the raw values of the queue's scores (higher is better; NaN: unknown).
	Scores map[string]float64
	// PerHour is what an hour of it would cost there (NaN: no price); DataTermsMatched how many of
	// its data location's labels the cluster carries.
	PerHour          float64
	DataTermsMatched int
	// GPUs are what the cluster's agent last reported.
	GPUs []GPUCapacity
}

// WhatIf runs a dispatch pass over the snapshot with w added as a new pending workload of its
// GlobalQueue, and says what that pass would decide for it and how each of its queue's clusters judges
// it. The snapshot is not changed; w is queued as submitted at the snapshot's time.
func WhatIf(s *Snapshot, w *Workload) Prediction {
	ask := *w
	ask.Phase, ask.Epoch, ask.Nominated, ask.Winner, ask.Copies = Pending, 0, nil, "", nil
	withIt := *s
	withIt.Workloads = append(slices.Clone(s.Workloads), &ask)
	withIt.Proposed, withIt.AgentNews = nil, nil
	var p Prediction
	p.Position, p.Pending, p.AheadOfShape = QueuePosition(&withIt, &ask)
	res := Plan(&withIt)
	if i := slices.IndexFunc(res.Nominations, func(n Nomination) bool { return n.Key == w.Key }); i >= 0 {
		p.Nomination = &res.Nominations[i]
	}
	if i := slices.IndexFunc(res.Verdicts, func(v Verdict) bool { return v.Key == w.Key }); i >= 0 {
		p.Verdict = &res.Verdicts[i]
	}
	for _, pr := range res.Preemptions {
		if pr.Preemptor == w.Key {
			p.Preemptions = append(p.Preemptions, pr)
		}
	}
	p.Clusters = judgeClusters(&withIt, &ask)
	return p
}

// judgeClusters runs the candidate pipeline's filters and scores on each cluster of the workload's
// GlobalQueue, as its ledger stands before the pass decides anything.
func judgeClusters(s *Snapshot, w *Workload) []ClusterPrediction {
	l := emptyLedger(s)
	l.countAndGroup(s)
	ql := l.queues[w.GlobalQueue]
	if ql == nil {
		return nil
	}
	w.rejected = w.rejectedClusters(s.Now, s.RejectionTTL)
	vec := ql.vector(w.Requests)
	out := make([]ClusterPrediction, 0, len(ql.clusters))
	for i := range ql.clusters {
		c := &ql.clusters[i]
		cp := ClusterPrediction{Name: c.name, WithinQuota: c.withinQuota(vec), Scores: map[string]float64{},
			PerHour: c.cluster.PerHour(w), DataTermsMatched: c.cluster.MatchedTerms(w.DataLocation), GPUs: c.cluster.GPUs}
		if st := leftOutAt(w, vec, c); st < stages {
			cp.LeftOut = stageReasons[st]
		}
		cp.Quota, cp.Used, cp.Reserved, cp.Ceiling = Resources{}, Resources{}, Resources{}, Resources{}
		for k, r := range ql.names {
			if c.quota[k] != math.MaxInt64 {
				cp.Quota[r], cp.Used[r], cp.Reserved[r], cp.Ceiling[r] = c.quota[k], c.admitted[k], c.reserved[k], c.ceiling[k]
			}
		}
		for _, sc := range ql.scores {
			cp.Scores[sc.name()] = sc.score(w, vec, c, ql)
		}
		out = append(out, cp)
	}
	return out
}

// stageReasons is the Pending reason a workload gets when a filter of that stage leaves out its last
// cluster (noCandidateVerdict).
var stageReasons = [stages]string{
	stageNever:       gantry.ReasonNoClusterCanHold,
	stageUnavailable: gantry.ReasonNoClusterAvailable,
	stageQuota:       gantry.ReasonWaitingForQuota,
	stageCapacity:    gantry.ReasonWaitingForCapacity,
}

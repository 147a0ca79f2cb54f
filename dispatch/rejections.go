package dispatch

import (
	"fmt"
	"time"
)

// DefaultRejectionTTL is how long a cluster whose agent said it cannot run a workload (NeverFits,
// NoEligibleNode, JobNameConflict) is passed over for it. Clusters change: nodes are uncordoned or
// become Ready, pools scale up from zero, a conflicting Job goes. After this the cluster may be
// nominated again; the periodic pass notices the lapse.
const DefaultRejectionTTL = 10 * time.Minute

// MaxEvictionsPerCluster is how many times a workload may be taken back from one cluster, other than
// by a preemption, before that cluster counts as one that cannot run it.
const MaxEvictionsPerCluster = 3

// Evictions are the times a workload was taken back from one cluster other than by a preemption (the
// cluster did nothing wrong then), and the reason of the last of them.
type Evictions struct {
	Count      int
	LastReason string
}

// RejectedByAgent is why a cluster whose agent rejected a workload is left out for it.
const RejectedByAgent = "rejected by its agent"

// rejectedClusters are the clusters the workload may not go to at now, each with why: those whose
// agents rejected it less than ttl before (0: DefaultRejectionTTL), and those it was taken back from
// MaxEvictionsPerCluster times; nil when there are none. The map is the caller's.
func (w *Workload) rejectedClusters(now time.Time, ttl time.Duration) map[string]string {
	if w.Refused == nil {
		return nil
	}
	var out map[string]string
	add := func(cluster, why string) {
		if out == nil {
			out = map[string]string{}
		}
		out[cluster] = why
	}
	for c, at := range w.Refused.RejectedAt {
		if now.Sub(at) < rejectionTTL(ttl) {
			add(c, RejectedByAgent)
		}
	}
	for c, e := range w.Refused.EvictedFrom {
		if e.Count >= MaxEvictionsPerCluster {
			// Admitted there and never placed, or refused there, again and again: stop trying there.
			add(c, fmt.Sprintf("taken back from it %d times (last: %s)", e.Count, e.LastReason))
		}
	}
	return out
}

// RejectionLapsed says whether a rejection of the workload lapsed after since and by until: a pass
// then decides for it otherwise than the pass at since did.
func (w *Workload) RejectionLapsed(since, until time.Time, ttl time.Duration) bool {
	if w.Refused == nil {
		return false
	}
	for _, at := range w.Refused.RejectedAt {
		if end := at.Add(rejectionTTL(ttl)); end.After(since) && !end.After(until) {
			return true
		}
	}
	return false
}

func rejectionTTL(ttl time.Duration) time.Duration {
	if ttl == 0 {
		return DefaultRejectionTTL
	}
	return ttl
}

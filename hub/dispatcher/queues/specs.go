package queues

import (
	"cmp"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// globalQueueOf is the GlobalQueue's strategy and quota, and the namespaces it selects (none when its
// selector is missing or invalid).
func globalQueueOf(gq *gantry.GlobalQueue) (*dispatch.GlobalQueue, labels.Selector) {
	q := &dispatch.GlobalQueue{
		Name:          gq.Name,
		StrictFIFO:    gq.Spec.QueueingStrategy == gantry.StrictFIFO,
		MaxCandidates: int(gq.Spec.Dispatch.MaxCandidates),
		Quota:         map[string]dispatch.Resources{},
		Cohort:        gq.Spec.Cohort,
		Weight:        copyOfWeight(gq.Spec.FairSharing.Weight),
	}
	if q.MaxCandidates == 0 {
		q.MaxCandidates = gantry.DefaultMaxCandidates
	}
	for _, sc := range gq.Spec.Dispatch.Scores {
		q.Scores = append(q.Scores, dispatch.WeightedScore{Name: string(sc.Name), Weight: int(sc.Weight)})
	}
	q.PreferredClusters = gq.Spec.Dispatch.PreferredClusters
	q.Incremental = gq.Spec.Dispatch.Mode == gantry.DispatchIncremental
	q.Preemption = gq.Spec.Preemption
	for _, c := range gq.Spec.Clusters {
		q.Clusters = append(q.Clusters, c.Name)
		q.Quota[c.Name] = dispatch.FromResourceList(c.Quota)
		if c.BorrowingLimit != nil {
			if q.BorrowingLimit == nil {
				q.BorrowingLimit = map[string]dispatch.Resources{}
			}
			q.BorrowingLimit[c.Name] = dispatch.FromResourceList(c.BorrowingLimit)
		}
		if c.LendingLimit != nil {
			if q.LendingLimit == nil {
				q.LendingLimit = map[string]dispatch.Resources{}
			}
			q.LendingLimit[c.Name] = dispatch.FromResourceList(c.LendingLimit)
		}
	}
	if gq.Spec.NamespaceSelector == nil {
		return q, labels.Nothing()
	}
	sel, err := metav1.LabelSelectorAsSelector(gq.Spec.NamespaceSelector)
	if err != nil {
		return q, labels.Nothing()
	}
	return q, sel
}

// cohortsOf is the tree of cohorts the dispatcher decides over: a cohort on a cycle of parents is made
// a root, so that no quota is lent round a loop.
func cohortsOf(cohorts []gantry.Cohort) map[string]*dispatch.Cohort {
	out := make(map[string]*dispatch.Cohort, len(cohorts))
	for i := range cohorts {
		c := &cohorts[i]
		dc := &dispatch.Cohort{Name: c.Name, Parent: c.Spec.Parent, Weight: copyOfWeight(c.Spec.FairSharing.Weight)}
		for _, cq := range c.Spec.Clusters {
			if cq.Quota != nil {
				if dc.Quota == nil {
					dc.Quota = map[string]dispatch.Resources{}
				}
				dc.Quota[cq.Name] = dispatch.FromResourceList(cq.Quota)
			}
			if cq.LendingLimit != nil {
				if dc.LendingLimit == nil {
					dc.LendingLimit = map[string]dispatch.Resources{}
				}
				dc.LendingLimit[cq.Name] = dispatch.FromResourceList(cq.LendingLimit)
			}
		}
		out[c.Name] = dc
	}
	return out
}

// copyOfWeight keeps the snapshot apart from the cache's objects, which a pass must never change.
func copyOfWeight(w *int32) *int32 {
	if w == nil {
		return nil
	}
	v := *w
	return &v
}

// resolver finds the GlobalQueue a Workload's Queue names now (dispatch.QueueIndex), once per Queue
// in a pass.
type resolver struct {
	index  dispatch.QueueIndex
	parked map[string]bool // GlobalQueues whose parkable workloads the pass leaves out
}

type queueKey struct{ namespace, name string }

// queueRef is a Queue that Workloads name, whether or not it exists, held once for all of them: a deep
// queue's Workloads name few Queues, and a pass resolves each of those once.
type queueRef struct {
	queueKey
	resolvedBy *resolver // the pass whose resolution it holds
	resolution
	users int // entries of the book that name it
	// parkedBy is the pass that worked out parks: whether it parks the Queue's parkable workloads;
	// countedBy the pass that counted how many it parked.
	parkedBy *resolver
	parks    bool
	// cuttable: its entries may settle; tail is what the pass cuts of its GlobalQueue's settled entries
	// (nil: none). cutBy is the pass that looked them up.
	cutBy     *resolver
	cuttable  bool
	tail      *tail
	countedBy *resolver
	parked    int
}

type resolution struct {
	globalQueue string
	problem     *dispatch.QueueProblem
}

// newResolver reads the GlobalQueues into queues, and the Queues, for resolving Workloads' queues.
func newResolver(read *Read, namespaces map[string]labels.Set, queues map[string]*dispatch.GlobalQueue) *resolver {
	r := &resolver{index: dispatch.QueueIndex{GlobalQueueOf: make(map[dispatch.QueueRef]string, len(read.Queues)),
		Selects: make(map[string]labels.Selector, len(read.GlobalQueues)), Namespaces: namespaces}}
	for i := range read.GlobalQueues {
		gq := &read.GlobalQueues[i]
		queues[gq.Name], r.index.Selects[gq.Name] = globalQueueOf(gq)
		if gq.Spec.Held {
			if r.index.Held == nil {
				r.index.Held = map[string]bool{}
			}
			r.index.Held[gq.Name] = gq.Spec.DrainWhileHeld
		}
	}
	for _, q := range read.Queues {
		r.index.GlobalQueueOf[dispatch.QueueRef{Namespace: q.Namespace, Name: q.Name}] = q.Spec.GlobalQueue
	}
	return r
}

// resolve returns the GlobalQueue the Queue names, and why its Workloads cannot be dispatched under it
// (nil when they can). The name comes back even when that GlobalQueue is missing or does not select
// the namespace.
func (r *resolver) resolve(q *queueRef) (string, *dispatch.QueueProblem) {
	if q.resolvedBy != r {
		gq, problem := r.index.Resolve(dispatch.QueueRef{Namespace: q.namespace, Name: q.name})
		q.resolution, q.resolvedBy = resolution{gq, problem}, r
	}
	return q.globalQueue, q.problem
}

// parks says whether the pass leaves out the Queue's parkable workloads: its GlobalQueue is parked and
// its workloads can be dispatched under it.
func (r *resolver) parks(q *queueRef) bool {
	if q.parkedBy != r {
		gq, problem := r.resolve(q)
		q.parks, q.parkedBy = problem == nil && r.parked[gq], r
	}
	return q.parks
}

// refusalsOf reads when each cluster that rejected the Workload did (a rejection recorded without a
// time counts as recorded when the Workload was created), and how often it was taken back from each
// cluster other than by a preemption; nil when it has neither.
func refusalsOf(wl *gantry.Workload) *dispatch.Refusals {
	var at map[string]time.Time
	for _, r := range wl.Status.RejectedClusters {
		if at == nil {
			at = map[string]time.Time{}
		}
		at[r.Name] = cmp.Or(r.Time.Time, wl.CreationTimestamp.Time)
	}
	var evicted map[string]dispatch.Evictions
	for _, e := range wl.Status.Evictions {
		if e.Reason == gantry.ReasonPreempted || e.Reason == gantry.ReasonStopped {
			continue // the hub took it back, not the cluster refusing it
		}
		if evicted == nil {
			evicted = map[string]dispatch.Evictions{}
		}
		n := evicted[e.Cluster]
		evicted[e.Cluster] = dispatch.Evictions{Count: n.Count + 1, LastReason: e.Reason}
	}
	if at == nil && evicted == nil {
		return nil
	}
	return &dispatch.Refusals{RejectedAt: at, EvictedFrom: evicted}
}

// Package dispatch decides, over an in-memory snapshot of the hub, which clusters receive a copy of each
// pending workload and which admitted copy wins. It does no I/O: the hub's controllers build a Snapshot
// from their caches, call these functions and carry out the result.
package dispatch

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Resources maps a resource name to an amount in milli-units (cpu "1" is 1000, nvidia.com/gpu "8" is 8000).
// Milli-units keep cpu exact; for bytes they overflow only beyond 9.2 PB.
type Resources map[corev1.ResourceName]int64

// FromResourceList converts a ResourceList to milli-units.
func FromResourceList(rl corev1.ResourceList) Resources {
	r := make(Resources, len(rl))
	for name, q := range rl {
		r[name] = q.MilliValue()
	}
	return r
}

// ToResourceList converts back to a ResourceList, choosing the usual format per amount.
func (r Resources) ToResourceList() corev1.ResourceList {
	if len(r) == 0 {
		return nil
	}
	rl := make(corev1.ResourceList, len(r))
	for name, v := range r {
		if v%1000 == 0 {
			rl[name] = *resource.NewQuantity(v/1000, resource.DecimalSI)
		} else {
			rl[name] = *resource.NewMilliQuantity(v, resource.DecimalSI)
		}
	}
	return rl
}

// Add adds o to r in place.
func (r Resources) Add(o Resources) {
	for name, v := range o {
		r[name] += v
	}
}

// Sub subtracts o from r in place.
func (r Resources) Sub(o Resources) {
	for name, v := range o {
		r[name] -= v
	}
}

// Cluster is what the dispatcher knows of one worker cluster.
type Cluster struct {
	Name      string
	Connected bool
	// Connecting: not connected, and the hub has not tried to connect it since it started, so what it
	// will be is not known yet. A workload that only such a cluster could take keeps its last verdict.
	Connecting bool
	AgentReady bool
	Cordoned   bool
	// Fenced: the operator said nothing of the cluster runs any more.
	Fenced bool
	// GPUs per product, from the agent's last capacity report; nil when the cluster reports no GPU
	// products, and then GPU demands are left to its agent.
	GPUs []GPUCapacity
	// Kinds are the kinds of jobs the hub can run there (their API is served and the hub may create
	// them); nil when not known, and then every kind is tried.
	Kinds map[string]bool
	// Resources is what the agent's last report says the cluster has of each resource, over its Ready
	// nodes; nil when it reported none. It decides only whether a workload goes there alone (alone.go),
	// never whether it may go.
	Resources []ResourceRoom
	// Labels are its WorkerCluster's labels, which a workload's DataLocation matches.
	Labels map[string]string
	// Price is what an hour there costs; nil when its WorkerCluster sets none.
	Price *Price
}

// ResourceRoom is what a cluster had of one resource at its agent's last report, in milli-units.
type ResourceRoom struct {
	Name              corev1.ResourceName
	Allocatable       int64
	Free              int64
	LargestFreeOnNode int64
	// Admitted is what the copies the agent held admitted asked for of it; AdmittedNotReported from an
	// agent that does not say.
	Admitted int64
}

// AdmittedNotReported is ResourceRoom.Admitted of an agent that does not report it.
const AdmittedNotReported = -1

// Runs says whether the cluster can run jobs of the kind ("" is a batch Job).
func (c Cluster) Runs(kind string) bool {
	if kind == "" {
		kind = "Job"
	}
	return c.Kinds == nil || c.Kinds[kind]
}

// GPUCapacity is what a cluster had free of one GPU product at its agent's last report.
type GPUCapacity struct {
	Product                  string
	Allocatable              int64
	Free                     int64
	LargestFreeOnNode        int64
	LargestAllocatableOnNode int64
}

// GPUDemand is what a workload needs of GPUs: Total over all its pods, PerPod for its largest pod, and
// the products that pod accepts (empty: any).
type GPUDemand struct {
	Total    int64
	PerPod   int64
	Products []string
}

// MayFitNow tells whether the cluster's last report leaves room for the demand: some accepted product
// with a node that has PerPod free, and Total free over the accepted products. It is a necessary
// condition only; the agent decides. A cluster that could not hold the demand even when empty may fit
// too: its agent then says it never fits, and why, which is more use than waiting. A cluster without
// GPU reports, or a demand without GPUs, may fit.
func (c Cluster) MayFitNow(d GPUDemand) bool {
	if d.PerPod <= 0 || c.GPUs == nil {
		return true
	}
	var free, largestFree, alloc, largestAlloc int64
	for _, g := range c.GPUs {
		if len(d.Products) > 0 && !slices.Contains(d.Products, g.Product) {
			continue
		}
		free += g.Free
		alloc += g.Allocatable
		largestFree = max(largestFree, g.LargestFreeOnNode)
		largestAlloc = max(largestAlloc, g.LargestAllocatableOnNode)
	}
	if largestAlloc < d.PerPod || alloc < d.Total {
		return true
	}
	return largestFree >= d.PerPod && free >= d.Total
}

// ProductRank is the position in d.Products of the first product the cluster's last report has room
// for (a node with PerPod free and Total free of that product); len(d.Products) when it has room for
// none. A cluster without GPU reports ranks 0: nothing is known against it.
func (c Cluster) ProductRank(d GPUDemand) int {
	if c.GPUs == nil {
		return 0
	}
	for i, p := range d.Products {
		for _, g := range c.GPUs {
			if g.Product == p && g.LargestFreeOnNode >= d.PerPod && g.Free >= d.Total {
				return i
			}
		}
	}
	return len(d.Products)
}

// Usable says whether new copies may be sent to the cluster.
func (c Cluster) Usable() bool { return c.Connected && c.AgentReady && !c.Cordoned && !c.Fenced }

// GlobalQueue is a queue's strategy and quota per cluster. Clusters keeps the spec's order.
type GlobalQueue struct {
	Name          string
	StrictFIFO    bool
	MaxCandidates int
	Clusters      []string
	Quota         map[string]Resources // cluster name -> quota; resources not listed are not limited
	// Cohort is the group of queues that lend one another the quota they leave unused, cluster by
	// cluster; empty for none.
	Cohort string
	// BorrowingLimit and LendingLimit, per cluster name, cap what the queue may use beyond its quota
	// there and what of its unused quota it lends; a resource not listed is not capped.
	BorrowingLimit map[string]Resources
	LendingLimit   map[string]Resources
	// Weight is its fair-sharing weight among the queues and sub-cohorts of its cohort; nil is 1.
	Weight *int32
	// Scores rank the clusters that pass every filter (none: Headroom); PreferredClusters orders
	// clusters for the Preference score.
	Scores            []WeightedScore
	PreferredClusters []string
	// Incremental sends a workload's copies to one cluster first, and to one more each time every
	// cluster holding a copy said it cannot admit it now, up to MaxCandidates.
	Incremental bool
	// Preemption says which admitted workloads its pending ones may preempt.
	Preemption gantry.PreemptionPolicy
}

// Phase of a workload on the hub.
type Phase int32

const (
	// Pending: no winner, maybe nominated.
	Pending Phase = iota
	// Admitted: a winner is recorded and the job is not finished; it uses quota on the winner.
	Admitted
	// Finished: the job ended; it uses no quota.
	Finished
)

// Workload is what the dispatcher knows of one hub Workload.
type Workload struct {
	Key string // namespace/name
	// GlobalQueue is, for a pending workload, the one its Queue names now: it is dispatched under it. An
	// admitted one uses the quota of the GlobalQueue its nomination was recorded under, whatever its
	// Queue names now, for as long as its job may run.
	GlobalQueue string
	// QueueProblem, for a pending workload without a GlobalQueue, says why its Queue gives it none.
	QueueProblem *QueueProblem
	Priority     int32
	Phase        Phase
	Created      time.Time
	Requests     Resources // total over all pods of all pod sets
	GPU          GPUDemand
	// PendingReason and PendingMessage are what its Pending condition says, as recorded for its current
	// spec (empty when it says nothing of it), so that a pass proposes a verdict only when it differs.
	PendingReason  string
	PendingMessage string

	Epoch     int64
	Nominated []string
	// NominatedQueue is the GlobalQueue the current nomination was recorded under; empty when not known
	// (recorded before the field existed), which counts as GlobalQueue. A nomination under another
	// GlobalQueue than GlobalQueue is void: it neither reserves nor wins, and is replaced.
	NominatedQueue string
	Winner         string
	// Refused is what clusters said against it; nil when none did, as for most workloads.
	Refused *Refusals
	// rejected are the clusters it may not go to in this pass, each with why: Plan works them out on
	// its own copy of the workload (rejectedClusters), never on the snapshot's.
	rejected map[string]string
	// DataLocation are the cluster labels where its data lives (NearData ranks clusters by them).
	DataLocation []gantry.LabelTerm
	// CheckpointedOn is, for a workload taken back after it saved work, the cluster of that run: its
	// checkpoint is near there, and NearData ranks clusters sharing that cluster's location first.
	CheckpointedOn string
	// Kind of its job ("" is a batch Job): clusters that cannot run it are left out as if they rejected it.
	Kind string

	// Stopped: its owner stopped it (spec.stopped). Pending, it is not dispatched and its nomination is
	// withdrawn; admitted, the Workload controller takes it back from its winner.
	Stopped bool

	// Run is, for an admitted workload, its run on the winner as its Workload records it (its start and
	// last checkpoint); nil when not known. CheckpointInterval is how often its job says it checkpoints.
	// They tell how much work a preemption would lose (AtRisk).
	Run                *gantry.Run
	CheckpointInterval *metav1.Duration

	// PreemptedFor is, for an admitted workload the hub is taking back from its winner to make room for
	// another, that other's key; it holds its quota until its Job is gone.
	PreemptedFor string

	// Copies of the current epoch as observed on the workers.
	Copies []Copy
}

// Refusals are what clusters said against a workload.
type Refusals struct {
	// RejectedAt are the clusters whose agents said they cannot run it, each with when the hub recorded
	// it: it is not sent there again for Snapshot.RejectionTTL.
	RejectedAt map[string]time.Time
	// EvictedFrom are the clusters it was taken back from other than by a preemption: after
	// MaxEvictionsPerCluster times it is not sent there again.
	EvictedFrom map[string]Evictions
}

// Copy is the observed state of one worker copy of the workload's current epoch.
type Copy struct {
	Cluster    string
	Admitted   bool
	AdmittedAt time.Time
	// Rejected: the cluster's agent says it can never run the workload (Reason, Message say why).
	Rejected bool
	// Waiting: the cluster's agent cannot admit it now (Reason, Message say why).
	Waiting bool
	// Expired: the cluster's agent released the copy's room because the hub did not confirm it in time;
	// only a new epoch's copy is admitted there again.
	Expired bool
	Reason  string
	Message string
	// WouldFitWithout, on a waiting copy, names the admitted workloads of the cluster whose going would
	// let it fit now, as its agent worked out.
	WouldFitWithout []string
}

// nominationVoid says whether the workload's nomination was made under another GlobalQueue than the
// one it is dispatched under now.
func (w *Workload) nominationVoid() bool {
	return w.Epoch > 0 && w.NominatedQueue != "" && w.NominatedQueue != w.GlobalQueue
}

// Snapshot is the hub state the dispatcher decides over.
type Snapshot struct {
	Clusters map[string]Cluster
	Queues   map[string]*GlobalQueue
	// Cohorts are the Cohort objects by name; a cohort a queue names without an object is a root with
	// no quota of its own.
	Cohorts   map[string]*Cohort
	Workloads []*Workload
	// Tallies count admitted workloads that Workloads leaves out, summed by GlobalQueue, cluster and
	// priority, so that a pass over a fleet of running jobs costs what changed, not what runs; Tallied
	// are those same workloads, for the preemptions that look for victims among them one by one. Each
	// is admitted, uses the quota of its GlobalQueue and is not being preempted.
	Tallies []Tally
	Tallied []*Workload
	// Cuts are, by GlobalQueue, tails of waiting workloads that Workloads leaves out (see Cut).
	Cuts map[string]Cut

	// Now is when the pass runs: rejections lapse, and what passes proposed is held back, by it.
	Now time.Time
	// RejectionTTL is how long a cluster's rejection of a workload holds (0: DefaultRejectionTTL).
	RejectionTTL time.Duration
	// Proposed are the waiting verdicts the last pass held back (its Result.Proposed), by workload key;
	// AgentNews when each workload's Pending message last took in its agents' explanations (the
	// Result.AgentNews of passes before). See VerdictSteadyTime and AgentNewsInterval.
	Proposed  map[string]Proposal
	AgentNews map[string]time.Time
}

// Tally is what admitted workloads of one GlobalQueue and one priority use on one cluster, together.
type Tally struct {
	GlobalQueue string
	Cluster     string
	Priority    int32
	// Requests are their requests summed; Workloads how many they are.
	Requests  Resources
	Workloads int
}

// Add counts the admitted workload in the tally (sign 1) or takes it out of it (sign -1). The tally's
// Requests are its own: a tally made from a copy must be given a map of its own first.
func (t *Tally) Add(w *Workload, sign int64) {
	if t.Requests == nil {
		t.Requests = Resources{}
	}
	for r, v := range w.Requests {
		t.Requests[r] += sign * v
		if t.Requests[r] == 0 {
			delete(t.Requests, r)
		}
	}
	t.Workloads += int(sign)
}

// Talliable says whether a snapshot may count the workload in a Tally rather than list it.
func (w *Workload) Talliable() bool {
	return w.Phase == Admitted && w.PreemptedFor == "" && w.GlobalQueue != "" && w.Winner != ""
}

// AtRisk is the GPU time, in GPU-seconds, the admitted workload would lose if it stopped at now: its
// GPUs times the time since its work was last saved (gantry.Run.Saved: its last checkpoint, recorded or
// reckoned by its interval, else its run's start). Without a known run, since its creation.
func (w *Workload) AtRisk(now time.Time) float64 {
	saved := w.Created
	if w.Run != nil {
		saved = w.Run.Saved(now, w.CheckpointInterval)
	}
	return float64(w.Requests[gantry.GPUResource]) / 1000 * max(now.Sub(saved).Seconds(), 0)
}

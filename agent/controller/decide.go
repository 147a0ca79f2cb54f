package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/agent/admission"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/expectations"
	"github.com/gantry-dev/gantry/jobkind"
)

// maxConditionMessage is the longest message a metav1.Condition accepts.
const maxConditionMessage = 32768

// maxPlacementEntries is how many assignments an Admitted message lists before it summarises the rest.
const maxPlacementEntries = 6

// Input is what one pass decides on: the agent's caches and its memory of earlier passes. Decide reads it
// and changes nothing in it.
type Input struct {
	Nodes []*corev1.Node
	Pods  []*corev1.Pod
	// Copies are the Workload copies in the cluster (objects without gantry.dev/workload-uid are skipped).
	Copies []*gantryv1beta1.Workload
	// Jobs holds, for a copy, the Job with the copy's namespace and name when there is one.
	// It is keyed by the copy's namespace and name, and of the copy's kind (jobkind.Of).
	Jobs map[types.NamespacedName]client.Object
	// Kinds are the kinds of jobs the cluster serves; nil serves every kind.
	Kinds map[gantryv1beta1.JobKind]bool
	// PriorityClasses are the names of the cluster's PriorityClasses, RuntimeClasses its RuntimeClasses
	// by name; nil when not known, and then not judged.
	PriorityClasses map[string]bool
	RuntimeClasses  map[string]*nodev1.RuntimeClass
	// Quotas are the cluster's ResourceQuotas; a copy is admitted only within what those of its
	// namespace leave. Nil judges none.
	Quotas []*corev1.ResourceQuota
	// Placements are the reservations of admitted copies from earlier passes, by copy UID. A copy
	// admitted without a known placement (by an earlier agent process) is placed again.
	Placements map[types.UID]admission.Placement
	// Placing are the admitted copies whose pods were not all bound at the last pass (Plan.Placing), with
	// when they were admitted; nil is none.
	Placing map[types.UID]time.Time
	// Assumed are the Admitted conditions earlier passes wrote, by copy UID, with the copy's version
	// each write replaced: while a copy still shows that version, the cache is behind the write and the
	// pass goes by the condition written. Decide only reads it; nil is empty.
	Assumed *expectations.Written[types.UID, metav1.Condition]
	// Now stamps condition transitions.
	Now time.Time
	// ReservationTTL is how long an admitted copy holds its room while no Job of its own exists; 0 is
	// for ever.
	ReservationTTL time.Duration
	// StarvationTimeout is how long a copy that does not fit may be passed by later ones before the
	// nodes it could use are held for it; 0 never holds them.
	StarvationTimeout time.Duration
	// PlacementTimeout is how long after its Job was created an admitted copy may still have pods not
	// placed on nodes before the agent gives it up; 0 waits for ever.
	PlacementTimeout time.Duration
	// HubLease is the hub's lease on this cluster (ReadHubLease).
	HubLease HubLease
	// PodGroups are the PodGroups Gantry made in the cluster, by namespace and name; nil when the
	// cluster does not serve the PodGroup API, and then no gang gets one.
	PodGroups map[types.NamespacedName]*schedulingv1beta1.PodGroup
	// Kueue is what the cluster's Kueue holds; nil when the cluster does not run Kueue. A copy whose
	// WorkerCluster sends its jobs through a LocalQueue is admitted only within what that queue's
	// ClusterQueue has left.
	Kueue *Kueue
}

// Plan is what one pass decided.
type Plan struct {
	// Snapshot is the cluster with bound pods counted and every admitted copy reserved, the copies
	// admitted by this plan included.
	Snapshot *admission.Snapshot
	// Updates are the conditions to write: only those that differ from what the copy shows.
	Updates []Update
	// Suspend are the hub's Jobs to suspend because the hub's lease lapsed (policy Fence).
	Suspend []client.Object
	// PodGroups are the PodGroups of admitted copies to make again (gangMissing); Loosen those to lower
	// to a quorum of one (gangToLoosen).
	PodGroups []*schedulingv1beta1.PodGroup
	Loosen    []*schedulingv1beta1.PodGroup
	// Placements are the reservations of the admitted copies, by copy UID, for the next pass.
	Placements map[types.UID]admission.Placement
	// Placing are the admitted copies whose room is held because their pods are not all bound, with when
	// they were admitted: by this process's clock when it admitted them, else their condition's time.
	Placing map[types.UID]time.Time
	// Placed are the copies of in.Placing whose pods are all bound now, with the time since admission.
	Placed map[types.UID]time.Duration
	// Admitted is what the admitted copies ask for, by their requests in milli-units: those this plan
	// keeps and those it admits, not those whose job finished or that it gives up. The report says it,
	// so that the hub can tell the admissions the report's free capacity does not show yet.
	Admitted map[corev1.ResourceName]int64
	// Wake is how soon a pass must run again for a timeout to be noticed on time (placement timeout,
	// reservation TTL, starvation timeout); 0 when none is pending.
	Wake time.Duration
	// holders are the admitted copies whose Job runs here: what a waiting copy's what-if may take away.
	holders []admission.Holder
}

// MaxWhatIfsPerPass bounds how many copies that do not fit one pass asks the what-if for (the first in
// admission order): each may fit the gang several times.
const MaxWhatIfsPerPass = 4

// wakeAt asks for a pass at t, if t is still to come.
func (p *Plan) wakeAt(now, t time.Time) {
	if d := t.Sub(now); d > 0 && (p.Wake == 0 || d < p.Wake) {
		p.Wake = d
	}
}

// Update sets a condition of one copy: Admitted, or Suspended.
type Update struct {
	// Copy is the copy as read from the cache; it must not be modified.
	Copy      *gantryv1beta1.Workload
	Condition metav1.Condition
	// Placement is what the snapshot reserved for the copy when Condition admits it.
	Placement admission.Placement
	// WouldFitWithout, for a copy that does not fit now, names the admitted copies whose going would
	// let it fit (status.wouldFitWithout).
	WouldFitWithout []string
	// PodGroup, when Condition admits the copy, is the PodGroup its gang's pods join (GangPodGroup),
	// made before the admission is written; nil for none.
	PodGroup *schedulingv1beta1.PodGroup
}

// Admits tells whether u admits its copy.
func (u Update) Admits() bool {
	return u.Condition.Type == gantryv1beta1.WorkloadAdmitted && u.Condition.Status == metav1.ConditionTrue
}

// admission tells whether u sets the Admitted condition (and with it the copy's admission).
func (u Update) admission() bool { return u.Condition.Type == gantryv1beta1.WorkloadAdmitted }

// Result names the outcome for metrics: "Admitted", or the reason the copy was not admitted.
func (u Update) Result() string {
	if u.Admits() {
		return "Admitted"
	}
	return u.Condition.Reason
}

// Decide runs one admission pass in memory.
//
// It builds a snapshot of the nodes, counts the requests of every bound, non-terminal pod, and reserves
// for each admitted copy the pods of its gang that are neither bound nor terminated (nothing once the
// copy's Job has finished), so that a pod is never counted both as usage and as reservation. Then it
// admits, in admission order, the copies that are not admitted yet and fit; the others get the reason
// they do not. A copy whose namespace and name are taken by a Job that Gantry did not create for it is
// rejected with JobNameConflict, unless Gantry created that Job for an earlier Workload of the same
// name: the copy then waits with PreviousJobPresent, reserving nothing, until the hub has removed it.
// Copies being deleted are ignored. An admitted copy stays admitted, and a copy rejected for good
// (NeverFits, NoEligibleNode, JobNameConflict) stays rejected until its spec changes.
func Decide(in Input) Plan {
	nodes := make([]admission.Node, 0, len(in.Nodes))
	for _, n := range in.Nodes {
		nodes = append(nodes, admission.NodeFromCore(n))
	}
	snap := admission.NewSnapshot(nodes)
	podsByCopy := map[string][]*corev1.Pod{}
	leaving := admission.Holder{Leaving: true} // terminating pods, free for what-ifs
	for _, pod := range in.Pods {
		if UsesNode(pod) {
			snap.AddUsage(pod.Spec.NodeName, PodRequests(pod))
		}
		if UsesNode(pod) && pod.DeletionTimestamp != nil {
			leaving.Pods = append(leaving.Pods, admission.BoundPod{Node: pod.Spec.NodeName, Requests: PodRequests(pod)})
		}
		if uid, ok := pod.Labels[gantryv1beta1.WorkloadUIDLabel]; ok {
			k := pod.Namespace + "/" + uid
			podsByCopy[k] = append(podsByCopy[k], pod)
		}
	}
	plan := Plan{
		Snapshot:   snap,
		Placements: map[types.UID]admission.Placement{},
		Placing:    map[types.UID]time.Time{},
		Placed:     map[types.UID]time.Duration{},
		Admitted:   map[corev1.ResourceName]int64{},
	}
	if len(leaving.Pods) > 0 {
		plan.holders = append(plan.holders, leaving)
	}
	cs := plan.sortCopies(in)
	plan.holdAdmitted(in, cs, podsByCopy, nodes)
	plan.admitPending(in, cs, quotasLeft(in, cs, podsByCopy), kueueLeft(in, cs))
	return plan
}

// offered says whether a pending copy is offered for admission in this pass, and sets the condition of
// one that is not and has something to say.
func (p *Plan) offered(in Input, cur *metav1.Condition, c *gantryv1beta1.Workload, job client.Object) bool {
	switch {
	case cur != nil && gantryv1beta1.RejectsCluster(cur.Reason) && cur.ObservedGeneration == c.Generation:
		// The hub took it as the cluster's final answer; only a new spec is decided again.
		return false
	case cur != nil && cur.Reason == gantryv1beta1.ReasonPlacementTimeout && cur.ObservedGeneration == c.Generation:
		// Given up: the hub removes the Job and dispatches the workload again in a new epoch.
		return false
	case cur != nil && cur.Reason == gantryv1beta1.ReasonReservationExpired && (job == nil || !OwnsJob(c, job)):
		// Admitting it again would hold the room again for a hub that does not answer; a new
		// dispatch epoch brings a fresh copy. Should the hub create its Job after all, it is fitted.
		return false
	case job != nil && !OwnsJob(c, job):
		p.set(c, cur, jobInTheWay(c, job, in.Now), nil)
		return false
	}
	if k := jobkind.Of(c); in.Kinds != nil && !in.Kinds[k.Name()] {
		p.set(c, cur, condition(c, metav1.ConditionFalse, gantryv1beta1.ReasonKindNotServed,
			fmt.Sprintf("this cluster does not serve %s (%s): its CRD and controller are not installed here", k.Name(), k.GroupVersionKind().GroupVersion()), in.Now), nil)
		return false
	}
	if why := missingClass(in, c); why != "" {
		p.set(c, cur, condition(c, metav1.ConditionFalse, gantryv1beta1.ReasonClassNotFound, why, in.Now), nil)
		return false
	}
	return true
}

// withinQuota says whether the quotas of the copy's namespace hold its demand now; if not, the copy is
// rejected (NamespaceQuotaTooSmall: a quota's hard limit alone is below it) or waits
// (InsufficientResources), with the quota's words.
func (p *Plan) withinQuota(in Input, cur *metav1.Condition, c *gantryv1beta1.Workload, nq namespaceQuotas, demand map[corev1.ResourceName]int64) bool {
	fits, never, msg := nq.judge(c.Namespace, demand)
	switch {
	case fits:
		return true
	case never:
		p.set(c, cur, condition(c, metav1.ConditionFalse, gantryv1beta1.ReasonNamespaceQuotaTooSmall, msg, in.Now), nil)
	default:
		p.setWaiting(c, cur, condition(c, metav1.ConditionFalse, gantryv1beta1.ReasonInsufficientResources, msg, in.Now), nil)
	}
	return false
}

// withinKueue says whether the ClusterQueue behind the copy's LocalQueue holds it now, with what it
// would take there; if not, the copy is rejected (KueueQuotaTooSmall: it never could, or the cluster
// runs no Kueue) or waits (KueueQueueFull), with the reason in Kueue's terms.
func (p *Plan) withinKueue(in Input, cur *metav1.Condition, c *gantryv1beta1.Workload, kq *kueueQuotas) (kueueCharge, bool) {
	if kq == nil {
		p.set(c, cur, condition(c, metav1.ConditionFalse, gantryv1beta1.ReasonKueueQuotaTooSmall,
			fmt.Sprintf("its WorkerCluster sends its jobs here through Kueue's LocalQueue %s, but this cluster serves no Kueue",
				c.Annotations[gantryv1beta1.KueueLocalQueueAnnotation]), in.Now), nil)
		return kueueCharge{}, false
	}
	charge, fits, never, msg := kq.judge(c)
	switch {
	case fits:
		return charge, true
	case never:
		p.set(c, cur, condition(c, metav1.ConditionFalse, gantryv1beta1.ReasonKueueQuotaTooSmall, msg, in.Now), nil)
	default:
		p.setWaiting(c, cur, condition(c, metav1.ConditionFalse, gantryv1beta1.ReasonKueueQueueFull, msg, in.Now), nil)
	}
	return kueueCharge{}, false
}

// missingClass names the first PriorityClass or RuntimeClass a pod set of c names that the cluster does
// not have, whose pods its API server would refuse; empty when there is none, or the classes are not
// known.
func missingClass(in Input, c *gantryv1beta1.Workload) string {
	for _, ps := range c.Spec.PodSets {
		if name := ps.PriorityClassName; name != "" && in.PriorityClasses != nil && !in.PriorityClasses[name] {
			return fmt.Sprintf("pod set %q names PriorityClass %q, which this cluster does not have: its pods would be refused here", ps.Name, name)
		}
		if name := ps.RuntimeClassName; name != "" && in.RuntimeClasses != nil && in.RuntimeClasses[name] == nil {
			return fmt.Sprintf("pod set %q names RuntimeClass %q, which this cluster does not have: its pods would be refused here", ps.Name, name)
		}
	}
	return ""
}

// copyStates are the copies a pass decides on, by what their Admitted condition says.
type copyStates struct {
	current  map[string]*metav1.Condition // by gang key: the Admitted condition, or the one assumed
	byKey    map[string]*gantryv1beta1.Workload
	admitted []*gantryv1beta1.Workload
	pending  []*gantryv1beta1.Workload
}

// sortCopies splits the copies not being deleted into admitted and pending ones, in key order, going by
// the writes of earlier passes where the cache does not show them yet.
func (p *Plan) sortCopies(in Input) copyStates {
	// Each key built once: a pass sorts every copy of the cluster.
	type keyed struct {
		key string
		c   *gantryv1beta1.Workload
	}
	copies := make([]keyed, len(in.Copies))
	for i, c := range in.Copies {
		copies[i] = keyed{GangKey(c), c}
	}
	slices.SortFunc(copies, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	cs := copyStates{
		current: make(map[string]*metav1.Condition, len(copies)),
		byKey:   make(map[string]*gantryv1beta1.Workload, len(copies)),
	}
	for _, k := range copies {
		key, c := k.key, k.c
		if !IsCopy(c) || c.DeletionTimestamp != nil {
			continue
		}
		cs.byKey[key] = c
		cond := meta.FindStatusCondition(c.Status.Conditions, gantryv1beta1.WorkloadAdmitted)
		if in.Assumed != nil {
			if a, behind := in.Assumed.Behind(c.UID, c.ResourceVersion); behind {
				cond = &a
			}
		}
		cs.current[key] = cond
		if cond != nil && cond.Status == metav1.ConditionTrue {
			cs.admitted = append(cs.admitted, c)
		} else {
			cs.pending = append(cs.pending, c)
		}
	}
	return cs
}

// holdAdmitted reserves what admitted copies still need, and gives up those whose reservation expired
// or whose pods were not placed in time.
func (p *Plan) holdAdmitted(in Input, cs copyStates, podsByCopy map[string][]*corev1.Pod, nodes []admission.Node) {
	var refit []admission.Gang
	for _, c := range cs.admitted {
		job := in.Jobs[client.ObjectKeyFromObject(c)]
		owned := job != nil && OwnsJob(c, job)
		if owned && JobFinished(c, job) {
			continue
		}
		fenced := owned && p.fence(in, c, job)
		cur := cs.current[GangKey(c)]
		if !owned && in.ReservationTTL > 0 && in.Now.Sub(cur.LastTransitionTime.Time) > in.ReservationTTL {
			// The hub never confirmed: it is gone, cut off, or chose another cluster and could not
			// withdraw. The room goes back to the other copies.
			p.set(c, cur, condition(c, metav1.ConditionFalse, gantryv1beta1.ReasonReservationExpired,
				fmt.Sprintf("admitted %s ago, but no Job for it was created in this cluster within the reservation TTL (%s); its room is released until the hub dispatches it again",
					in.Now.Sub(cur.LastTransitionTime.Time).Round(time.Second), in.ReservationTTL), in.Now), nil)
			continue
		}
		if !owned && in.ReservationTTL > 0 {
			p.wakeAt(in.Now, cur.LastTransitionTime.Add(in.ReservationTTL+time.Second))
		}
		copyPods := podsByCopy[c.Namespace+"/"+c.Labels[gantryv1beta1.WorkloadUIDLabel]]
		progress := ProgressOf(c, copyPods)
		// A Job the fence stopped because the hub's lease lapsed has no pods on purpose: it keeps its
		// room. One the worker's Kueue holds suspended waits for Kueue, which the placement timeout bounds.
		placing := owned && !fenced && in.PlacementTimeout > 0 && !progress.Done()
		var since time.Time
		if placing {
			since, placing = placementClock(c, placingSince(c, job, in.Now), copyPods, progress)
		}
		if placing {
			p.wakeAt(in.Now, since.Add(in.PlacementTimeout+time.Second))
		}
		if placing && in.Now.Sub(since) > in.PlacementTimeout {
			// The scheduler did not find the room this agent counted (something outside the agent's
			// view took it). Give the gang up, so that the hub removes the Job and dispatches it again.
			p.set(c, cur, condition(c, metav1.ConditionFalse, gantryv1beta1.ReasonPlacementTimeout,
				placementTimeoutMessage(c, progress, copyPods, cmp.Or(kueueVerdict(in, job), gangVerdict(in, c)), in.Now.Sub(since)), in.Now), nil)
			continue
		}
		p.track(in, c, cur, progress)
		p.countAdmitted(c)
		if pg := gangMissing(in, c, progress); pg != nil {
			p.PodGroups = append(p.PodGroups, pg)
		}
		if pg := gangToLoosen(in, c, progress, copyPods); pg != nil {
			p.Loosen = append(p.Loosen, pg)
		}
		if owned {
			p.holders = append(p.holders, holderOf(c, copyPods))
		}
		if pl, ok := in.Placements[c.UID]; ok {
			p.Placements[c.UID] = pl
			if !progress.Done() {
				p.Snapshot.Reserve(GangKey(c), TrimPlacement(pl, progress))
			}
			continue
		}
		if !progress.Done() {
			refit = append(refit, remainingGang(heldToAdmission(withRuntimeClasses(GangFromCopy(c), c, in.RuntimeClasses), c.Status.Admission), progress))
		}
	}
	if len(refit) > 0 {
		p.placeAgain(refit, cs.byKey, nodes)
	}
}

// countAdmitted adds what an admitted copy asks for to the plan's Admitted.
func (p *Plan) countAdmitted(c *gantryv1beta1.Workload) { c.Spec.AddMilliRequests(p.Admitted) }

// track keeps an admitted copy whose room is held in Placing, and moves one whose pods are now all
// bound to Placed, with the time its placement took.
func (p *Plan) track(in Input, c *gantryv1beta1.Workload, cur *metav1.Condition, progress Progress) {
	admitted, known := in.Placing[c.UID]
	switch {
	case progress.Done() && known:
		p.Placed[c.UID] = in.Now.Sub(admitted)
	case progress.Done():
	case known:
		p.Placing[c.UID] = admitted
	default:
		p.Placing[c.UID] = cur.LastTransitionTime.Time
	}
}

// admitPending admits, in admission order, the pending copies that fit, and tells the others why not.
// A copy the quotas of its namespace leave no room for is not offered; two admitted in one pass that
// the quotas hold only one of keep the first in admission order.
func (p *Plan) admitPending(in Input, cs copyStates, nq namespaceQuotas, kq *kueueQuotas) {
	gangs := make([]admission.Gang, 0, len(cs.pending))
	demands := make(map[string]map[corev1.ResourceName]int64, len(cs.pending))
	throughKueue := map[string]bool{}
	for _, c := range cs.pending {
		job := in.Jobs[client.ObjectKeyFromObject(c)]
		if !p.offered(in, cs.current[GangKey(c)], c, job) {
			continue
		}
		if len(nq[c.Namespace]) > 0 { // most namespaces have no quota: nothing to count
			demand := quotaDemand(c, in.RuntimeClasses, job != nil, nil)
			if !p.withinQuota(in, cs.current[GangKey(c)], c, nq, demand) {
				continue
			}
			demands[GangKey(c)] = demand
		}
		if c.Annotations[gantryv1beta1.KueueLocalQueueAnnotation] != "" {
			if _, ok := p.withinKueue(in, cs.current[GangKey(c)], c, kq); !ok {
				continue
			}
			throughKueue[GangKey(c)] = true
		}
		g := withRuntimeClasses(GangFromCopy(c), c, in.RuntimeClasses)
		g.Preempting = preemptionUnderWay(in, cs, c)
		gangs = append(gangs, g)
	}
	whatIfs := MaxWhatIfsPerPass
	gangIndex := make(map[string]int, len(gangs)) // decisions come in admission order, not in gangs'
	for i, g := range gangs {
		gangIndex[g.Key] = i
	}
	for _, d := range p.Snapshot.AdmitWithOptions(gangs, admission.AdmitOptions{Now: in.Now, StarvationTimeout: in.StarvationTimeout}) {
		c := cs.byKey[d.Key]
		if d.Admitted && demands[d.Key] != nil && !p.withinQuota(in, cs.current[d.Key], c, nq, demands[d.Key]) {
			p.Snapshot.Release(d.Key)
			continue
		}
		var charge kueueCharge
		if d.Admitted && throughKueue[d.Key] {
			// Judged again: the copies admitted before it in this pass took their part.
			var ok bool
			if charge, ok = p.withinKueue(in, cs.current[d.Key], c, kq); !ok {
				p.Snapshot.Release(d.Key)
				continue
			}
		}
		if d.Admitted {
			nq.charge(c.Namespace, demands[d.Key])
			kq.charge(charge)
			p.Placements[c.UID] = d.Placement
			p.Placing[c.UID] = in.Now
			p.countAdmitted(c)
			p.admit(in, c, cs.current[d.Key], d.Placement)
			continue
		}
		var without []string
		switch g := &gangs[gangIndex[d.Key]]; {
		case g.Preempting:
			without = c.Status.WouldFitWithout // kept while what it named leaves, so its room stays held
		case d.Unfit.Reason == admission.InsufficientResources && whatIfs > 0 && len(p.holders) > 0:
			whatIfs--
			without = p.Snapshot.WouldFitWithout(*g, p.holders)
		}
		p.setWaiting(c, cs.current[d.Key], condition(c, metav1.ConditionFalse, unfitReason(d.Unfit.Reason),
			d.Unfit.Message, in.Now), without)
		if d.Unfit.Reason == admission.InsufficientResources && in.StarvationTimeout > 0 {
			p.wakeAt(in.Now, c.CreationTimestamp.Add(in.StarvationTimeout+time.Second))
		}
	}
}

// placeAgain reserves the gangs of copies admitted earlier whose placement is not known: where they fit
// now, or, when the cluster is overcommitted, where they would fit on empty nodes, so that their room is
// held even though it is taken.
func (p *Plan) placeAgain(gangs []admission.Gang, byKey map[string]*gantryv1beta1.Workload, nodes []admission.Node) {
	byGang := make(map[string]admission.Gang, len(gangs))
	for _, g := range gangs {
		byGang[g.Key] = g
	}
	var empty *admission.Snapshot
	for _, d := range p.Snapshot.Admit(gangs) {
		placement := d.Placement
		if !d.Admitted {
			if empty == nil {
				empty = admission.NewSnapshot(nodes)
			}
			var u *admission.Unfit
			if placement, u = empty.Fit(byGang[d.Key]); u != nil {
				// The nodes it was admitted to are gone: there is nothing left to hold.
				delete(p.Placing, byKey[d.Key].UID)
				continue
			}
			p.Snapshot.Reserve(d.Key, placement)
		}
		p.Placements[byKey[d.Key].UID] = placement
	}
}

// preemptionUnderWay says whether the hub is taking back a workload the copy's what-if named: its copy
// or its Job here is gone or going. The room it frees is then held for the copy (admission.Gang
// Preempting), not taken by smaller copies first.
func preemptionUnderWay(in Input, cs copyStates, c *gantryv1beta1.Workload) bool {
	for _, key := range c.Status.WouldFitWithout {
		v := cs.byKey[key]
		if v == nil {
			return true
		}
		job := in.Jobs[client.ObjectKeyFromObject(v)]
		if job == nil || !OwnsJob(v, job) || job.GetDeletionTimestamp() != nil {
			return true
		}
	}
	return false
}

// holderOf is an admitted copy as the what-if sees it: its bound pods (its reservation is under its key).
func holderOf(c *gantryv1beta1.Workload, pods []*corev1.Pod) admission.Holder {
	h := admission.Holder{Key: GangKey(c), Priority: c.Spec.Priority, CreationTime: c.CreationTimestamp.Time}
	for _, pod := range pods {
		if UsesNode(pod) && pod.DeletionTimestamp == nil { // terminating pods are leaving already
			h.Pods = append(h.Pods, admission.BoundPod{Node: pod.Spec.NodeName, Requests: PodRequests(pod)})
		}
	}
	return h
}

// setWaiting plans to write want as c's Admitted condition with what its what-if found, unless c
// already shows both. The write carries the what-if even when only the condition changed: a write of
// the Admitted condition replaces status.wouldFitWithout, and the hub preempts by it.
func (p *Plan) setWaiting(c *gantryv1beta1.Workload, cur *metav1.Condition, want metav1.Condition, without []string) {
	if slices.Equal(c.Status.WouldFitWithout, without) && shows(cur, want) {
		return
	}
	p.Updates = append(p.Updates, Update{Copy: c, Condition: want, WouldFitWithout: without})
}

// set plans to write want as c's Admitted condition, unless c already shows it (cur).
func (p *Plan) set(c *gantryv1beta1.Workload, cur *metav1.Condition, want metav1.Condition, placement admission.Placement) {
	if shows(cur, want) {
		return
	}
	p.Updates = append(p.Updates, Update{Copy: c, Condition: want, Placement: placement})
}

// admit plans to admit c with its placement and, where the cluster serves PodGroups, its gang's
// PodGroup, unless c already shows that admission (cur).
func (p *Plan) admit(in Input, c *gantryv1beta1.Workload, cur *metav1.Condition, placement admission.Placement) {
	want := condition(c, metav1.ConditionTrue, gantryv1beta1.ReasonFits, describePlacement(placement), in.Now)
	if shows(cur, want) {
		return
	}
	u := Update{Copy: c, Condition: want, Placement: placement}
	if in.PodGroups != nil {
		u.PodGroup = GangPodGroup(c)
	}
	p.Updates = append(p.Updates, u)
}

// shows tells whether the condition a copy shows (cur, nil for none) already says what want says.
func shows(cur *metav1.Condition, want metav1.Condition) bool {
	return cur != nil && cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message &&
		cur.ObservedGeneration == want.ObservedGeneration
}

func condition(c *gantryv1beta1.Workload, status metav1.ConditionStatus, reason, message string, now time.Time) metav1.Condition {
	return conditionOf(c, gantryv1beta1.WorkloadAdmitted, status, reason, message, now)
}

func conditionOf(c *gantryv1beta1.Workload, typ string, status metav1.ConditionStatus, reason, message string, now time.Time) metav1.Condition {
	if len(message) > maxConditionMessage {
		message = message[:maxConditionMessage-3] + "..."
	}
	return metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: c.Generation,
		LastTransitionTime: metav1.NewTime(now),
	}
}

// jobInTheWay is the answer to copy c while job, which Gantry did not create for it, holds its name.
//
// A Job labelled with another Workload UID was created by Gantry for an earlier Workload of the same
// name (its Job was deleted and submitted again while this cluster was cut off from the hub); the hub
// deletes it, so c waits with PreviousJobPresent, and the pass that the Job's deletion queues decides
// it again. Any other Job is someone else's, which Gantry never removes: c is rejected with
// JobNameConflict.
func jobInTheWay(c *gantryv1beta1.Workload, job client.Object, now time.Time) metav1.Condition {
	uid := c.Labels[gantryv1beta1.WorkloadUIDLabel]
	got, ok := job.GetLabels()[gantryv1beta1.WorkloadUIDLabel]
	kind := jobkind.Of(c).Name()
	if ok && got != "" {
		return condition(c, metav1.ConditionFalse, gantryv1beta1.ReasonPreviousJobPresent,
			fmt.Sprintf("%s %s/%s, created by Gantry for an earlier workload of the same name (its label %s is %q, not %q), is still in this cluster; the hub removes it, and this copy is decided again once it is gone",
				kind, job.GetNamespace(), job.GetName(), gantryv1beta1.WorkloadUIDLabel, got, uid), now)
	}
	detail := fmt.Sprintf("it lacks the label %s=%s", gantryv1beta1.WorkloadUIDLabel, uid)
	if ok {
		detail = fmt.Sprintf("its label %s is empty, not %q", gantryv1beta1.WorkloadUIDLabel, uid)
	}
	return condition(c, metav1.ConditionFalse, gantryv1beta1.ReasonJobNameConflict,
		fmt.Sprintf("%s %s/%s already exists in this cluster and was not created by Gantry for this workload (%s); it is left untouched",
			kind, job.GetNamespace(), job.GetName(), detail), now)
}

// placingSince is when the pods of an owned Job that is not suspended began to be placed, which the
// placement timeout counts from: the Job's creation, or, for a Job the hub resumed after the fence
// suspended it, the resumption (the pass that sees the copy still say Suspended is that moment).
func placingSince(c *gantryv1beta1.Workload, job client.Object, now time.Time) time.Time {
	since := job.GetCreationTimestamp().Time
	cur := meta.FindStatusCondition(c.Status.Conditions, gantryv1beta1.WorkloadSuspended)
	switch {
	case cur == nil:
	case cur.Status == metav1.ConditionTrue:
		return now
	case cur.LastTransitionTime.After(since):
		since = cur.LastTransitionTime.Time
	}
	return since
}

// placementClock is when the placement timeout of a copy whose pods are not all placed began to count,
// and whether it counts yet: from began (the job's placing) for the pod sets whose pods the job's
// controller creates at once, and for a deferred pod set from its first pod's creation, so that a
// RayJob's submitter, made once the Ray cluster is ready, is not timed while the cluster comes up. A
// deferred set none of whose pods exist yet is its controller's to start, not the scheduler's to place.
// The earliest clock of the pod sets with pods left counts.
func placementClock(c *gantryv1beta1.Workload, began time.Time, pods []*corev1.Pod, progress Progress) (time.Time, bool) {
	var since time.Time
	counting := false
	for _, ps := range c.Spec.PodSets {
		if progress.Left[ps.Name] <= 0 {
			continue
		}
		from, ok := began, true
		if ps.Deferred {
			from, ok = firstPodCreated(pods, ps.Name)
			if from.Before(began) {
				from = began
			}
		}
		if ok && (!counting || from.Before(since)) {
			since, counting = from, true
		}
	}
	return since, counting
}

// firstPodCreated is the creation time of the earliest of the pods of a pod set, if any exists.
func firstPodCreated(pods []*corev1.Pod, podSet string) (time.Time, bool) {
	var first time.Time
	found := false
	for _, pod := range pods {
		if pod.Labels[gantryv1beta1.PodSetLabel] != podSet {
			continue
		}
		if t := pod.CreationTimestamp.Time; !found || t.Before(first) {
			first, found = t, true
		}
	}
	return first, found
}

// placementTimeoutMessage says how much of the gang was not placed, and what the scheduler said of a pod
// that waits, for a person to act on.
func placementTimeoutMessage(c *gantryv1beta1.Workload, progress Progress, pods []*corev1.Pod, verdict string, waited time.Duration) string {
	var left, total int32
	for _, ps := range c.Spec.PodSets {
		left += progress.Left[ps.Name]
		total += ps.Count
	}
	msg := fmt.Sprintf("%d of %d pods not placed on a node %s after their placement began", left, total, waited.Round(time.Second))
	if verdict != "" {
		return msg + "; " + verdict // Kueue's word on the job, or the scheduler's on the gang as a whole
	}
	for _, pod := range pods {
		if pod.Spec.NodeName != "" || IsTerminal(pod) {
			continue
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Message != "" {
				return fmt.Sprintf("%s; pod %s: %s", msg, pod.Name, cond.Message)
			}
		}
	}
	return msg
}

// unfitReason is the Admitted reason for an admission.UnfitReason. A malformed gang can never fit.
func unfitReason(r admission.UnfitReason) string {
	switch r {
	case admission.NoEligibleNode:
		return gantryv1beta1.ReasonNoEligibleNode
	case admission.InsufficientResources:
		return gantryv1beta1.ReasonInsufficientResources
	case admission.HeldForStarvingGang:
		return gantryv1beta1.ReasonHeldForStarvingGang
	default:
		return gantryv1beta1.ReasonNeverFits
	}
}

// describePlacement renders a placement for a person, e.g.
// `2 pods on 2 nodes: "main" 1 on node-a, 1 on node-b`.
func describePlacement(p admission.Placement) string {
	pods := int32(0)
	nodes := map[string]bool{}
	for _, a := range p {
		pods += a.Count
		nodes[a.Node] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s on %d %s", pods, plural(int(pods), "pod", "pods"), len(nodes), plural(len(nodes), "node", "nodes"))
	set := ""
	for i, a := range p {
		if i == maxPlacementEntries {
			fmt.Fprintf(&b, ", and %d more", len(p)-i)
			break
		}
		switch {
		case i == 0:
			fmt.Fprintf(&b, ": %q ", a.PodSet)
		case a.PodSet != set:
			fmt.Fprintf(&b, "; %q ", a.PodSet)
		default:
			b.WriteString(", ")
		}
		set = a.PodSet
		fmt.Fprintf(&b, "%d on %s", a.Count, a.Node)
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

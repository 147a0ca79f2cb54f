package controller

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/kueue"
)

// Kueue is what the agent reads of the worker's Kueue: the queues a copy may go through, with their
// quota and what Kueue holds of it, and Kueue's Workloads by the UID of the job each stands for.
type Kueue struct {
	LocalQueues   map[types.NamespacedName]*kueue.LocalQueue
	ClusterQueues map[string]*kueue.ClusterQueue
	Cohorts       map[string]*kueue.Cohort
	Flavors       map[string]*kueue.ResourceFlavor
	Workloads     map[types.UID]*kueue.Workload
}

// flavorResource is one resource of one flavor, the unit Kueue keeps quota in.
type flavorResource struct {
	flavor   string
	resource corev1.ResourceName
}

type quotaOf struct {
	nominal         int64
	borrow, lending *int64
}

// quotaNode is a ClusterQueue or a Cohort in Kueue's accounting, in thousandths of each unit: the
// quota it has itself (nominal, with what it may borrow from its parent and lend to it), and, summed
// over its subtree, the quota it offers its parent and what of it is used.
type quotaNode struct {
	name     string
	parent   *quotaNode
	children []*quotaNode
	quota    map[flavorResource]quotaOf
	subtree  map[flavorResource]int64
	usage    map[flavorResource]int64
}

// kept is what the node's lending limit keeps from its parent.
func (n *quotaNode) kept(fr flavorResource) int64 {
	if l := n.quota[fr].lending; l != nil {
		return max(0, n.subtree[fr]-*l)
	}
	return 0
}

// available is what the node can still use of a flavor's resource: what it keeps unused, and what its
// parent has left, up to its borrowing limit.
func (n *quotaNode) available(fr flavorResource) int64 {
	if n.parent == nil {
		return n.subtree[fr] - n.usage[fr]
	}
	fromParent := n.parent.available(fr)
	if b := n.quota[fr].borrow; b != nil {
		inParent := n.subtree[fr] - n.kept(fr)
		usedInParent := max(0, n.usage[fr]-n.kept(fr))
		fromParent = min(fromParent, inParent-usedInParent+*b)
	}
	return max(0, n.kept(fr)-n.usage[fr]) + fromParent
}

// potential is what the node could use with nothing used anywhere: a demand above it never fits.
func (n *quotaNode) potential(fr flavorResource) int64 {
	if n.parent == nil {
		return n.subtree[fr]
	}
	p := n.kept(fr) + n.parent.potential(fr)
	if b := n.quota[fr].borrow; b != nil {
		p = min(p, n.subtree[fr]+*b)
	}
	return p
}

// use counts v more of the node's use, passing what its kept quota does not hold on to its parent.
func (n *quotaNode) use(fr flavorResource, v int64) {
	keptLeft := max(0, n.kept(fr)-n.usage[fr])
	n.usage[fr] += v
	if n.parent != nil && v > keptLeft {
		n.parent.use(fr, v-keptLeft)
	}
}

// kueueQuotas is Kueue's accounting of the worker's ClusterQueues and Cohorts, as their status shows
// it, with what this agent admitted that Kueue does not count yet charged to it.
type kueueQuotas struct {
	state   *Kueue
	queues  map[string]*quotaNode
	cohorts map[string]*quotaNode
}

func newKueueQuotas(st *Kueue) *kueueQuotas {
	kq := &kueueQuotas{state: st, queues: map[string]*quotaNode{}, cohorts: map[string]*quotaNode{}}
	for _, name := range slices.Sorted(maps.Keys(st.ClusterQueues)) {
		cq := st.ClusterQueues[name]
		n := &quotaNode{name: name, quota: quotasOf(cq.Spec.ResourceGroups), usage: reservedOf(cq)}
		kq.queues[name] = n
		if cq.Spec.CohortName != "" {
			kq.join(n, kq.cohort(cq.Spec.CohortName, map[string]bool{}))
		}
	}
	for _, n := range kq.cohorts {
		if n.parent == nil {
			sumSubtree(n)
		}
	}
	for _, n := range kq.queues {
		if n.parent == nil {
			sumSubtree(n)
		}
	}
	return kq
}

// cohort is the node of a Cohort, made with its ancestors on first use. A Cohort named but never
// created has no quota of its own; one in a cycle of parents is cut off from it (Kueue holds such a
// tree inactive).
func (kq *kueueQuotas) cohort(name string, seen map[string]bool) *quotaNode {
	if n, ok := kq.cohorts[name]; ok {
		return n
	}
	n := &quotaNode{name: name, quota: map[flavorResource]quotaOf{}}
	kq.cohorts[name] = n
	seen[name] = true
	if c := kq.state.Cohorts[name]; c != nil {
		n.quota = quotasOf(c.Spec.ResourceGroups)
		if p := c.Spec.ParentName; p != "" && !seen[p] {
			kq.join(n, kq.cohort(p, seen))
		}
	}
	return n
}

func (kq *kueueQuotas) join(child, parent *quotaNode) {
	child.parent = parent
	parent.children = append(parent.children, child)
}

// sumSubtree fills in, from the leaves up, the quota each node offers its parent and what of it its
// subtree uses.
func sumSubtree(n *quotaNode) {
	n.subtree = map[flavorResource]int64{}
	for fr, q := range n.quota {
		n.subtree[fr] = q.nominal
	}
	if n.usage == nil {
		n.usage = map[flavorResource]int64{}
	}
	for _, c := range n.children {
		sumSubtree(c)
		for fr, q := range c.subtree {
			n.subtree[fr] += q - c.kept(fr)
		}
		for fr, u := range c.usage {
			n.usage[fr] += max(0, u-c.kept(fr))
		}
	}
}

func quotasOf(groups []kueue.ResourceGroup) map[flavorResource]quotaOf {
	out := map[flavorResource]quotaOf{}
	for _, g := range groups {
		for _, f := range g.Flavors {
			for _, r := range f.Resources {
				q := quotaOf{nominal: r.NominalQuota.MilliValue()}
				if r.BorrowingLimit != nil {
					q.borrow = ptrTo(r.BorrowingLimit.MilliValue())
				}
				if r.LendingLimit != nil {
					q.lending = ptrTo(r.LendingLimit.MilliValue())
				}
				out[flavorResource{f.Name, r.Name}] = q
			}
		}
	}
	return out
}

func ptrTo(v int64) *int64 { return &v }

func reservedOf(cq *kueue.ClusterQueue) map[flavorResource]int64 {
	out := map[flavorResource]int64{}
	for _, f := range cq.Status.FlavorsReservation {
		for _, r := range f.Resources {
			out[flavorResource{f.Name, r.Name}] = r.Total.MilliValue()
		}
	}
	return out
}

// kueueDemand is what a copy's pods take of Kueue's quota, per pod set: Kueue counts each pod's
// requests (and one pods per pod where a ClusterQueue has quota for pods).
func kueueDemand(ps gantryv1beta1.PodSet) map[corev1.ResourceName]int64 {
	d := map[corev1.ResourceName]int64{corev1.ResourcePods: 1000 * int64(ps.Count)}
	for r, q := range ps.Requests {
		d[r] += int64(ps.Count) * q.MilliValue()
	}
	return d
}

// queueOf resolves a copy's LocalQueue to its ClusterQueue, or says why the copy cannot go through it
// now.
func (kq *kueueQuotas) queueOf(c *gantryv1beta1.Workload) (*kueue.ClusterQueue, string) {
	name := c.Annotations[gantryv1beta1.KueueLocalQueueAnnotation]
	lq := kq.state.LocalQueues[types.NamespacedName{Namespace: c.Namespace, Name: name}]
	switch {
	case lq == nil:
		return nil, fmt.Sprintf("Kueue's LocalQueue %s does not exist in namespace %s of this cluster", name, c.Namespace)
	case stopped(lq.Spec.StopPolicy):
		return nil, fmt.Sprintf("Kueue's LocalQueue %s is stopped (stopPolicy %s)", name, *lq.Spec.StopPolicy)
	}
	cq := kq.state.ClusterQueues[lq.Spec.ClusterQueue]
	switch {
	case cq == nil:
		return nil, fmt.Sprintf("the ClusterQueue %s of Kueue's LocalQueue %s does not exist", lq.Spec.ClusterQueue, name)
	case stopped(cq.Spec.StopPolicy):
		return nil, fmt.Sprintf("Kueue's ClusterQueue %s is stopped (stopPolicy %s)", cq.Name, *cq.Spec.StopPolicy)
	}
	if a := meta.FindStatusCondition(cq.Status.Conditions, kueue.ClusterQueueActive); a != nil && a.Status == metav1.ConditionFalse {
		return nil, fmt.Sprintf("Kueue's ClusterQueue %s is inactive: %s", cq.Name, a.Message)
	}
	return cq, ""
}

func stopped(policy *string) bool { return policy != nil && *policy != kueue.StopPolicyNone }

// kueueCharge is what a copy takes of a ClusterQueue's quota, per flavor and resource.
type kueueCharge struct {
	queue   string
	amounts map[flavorResource]int64
}

// judge says whether the copy's pods fit what the ClusterQueue behind its LocalQueue has left now, by
// Kueue's accounting: for each pod set and resource group, the first flavor in the queue's order that
// matches the pods' node selector and holds them, as Kueue tries flavors. Never: no flavor could hold
// them even with nothing used (or the queue has no quota for a resource they request). The charge is
// of the flavors chosen, or, where none holds them, of the first that matches: the best guess of what
// Kueue will count once it admits the job.
func (kq *kueueQuotas) judge(c *gantryv1beta1.Workload) (charge kueueCharge, fits, never bool, msg string) {
	cq, why := kq.queueOf(c)
	if cq == nil {
		return kueueCharge{}, false, false, why
	}
	node := kq.queues[cq.Name]
	charge = kueueCharge{queue: cq.Name, amounts: map[flavorResource]int64{}}
	fits = true
	for _, ps := range c.Spec.PodSets {
		demand := kueueDemand(ps)
		if r, ok := uncovered(cq, demand); ok {
			return charge, false, true, fmt.Sprintf("Kueue's ClusterQueue %s has no quota for %s, which pod set %q requests", cq.Name, r, ps.Name)
		}
		for _, g := range cq.Spec.ResourceGroups {
			need := map[corev1.ResourceName]int64{}
			for _, r := range g.CoveredResources {
				if demand[r] > 0 {
					need[r] = demand[r]
				}
			}
			if len(need) == 0 {
				continue
			}
			flavor, ok, no, why := kq.pickFlavor(node, cq.Name, g, ps, need, charge.amounts)
			if !ok && fits {
				fits, never, msg = false, no, why
			}
			for r, v := range need {
				if flavor != "" {
					charge.amounts[flavorResource{flavor, r}] += v
				}
			}
		}
	}
	return charge, fits, never, msg
}

// uncovered is a resource the pod set requests that no resource group of the queue covers; Kueue never
// admits such a job. Pods count only where a group covers them.
func uncovered(cq *kueue.ClusterQueue, demand map[corev1.ResourceName]int64) (corev1.ResourceName, bool) {
	for _, r := range slices.Sorted(maps.Keys(demand)) {
		if demand[r] == 0 || r == corev1.ResourcePods {
			continue
		}
		if !slices.ContainsFunc(cq.Spec.ResourceGroups, func(g kueue.ResourceGroup) bool { return slices.Contains(g.CoveredResources, r) }) {
			return r, true
		}
	}
	return "", false
}

// pickFlavor is the first flavor of the group that matches the pod set's node selector and holds need
// beside what the job already takes (taken); else the first that matches, with why none holds it and
// whether none ever could.
func (kq *kueueQuotas) pickFlavor(node *quotaNode, queue string, g kueue.ResourceGroup, ps gantryv1beta1.PodSet,
	need map[corev1.ResourceName]int64, taken map[flavorResource]int64) (flavor string, fits, never bool, msg string) {
	keys := map[string]bool{}
	for _, f := range g.Flavors {
		if rf := kq.state.Flavors[f.Name]; rf != nil {
			for k := range rf.Spec.NodeLabels {
				keys[k] = true
			}
		}
	}
	never = true
	for _, f := range g.Flavors {
		if !kq.selects(f.Name, ps.NodeSelector, keys) {
			continue
		}
		ok, no, why := holds(node, queue, f.Name, need, taken)
		if ok {
			return f.Name, true, false, ""
		}
		if flavor == "" {
			flavor, msg = f.Name, why
		}
		never = never && no
	}
	if flavor == "" {
		return "", false, true, fmt.Sprintf("no flavor of Kueue's ClusterQueue %s matches the node selector of pod set %q", queue, ps.Name)
	}
	return flavor, false, never, msg
}

// selects says whether a flavor's node labels agree with a node selector on the keys the group's
// flavors label.
func (kq *kueueQuotas) selects(flavor string, selector map[string]string, keys map[string]bool) bool {
	var labels map[string]string
	if rf := kq.state.Flavors[flavor]; rf != nil {
		labels = rf.Spec.NodeLabels
	}
	for k, v := range selector {
		if keys[k] && labels[k] != v {
			return false
		}
	}
	return true
}

// holds says whether the queue's node has need left of the flavor beside taken; never when it could
// not even with nothing used.
func holds(node *quotaNode, queue, flavor string, need map[corev1.ResourceName]int64, taken map[flavorResource]int64) (fits, never bool, msg string) {
	for _, r := range slices.Sorted(maps.Keys(need)) {
		fr := flavorResource{flavor, r}
		want := need[r] + taken[fr]
		if p := node.potential(fr); want > p {
			return false, true, fmt.Sprintf("Kueue's ClusterQueue %s can hold at most %s %s of flavor %s, borrowing included; the job needs %s",
				queue, amount(p), r, flavor, amount(want))
		}
		if a := node.available(fr); want > a {
			return false, false, fmt.Sprintf("Kueue's ClusterQueue %s has %s %s of flavor %s left, borrowing included; the job needs %s",
				queue, amount(max(0, a)), r, flavor, amount(want))
		}
	}
	return true, false, ""
}

// charge counts what a copy takes in its ClusterQueue, and through it in its cohorts.
func (kq *kueueQuotas) charge(ch kueueCharge) {
	if kq == nil || kq.queues[ch.queue] == nil {
		return
	}
	node := kq.queues[ch.queue]
	for _, fr := range slices.SortedFunc(maps.Keys(ch.amounts), func(a, b flavorResource) int {
		if a.flavor != b.flavor {
			return strings.Compare(a.flavor, b.flavor)
		}
		return strings.Compare(string(a.resource), string(b.resource))
	}) {
		node.use(fr, ch.amounts[fr])
	}
}

// kueueLeft is Kueue's accounting less what the copies admitted here through a LocalQueue take that
// Kueue does not count yet: until Kueue reserved quota for a job, its ClusterQueue's status leaves it
// out. Nil when the cluster runs no Kueue (in.Kueue is nil: see ThroughKueue).
func kueueLeft(in Input, cs copyStates) *kueueQuotas {
	if in.Kueue == nil {
		return nil
	}
	kq := newKueueQuotas(in.Kueue)
	for _, c := range cs.admitted {
		if c.Annotations[gantryv1beta1.KueueLocalQueueAnnotation] == "" {
			continue
		}
		job := in.Jobs[client.ObjectKeyFromObject(c)]
		owned := job != nil && OwnsJob(c, job)
		if owned && (JobFinished(c, job) || kueueReserved(in.Kueue, job)) {
			continue
		}
		if ch, _, _, _ := kq.judge(c); ch.queue != "" {
			kq.charge(ch)
		}
	}
	return kq
}

// kueueReserved says whether Kueue reserved quota for the job (its ClusterQueue's status counts it).
func kueueReserved(st *Kueue, job client.Object) bool {
	kw := st.Workloads[job.GetUID()]
	return kw != nil && meta.IsStatusConditionTrue(kw.Status.Conditions, kueue.WorkloadQuotaReserved)
}

// ThroughKueue says whether any copy goes through a LocalQueue of the worker's Kueue or any job waits
// in one: only then does a pass need Kueue's objects, which the reconciler then reads. Without such a
// copy nothing is judged by Kueue, and without such a job nothing quotes it.
func ThroughKueue(copies []*gantryv1beta1.Workload, jobs map[types.NamespacedName]client.Object) bool {
	for _, c := range copies {
		if c.Annotations[gantryv1beta1.KueueLocalQueueAnnotation] != "" {
			return true
		}
	}
	for _, j := range jobs {
		if j.GetLabels()[gantryv1beta1.KueueQueueNameLabel] != "" {
			return true
		}
	}
	return false
}

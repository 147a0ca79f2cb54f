package dispatch

import (
	corev1 "k8s.io/api/core/v1"
)

// Cohort is a node of the tree of cohorts: GlobalQueues name it in their Cohort, cohorts in their Parent.
type Cohort struct {
	Name string
	// Parent is the cohort it lends to and borrows through; empty for a root.
	Parent string
	// Quota is, per cluster name, quota the cohort holds itself and lends only within its tree.
	Quota map[string]Resources
	// LendingLimit caps, per cluster name and resource, what of its tree's unused quota it lends its
	// parent; a resource not listed lends all of it.
	LendingLimit map[string]Resources
	// Weight is its fair-sharing weight among its parent's queues and sub-cohorts; nil is 1.
	Weight *int32
}

// OnParentCycle says whether following the named cohort's parents leads back to it. Such a cohort is
// treated as a root; one below a cycle keeps its parent.
func OnParentCycle(cohorts map[string]*Cohort, name string) bool {
	c := cohorts[name]
	return c != nil && c.Parent != "" && leadsTo(cohorts, c.Parent, name)
}

// ComponentOf names the part of the snapshot's queues whose decisions the named GlobalQueue's depend
// on: the root of its tree of cohorts ("cohort/<root>"), or the queue alone ("queue/<name>") when it
// has no cohort. Queues of different components share no quota and never preempt each other, so a
// pass decides each component from its own workloads, the clusters and the specs alone.
func ComponentOf(s *Snapshot, queue string) string {
	q := s.Queues[queue]
	if q == nil || q.Cohort == "" {
		return "queue/" + queue
	}
	name := q.Cohort
	for {
		c := s.Cohorts[name]
		if c == nil || c.Parent == "" || OnParentCycle(s.Cohorts, name) {
			return "cohort/" + name
		}
		name = c.Parent
	}
}

// weightOf is a fair-sharing weight, 1 when not set.
func weightOf(w *int32) int32 {
	if w == nil {
		return 1
	}
	return *w
}

// lendingLimit is the cohort's lending limit of the resource on the cluster, if it sets one; a nil
// cohort (one named without a Cohort object) sets none.
func (c *Cohort) lendingLimit(cluster string, r corev1.ResourceName) (int64, bool) {
	if c == nil {
		return 0, false
	}
	v, ok := c.LendingLimit[cluster][r]
	return v, ok
}

// cohortNode is a cohort of the tree as one dispatch pass sees it.
type cohortNode struct {
	name   string
	spec   *Cohort // nil when named without a Cohort object
	parent *cohortNode
	weight int32
	// queues and children are its members, in name order.
	queues   []*queueLedger
	children []*cohortNode
	// borrowed is, per resource of its tree, what the tree uses (admitted and reserved) beyond what it
	// lends within, over all clusters: what it borrows through its parent.
	borrowed []int64
	// idle is, per resource of its tree, what it lends within and nothing uses, over all clusters.
	idle []int64
	// resources and lendable, on a root only, index the resources of its tree and say what the tree
	// lends of each over all clusters: the denominators of every share in it.
	resources map[corev1.ResourceName]int
	lendable  []int64
	// waiting counts the workloads of its tree still to be nominated in this pass; picked and turn
	// are its last pick and turn, stale once a queue of its tree nominated since.
	waiting int
	picked  *queueLedger
	turn    turn
	stale   bool
	scratch []int64
}

// cohort returns the node of the named cohort, made with its ancestors. A parent that leads back to the
// cohort is ignored: the cohort is a root.
func (l *ledger) cohort(name string, s *Snapshot) *cohortNode {
	if n := l.cohorts[name]; n != nil {
		return n
	}
	n := &cohortNode{name: name, spec: s.Cohorts[name], weight: 1, stale: true}
	l.cohorts[name] = n
	if n.spec == nil {
		n.resources = map[corev1.ResourceName]int{}
		return n
	}
	n.weight = weightOf(n.spec.Weight)
	if n.spec.Parent != "" && !OnParentCycle(s.Cohorts, name) {
		n.parent = l.cohort(n.spec.Parent, s)
		n.parent.children = append(n.parent.children, n)
	} else {
		n.resources = map[corev1.ResourceName]int{}
	}
	return n
}

// leadsTo says whether following parents from the cohort from reaches to.
func leadsTo(cohorts map[string]*Cohort, from, to string) bool {
	for steps := 0; steps <= len(cohorts); steps++ {
		if from == to {
			return true
		}
		c := cohorts[from]
		if c == nil || c.Parent == "" {
			return false
		}
		from = c.Parent
	}
	return false
}

func (n *cohortNode) root() *cohortNode {
	for n.parent != nil {
		n = n.parent
	}
	return n
}

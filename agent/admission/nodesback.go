package admission

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// conditionTaints are the taints Kubernetes puts on a node by itself while the node is not Ready,
// unreachable, cordoned or short of memory, disk, PIDs or network, and lifts once that ends. A node that
// carries one is away for a while; it is not unfit for good. (out-of-service is left out: a person sets
// it, for a node that is shut down.)
var conditionTaints = []string{
	corev1.TaintNodeNotReady,
	corev1.TaintNodeUnreachable,
	corev1.TaintNodeUnschedulable,
	corev1.TaintNodeMemoryPressure,
	corev1.TaintNodeDiskPressure,
	corev1.TaintNodePIDPressure,
	corev1.TaintNodeNetworkUnavailable,
}

func isConditionTaint(key string) bool { return slices.Contains(conditionTaints, key) }

// unlessNodesBack keeps u, the rejection (NeverFits or NoEligibleNode) of g, only if g could not fit
// even with every node back (see nodesBack). Otherwise the rejection is not final: g waits, with
// InsufficientResources and a message naming the nodes away that it would use, so that a person can
// bring them back.
//
// It runs only for gangs about to be rejected, and builds the cluster with every node back once per
// snapshot, so that fits that succeed or wait for capacity cost nothing more.
func (s *Snapshot) unlessNodesBack(g *Gang, u *Unfit) *Unfit {
	if s.away == 0 {
		return u // every node already counts as it will: the rejection is final
	}
	if s.back == nil {
		s.back = s.nodesBack()
	}
	p, ok := s.back.fitAvoiding(g, nil)
	if !ok {
		return u
	}
	var away []int32
	for _, a := range p {
		if i := s.byName[a.Node]; s.nodes[i].away {
			away = append(away, i)
		}
	}
	if len(away) == 0 {
		// Cannot happen: a placement on nodes that are all here would fit them empty, which u denies.
		return u
	}
	slices.Sort(away)
	away = slices.Compact(away)
	names := make([]string, len(away))
	for j, i := range away {
		names[j] = s.nodes[i].Name + " (" + s.nodes[i].awayBecause() + ")"
	}
	return clampMessage(&Unfit{Reason: InsufficientResources, PodSet: u.PodSet, Resource: u.Resource,
		Message: fmt.Sprintf("the gang would fit once these nodes are back: %s; as the cluster is now: %s",
			listBounded(names, maxListed, nil), u.Message)})
}

// nodesBack is the cluster as it will be once every node is back: each node Ready, schedulable, without
// conditionTaints, and empty (nothing bound, nothing reserved). Empty, because NeverFits already means
// "not even on empty nodes": pods end and reservations go, while labels, other taints, allocatable
// and the set of nodes stay.
func (s *Snapshot) nodesBack() *Snapshot {
	nodes := make([]Node, len(s.nodes))
	for i := range s.nodes {
		n := s.nodes[i].Node
		if s.nodes[i].away {
			n.Ready, n.Unschedulable = true, false
			n.Taints = slices.DeleteFunc(slices.Clone(n.Taints), func(t corev1.Taint) bool { return isConditionTaint(t.Key) })
		}
		nodes[i] = n
	}
	return NewSnapshot(nodes)
}

// awayBecause says why a node that is away does not count now. The taints that come with not being
// Ready or with a cordon are not named: they go with the state.
func (n *nodeInfo) awayBecause() string {
	switch {
	case !n.Ready && n.Unschedulable:
		return "not Ready, cordoned"
	case !n.Ready:
		return "not Ready"
	case n.Unschedulable:
		return "cordoned"
	}
	for _, t := range n.hardTaints {
		if isConditionTaint(t.Key) {
			return "tainted " + t.Key
		}
	}
	return "away"
}

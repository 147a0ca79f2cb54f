package admission

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// tolerationComparisonOperators follows the default of the scheduler's TaintTolerationComparisonOperators
// feature gate (alpha, off): a toleration with operator Lt or Gt tolerates nothing.
const tolerationComparisonOperators = false

// mismatch is why a node is not eligible for a pod set, in the order the checks run.
type mismatch int

const (
	eligibleNode   mismatch = iota
	otherNodeNamed          // not the node the pod set names (spec.nodeName)
	notReady
	unschedulable
	selectorMismatch
	affinityMismatch
	untoleratedTaint
	productMismatch // not one of the pod set's GPU products
	noTopologyLabel // without the gang's topology label
	numMismatches
)

// eligibleByKey returns the indexes (in name order) of the nodes a pod of ps may go to, whatever their
// free capacity and GPU product; key is constraintKey(ps). Eligibility depends only on the nodes, which
// a snapshot never changes, so the result is cached by the pod set's constraints.
func (s *Snapshot) eligibleByKey(key string, ps *PodSet) []int32 {
	if e, ok := s.eligible[key]; ok {
		return e
	}
	sel := affinitySelector(ps)
	e := []int32{}
	for i := range s.nodes {
		if m, _ := s.checkNode(i, ps, sel); m == eligibleNode {
			e = append(e, int32(i))
		}
	}
	s.eligible[key] = e
	return e
}

func affinitySelector(ps *PodSet) *nodeaffinity.LazyErrorNodeSelector {
	if ps.RequiredAffinity == nil {
		return nil
	}
	return nodeaffinity.NewLazyErrorNodeSelector(ps.RequiredAffinity)
}

// checkNode tells whether node i is eligible for ps and, if a taint is not tolerated, which one.
func (s *Snapshot) checkNode(i int, ps *PodSet, sel *nodeaffinity.LazyErrorNodeSelector) (mismatch, *corev1.Taint) {
	n := &s.nodes[i]
	switch {
	case ps.NodeName != "" && n.Name != ps.NodeName:
		return otherNodeNamed, nil
	case !n.Ready:
		return notReady, nil
	case n.Unschedulable:
		return unschedulable, nil
	}
	for k, v := range ps.NodeSelector {
		if lv, ok := n.Labels[k]; !ok || lv != v {
			return selectorMismatch, nil
		}
	}
	if sel != nil {
		if n.core == nil {
			n.core = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}
		}
		// A term that does not parse matches nothing, as in the scheduler.
		if ok, _ := sel.Match(n.core); !ok {
			return affinityMismatch, nil
		}
	}
	for j := range n.hardTaints {
		if !tolerates(ps.Tolerations, &n.hardTaints[j]) {
			return untoleratedTaint, &n.hardTaints[j]
		}
	}
	return eligibleNode, nil
}

func tolerates(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Logger{}, taint, tolerationComparisonOperators) {
			return true
		}
	}
	return false
}

// constraintKey identifies the placement constraints of ps: pod sets with equal keys have the same
// eligible nodes.
func constraintKey(ps *PodSet) string {
	if len(ps.NodeSelector) == 0 && len(ps.Tolerations) == 0 && ps.RequiredAffinity == nil && ps.NodeName == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString(ps.NodeName)
	b.WriteByte(1)
	keys := make([]string, 0, len(ps.NodeSelector))
	for k := range ps.NodeSelector {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(ps.NodeSelector[k])
		b.WriteByte(0)
	}
	b.WriteByte(1)
	for _, t := range ps.Tolerations {
		for _, f := range []string{t.Key, string(t.Operator), t.Value, string(t.Effect)} {
			b.WriteString(f)
			b.WriteByte(0)
		}
	}
	b.WriteByte(1)
	if a := ps.RequiredAffinity; a != nil {
		b.WriteByte('a')
		if data, err := a.Marshal(); err == nil {
			b.Write(data)
		} else {
			fmt.Fprintf(&b, "%#v", a.NodeSelectorTerms)
		}
	}
	return b.String()
}

// noEligibleNode explains why no node is eligible for ps: each node counts under the first check it
// fails, the GPU products and the topology label (if topology is not empty) last.
func (s *Snapshot) noEligibleNode(ps *PodSet, topology string) *Unfit {
	u := &Unfit{Reason: NoEligibleNode, PodSet: ps.Name}
	if len(s.nodes) == 0 {
		u.Message = fmt.Sprintf("pod set %q has no eligible node: the cluster has no nodes", ps.Name)
		return u
	}
	sel := affinitySelector(ps)
	var counts [numMismatches]int
	var taint *corev1.Taint
	var taintNode string
	for i := range s.nodes {
		m, t := s.checkNode(i, ps, sel)
		if m == eligibleNode {
			labels := s.nodes[i].Labels
			if p, ok := labels[GPUProductLabel]; len(ps.GPUProducts) > 0 && (!ok || !slices.Contains(ps.GPUProducts, p)) {
				m = productMismatch
			} else if topology != "" && labels[topology] == "" {
				m = noTopologyLabel
			}
		}
		counts[m]++
		if t != nil && taint == nil {
			taint, taintNode = t, s.nodes[i].Name
		}
	}
	var parts []string
	add := func(m mismatch, what string) {
		if counts[m] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[m], what))
		}
	}
	add(otherNodeNamed, "not the node its pod template names (spec.nodeName "+ps.NodeName+")")
	add(notReady, "not Ready")
	add(unschedulable, "unschedulable (cordoned)")
	add(selectorMismatch, "not matching the nodeSelector"+s.missingLabels(ps))
	add(affinityMismatch, "not matching the required node affinity")
	if taint != nil {
		add(untoleratedTaint, fmt.Sprintf("with an untolerated taint (e.g. %s on %s)", formatTaint(taint), taintNode))
	}
	add(productMismatch, "not of its GPU products"+s.missingProducts(ps))
	add(noTopologyLabel, "without the topology label "+display(topology))
	u.Message = fmt.Sprintf("pod set %q has no eligible node among %d: %s", ps.Name, len(s.nodes), strings.Join(parts, ", "))
	return u
}

// missingLabels names the nodeSelector labels that no Ready schedulable node carries.
func (s *Snapshot) missingLabels(ps *PodSet) string {
	var missing []string
	for k, v := range ps.NodeSelector {
		found := false
		for i := range s.nodes {
			if n := &s.nodes[i]; n.usable && n.Labels[k] == v {
				if _, ok := n.Labels[k]; ok {
					found = true
					break
				}
			}
		}
		if !found {
			missing = append(missing, k+"="+v)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	slices.Sort(missing)
	return fmt.Sprintf(" (no Ready schedulable node has %s)", strings.Join(missing, ", "))
}

// missingProducts names the GPU products of ps that no Ready schedulable node carries.
func (s *Snapshot) missingProducts(ps *PodSet) string {
	var missing []string
	for _, p := range ps.GPUProducts {
		found := false
		for i := range s.nodes {
			if n := &s.nodes[i]; n.usable && n.Labels[GPUProductLabel] == p {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, GPUProductLabel+"="+display(p))
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf(" (no Ready schedulable node has %s)", listBounded(missing, maxListed, nil))
}

func formatTaint(t *corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

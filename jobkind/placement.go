package jobkind

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// maxPerNode is the most pods of one pod set a node may take, from what the pod template states: 1 for
// a host port or a required anti-affinity of the set's pods to one another by node, maxSkew for a
// DoNotSchedule spread of the set's pods over nodes; 0 for no limit. An error names a placement rule
// Gantry cannot judge for a gang (a required pod affinity, an anti-affinity or a DoNotSchedule spread
// over other domains or other pods): admitted blindly, its pods could be left unscheduled on the
// worker, or scheduled against the rule's intent.
func maxPerNode(tpl *corev1.PodTemplateSpec) (int32, error) {
	limit := int32(0)
	tighten := func(n int32) {
		if limit == 0 || n < limit {
			limit = n
		}
	}
	for _, cs := range [][]corev1.Container{tpl.Spec.InitContainers, tpl.Spec.Containers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort > 0 {
					tighten(1)
				}
			}
		}
	}
	if a := tpl.Spec.Affinity; a != nil && a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		return 0, fmt.Errorf("a required pod affinity cannot be judged for a gang across clusters; use the annotation gantry.dev/topology-key to keep its pods in one domain")
	}
	if a := tpl.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if !onNodesOfItsOwn(term.TopologyKey, term.LabelSelector, tpl.Labels) {
				return 0, fmt.Errorf("a required pod anti-affinity is judged only between the pods of one pod set by node (topologyKey %s, a selector that matches the pod template's labels); this one has topologyKey %q",
					corev1.LabelHostname, term.TopologyKey)
			}
			tighten(1)
		}
	}
	for _, c := range tpl.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		if !onNodesOfItsOwn(c.TopologyKey, c.LabelSelector, tpl.Labels) {
			return 0, fmt.Errorf("a DoNotSchedule topology spread is judged only for the pods of one pod set over nodes (topologyKey %s, a selector that matches the pod template's labels); this one has topologyKey %q",
				corev1.LabelHostname, c.TopologyKey)
		}
		tighten(max(c.MaxSkew, 1))
	}
	return limit, nil
}

// onNodesOfItsOwn says whether a rule over topologyKey and selector is one between the pods of a pod set
// with podLabels, by node.
func onNodesOfItsOwn(topologyKey string, selector *metav1.LabelSelector, podLabels map[string]string) bool {
	if topologyKey != corev1.LabelHostname || selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	return err == nil && !sel.Empty() && sel.Matches(labels.Set(podLabels))
}

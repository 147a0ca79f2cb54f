package controller

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"

	"github.com/gantry-dev/gantry/agent/admission"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
)

// withRuntimeClasses is the gang of copy c as its pods reach this cluster's scheduler: the RuntimeClass
// a pod set names adds, at the pods' admission here, its pod overhead to each pod's requests and its
// scheduling's node selector and tolerations to each pod. A node selector of the class that conflicts
// with the pod set's own makes the API server refuse the pods, which the hub finds before it creates
// the job (its dry run of the pods); here the pod set's own value stands.
func withRuntimeClasses(g admission.Gang, c *gantryv1beta1.Workload, classes map[string]*nodev1.RuntimeClass) admission.Gang {
	for i, ps := range c.Spec.PodSets {
		rc := classes[ps.RuntimeClassName]
		if rc == nil || i >= len(g.PodSets) {
			continue
		}
		set := &g.PodSets[i]
		set.Requests = withOverhead(set.Requests, rc)
		if rc.Scheduling == nil {
			continue
		}
		if len(rc.Scheduling.NodeSelector) > 0 {
			selector := maps.Clone(rc.Scheduling.NodeSelector)
			maps.Copy(selector, set.NodeSelector)
			set.NodeSelector = selector
		}
		if len(rc.Scheduling.Tolerations) > 0 {
			set.Tolerations = slices.Concat(set.Tolerations, rc.Scheduling.Tolerations)
		}
	}
	return g
}

// withOverhead is a pod's requests with the pod overhead of its RuntimeClass (none when rc is nil), as
// the scheduler and a ResourceQuota count them.
func withOverhead(requests corev1.ResourceList, rc *nodev1.RuntimeClass) corev1.ResourceList {
	if rc == nil || rc.Overhead == nil || len(rc.Overhead.PodFixed) == 0 {
		return requests
	}
	out := requests.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, q := range rc.Overhead.PodFixed {
		sum := q.DeepCopy()
		if have, ok := out[name]; ok {
			sum.Add(have)
		}
		out[name] = sum
	}
	return out
}

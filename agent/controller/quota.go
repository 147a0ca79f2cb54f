package controller

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

// namespaceQuotas is what the ResourceQuotas of each namespace leave to the copies of a pass: for each
// quota, each resource its status limits, hard minus used, minus what the copies admitted here still
// have to create (their Job, their pods not created yet), which the quota's usage does not count yet.
// Amounts are in thousandths of the resource's unit. Limits (limits.*) are not judged: a Workload
// carries the pods' requests only.
type namespaceQuotas map[string][]*quotaLeft

type quotaLeft struct {
	name string
	hard map[corev1.ResourceName]int64
	left map[corev1.ResourceName]int64
	// uncounted are the resources the quota's spec limits that its status does not count yet: the API
	// server refuses what asks for them until the quota controller has counted them.
	uncounted map[corev1.ResourceName]bool
}

// newNamespaceQuotas reads the quotas' status, as the quota controller keeps it.
func newNamespaceQuotas(quotas []*corev1.ResourceQuota) namespaceQuotas {
	nq := namespaceQuotas{}
	for _, q := range quotas {
		if len(q.Spec.Hard) == 0 && len(q.Status.Hard) == 0 {
			continue
		}
		ql := &quotaLeft{name: q.Name, hard: map[corev1.ResourceName]int64{}, left: map[corev1.ResourceName]int64{},
			uncounted: map[corev1.ResourceName]bool{}}
		for r, h := range q.Status.Hard {
			used := q.Status.Used[r]
			ql.hard[r], ql.left[r] = h.MilliValue(), h.MilliValue()-used.MilliValue()
		}
		for r := range q.Spec.Hard {
			if _, counted := q.Status.Hard[r]; !counted {
				ql.uncounted[r] = true
			}
		}
		nq[q.Namespace] = append(nq[q.Namespace], ql)
	}
	for _, qs := range nq {
		slices.SortFunc(qs, func(a, b *quotaLeft) int { return strings.Compare(a.name, b.name) })
	}
	return nq
}

// quotaDemand is what a copy's job takes of a namespace's quota from now on: its Job, unless created,
// and, per pod set, the pods not created yet (toCreate; nil for all of them) with their requests, under
// every name a quota may give them (pods, count/pods, requests.<name>, and cpu, memory and
// ephemeral-storage alone).
func quotaDemand(c *gantryv1beta1.Workload, classes map[string]*nodev1.RuntimeClass, jobCreated bool, toCreate map[string]int32) map[corev1.ResourceName]int64 {
	d := map[corev1.ResourceName]int64{}
	if !jobCreated {
		gr := jobkind.Of(c).Resource().GroupResource()
		d[corev1.ResourceName("count/"+gr.String())] += 1000
	}
	for _, ps := range c.Spec.PodSets {
		n := int64(ps.Count)
		if toCreate != nil {
			n = int64(toCreate[ps.Name])
		}
		if n <= 0 {
			continue
		}
		d[corev1.ResourcePods] += 1000 * n
		d["count/pods"] += 1000 * n
		for r, q := range withOverhead(ps.Requests, classes[ps.RuntimeClassName]) {
			d[corev1.ResourceName("requests."+string(r))] += n * q.MilliValue()
			if r == corev1.ResourceCPU || r == corev1.ResourceMemory || r == corev1.ResourceEphemeralStorage {
				d[r] += n * q.MilliValue()
			}
		}
	}
	return d
}

// charge takes a demand from the quotas of a namespace.
func (nq namespaceQuotas) charge(ns string, d map[corev1.ResourceName]int64) {
	for _, q := range nq[ns] {
		for r, v := range d {
			if _, limited := q.left[r]; limited {
				q.left[r] -= v
			}
		}
	}
}

// judge says whether a demand fits the quotas of a namespace: never (the quota's hard limit alone is
// below it), not now (what is left is), with a message that names the quota, the resource and the
// amounts; the first quota and resource, by name, that does not hold it.
func (nq namespaceQuotas) judge(ns string, d map[corev1.ResourceName]int64) (fits, never bool, msg string) {
	names := make([]corev1.ResourceName, 0, len(d))
	for r := range d {
		names = append(names, r)
	}
	slices.Sort(names)
	for _, q := range nq[ns] {
		for _, r := range names {
			hard, limited := q.hard[r]
			switch {
			case q.uncounted[r] && d[r] > 0:
				return false, false, fmt.Sprintf("ResourceQuota %s of namespace %s does not count %s yet (its controller has not caught up)", q.name, ns, r)
			case !limited || d[r] <= q.left[r]:
			case d[r] > hard:
				return false, true, fmt.Sprintf("ResourceQuota %s of namespace %s allows %s %s; the job needs %s",
					q.name, ns, amount(hard), r, amount(d[r]))
			default:
				return false, false, fmt.Sprintf("ResourceQuota %s of namespace %s has %s %s left of %s; the job needs %s",
					q.name, ns, amount(max(0, q.left[r])), r, amount(hard), amount(d[r]))
			}
		}
	}
	return true, false, ""
}

// amount writes thousandths as a quantity: 1500 as 1500m, 8000 as 8.
func amount(milli int64) string {
	return resource.NewMilliQuantity(milli, resource.DecimalSI).String()
}

// quotasLeft are the namespaces' quotas less what the admitted copies still have to create there.
func quotasLeft(in Input, cs copyStates, podsByCopy map[string][]*corev1.Pod) namespaceQuotas {
	nq := newNamespaceQuotas(in.Quotas)
	for _, c := range cs.admitted {
		if _, limited := nq[c.Namespace]; !limited {
			continue
		}
		job := in.Jobs[client.ObjectKeyFromObject(c)]
		owned := job != nil && OwnsJob(c, job)
		if owned && JobFinished(c, job) {
			continue
		}
		nq.charge(c.Namespace, quotaDemand(c, in.RuntimeClasses, owned, podsToCreate(c, podsByCopy[c.Namespace+"/"+c.Labels[gantryv1beta1.WorkloadUIDLabel]])))
	}
	return nq
}

// podsToCreate counts, per pod set of c, the pods its Job has yet to create: those the quota's usage
// does not count yet (pods that ended count no more, and are made anew if the job goes on).
func podsToCreate(c *gantryv1beta1.Workload, pods []*corev1.Pod) map[string]int32 {
	out := make(map[string]int32, len(c.Spec.PodSets))
	for _, ps := range c.Spec.PodSets {
		out[ps.Name] = ps.Count
	}
	for _, pod := range pods {
		if name := pod.Labels[gantryv1beta1.PodSetLabel]; !IsTerminal(pod) && out[name] > 0 {
			out[name]--
		}
	}
	return out
}

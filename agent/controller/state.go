package controller

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/gantry-dev/gantry/agent/admission"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

// PodRequests is what the scheduler sets aside for pod on its node: the larger of the sum over its
// containers (restartable init containers included) and its largest init container, plus the pod's
// overhead.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// IsTerminal tells whether pod has finished for good (Succeeded or Failed): it holds nothing on its node.
func IsTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// UsesNode tells whether pod takes room on a node now: it is bound and has not terminated. A pod being
// deleted still counts until it is gone, as it does for the scheduler.
func UsesNode(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && !IsTerminal(pod)
}

// IsCopy tells whether w is a Workload copy dispatched by the hub.
func IsCopy(w *gantryv1beta1.Workload) bool {
	_, ok := w.Labels[gantryv1beta1.WorkloadUIDLabel]
	return ok
}

// IsAdmitted tells whether the Admitted condition of copy w is True.
func IsAdmitted(w *gantryv1beta1.Workload) bool {
	return meta.IsStatusConditionTrue(w.Status.Conditions, gantryv1beta1.WorkloadAdmitted)
}

// GangKey is the admission key of copy w: "namespace/name".
func GangKey(w *gantryv1beta1.Workload) string {
	return w.Namespace + "/" + w.Name
}

// GangFromCopy is the gang copy w asks admission for: all its pod sets, with their counts.
func GangFromCopy(w *gantryv1beta1.Workload) admission.Gang {
	g := admission.Gang{
		Key:          GangKey(w),
		Priority:     w.Spec.Priority,
		CreationTime: w.CreationTimestamp.Time,
		PodSets:      make([]admission.PodSet, 0, len(w.Spec.PodSets)),
		TopologyKey:  w.Spec.TopologyKey,
	}
	for _, ps := range w.Spec.PodSets {
		g.PodSets = append(g.PodSets, admission.PodSet{
			Name:             ps.Name,
			Count:            ps.Count,
			Requests:         ps.Requests,
			NodeSelector:     ps.NodeSelector,
			Tolerations:      ps.Tolerations,
			RequiredAffinity: ps.RequiredNodeAffinity,
			NodeName:         ps.NodeName,
			MaxPerNode:       ps.MaxPerNode,
			GPUProducts:      ps.GPUProducts,
		})
	}
	return g
}

// AdmissionOf is what copy w records of its placement p: the GPU product chosen for each pod set, the
// topology domain and the PodGroup its gang joins (podGroup, empty for none), which the hub then holds
// the Job to. Nil when none of them was chosen.
func AdmissionOf(w *gantryv1beta1.Workload, p admission.Placement, podGroup string) *gantryv1beta1.Admission {
	a := &gantryv1beta1.Admission{PodGroup: podGroup}
	chosen := false
	for _, ps := range w.Spec.PodSets {
		psa := gantryv1beta1.PodSetAdmission{Name: ps.Name}
		for _, as := range p {
			if as.PodSet == ps.Name {
				psa.GPUProduct = as.GPUProduct
				if a.TopologyDomain == "" {
					a.TopologyDomain = as.Domain
				}
				break
			}
		}
		chosen = chosen || psa.GPUProduct != ""
		a.PodSets = append(a.PodSets, psa)
	}
	if !chosen && a.TopologyDomain == "" && podGroup == "" {
		return nil
	}
	return a
}

// JobKey is the namespace and name of the Job the hub creates for a copy if it wins: the hub Job's name,
// which the copy carries in the gantry.dev/job-name label.
func JobKey(w *gantryv1beta1.Workload) types.NamespacedName {
	name := w.Labels[gantryv1beta1.JobNameLabel]
	if name == "" {
		name = w.Name
	}
	return types.NamespacedName{Namespace: w.Namespace, Name: name}
}

// OwnsJob tells whether job was created by Gantry for copy w: it carries w's gantry.dev/workload-uid
// label with the same value.
func OwnsJob(w *gantryv1beta1.Workload, job client.Object) bool {
	want := w.Labels[gantryv1beta1.WorkloadUIDLabel]
	got, ok := job.GetLabels()[gantryv1beta1.WorkloadUIDLabel]
	return ok && got == want
}

// JobFinished tells whether job, of copy w's kind, has ended.
func JobFinished(w *gantryv1beta1.Workload, job client.Object) bool {
	return jobkind.Of(w).State(job).Finished
}

// Progress is how far the pods of an admitted copy got: per pod set, how many of its pods still need the
// copy's reservation (Left: neither bound nor terminated), and on which nodes its bound pods are.
type Progress struct {
	Left  map[string]int32
	Bound map[string]map[string]int32 // pod set -> node -> pods bound there (terminated ones included)
}

// Done tells whether no pod of the copy needs a reservation any more.
func (p Progress) Done() bool {
	for _, n := range p.Left {
		if n > 0 {
			return false
		}
	}
	return true
}

// ProgressOf attributes the pods of copy w (those labelled with its gantry.dev/workload-uid) that are
// bound or terminated to its pod sets, and returns what is left of each pod set. A pod belongs to the
// pod set its gantry.dev/pod-set label names; one without the label (made before Gantry labelled pod
// sets) to the first pod set, in spec order, that requests what the pod requests (overhead aside) and still has pods
// left; a pod whose requests match a pod set that has none left is a replacement and changes nothing. A
// pod that matches no pod set goes to the first pod set that still has pods left. Pods are taken in
// name order, so the result does not depend on the order of pods.
func ProgressOf(w *gantryv1beta1.Workload, pods []*corev1.Pod) Progress {
	p := Progress{Left: make(map[string]int32, len(w.Spec.PodSets)), Bound: map[string]map[string]int32{}}
	for _, ps := range w.Spec.PodSets {
		p.Left[ps.Name] = ps.Count
	}
	started := make([]*corev1.Pod, 0, len(pods))
	for _, pod := range pods {
		if pod.Spec.NodeName != "" || IsTerminal(pod) {
			started = append(started, pod)
		}
	}
	slices.SortFunc(started, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, pod := range started {
		ps := attribute(w.Spec.PodSets, p.Left, pod)
		if ps == "" {
			continue
		}
		p.Left[ps]--
		if pod.Spec.NodeName != "" {
			if p.Bound[ps] == nil {
				p.Bound[ps] = map[string]int32{}
			}
			p.Bound[ps][pod.Spec.NodeName]++
		}
	}
	return p
}

// attribute picks the pod set that pod counts against, or "" when it counts against none. A pod that
// names its pod set (gantry.dev/pod-set, on the pods of the jobs Gantry creates) counts against that
// one while it has pods left.
func attribute(sets []gantryv1beta1.PodSet, left map[string]int32, pod *corev1.Pod) string {
	if name, ok := pod.Labels[gantryv1beta1.PodSetLabel]; ok {
		if _, known := left[name]; known {
			if left[name] > 0 {
				return name
			}
			return ""
		}
	}
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{ExcludeOverhead: true})
	matched := false
	for i := range sets {
		if sameRequests(req, sets[i].Requests) {
			if left[sets[i].Name] > 0 {
				return sets[i].Name
			}
			matched = true
		}
	}
	if matched {
		return ""
	}
	for i := range sets {
		if left[sets[i].Name] > 0 {
			return sets[i].Name
		}
	}
	return ""
}

// sameRequests compares two resource lists, treating a missing entry as zero.
func sameRequests(a, b corev1.ResourceList) bool {
	nonZero := func(l corev1.ResourceList) corev1.ResourceList {
		out := make(corev1.ResourceList, len(l))
		for k, v := range l {
			if !v.IsZero() {
				out[k] = v
			}
		}
		return out
	}
	return equality.Semantic.DeepEqual(nonZero(a), nonZero(b))
}

// TrimPlacement returns the part of placement p that progress still needs: each pod set keeps at most
// Left of its pods. Pods are taken off first from the nodes where pods of the pod set are bound (those
// pods already count as usage there), then from the last assignments. The result is a new Placement;
// assignments left with no pods are dropped.
func TrimPlacement(p admission.Placement, progress Progress) admission.Placement {
	counts := make([]int32, len(p))
	total := map[string]int32{}
	for i, a := range p {
		counts[i] = a.Count
		total[a.PodSet] += a.Count
	}
	excess := map[string]int32{}
	for ps, n := range total {
		if e := n - max(0, progress.Left[ps]); e > 0 {
			excess[ps] = e
		}
	}
	if len(excess) > 0 {
		bound := map[string]map[string]int32{}
		for ps, nodes := range progress.Bound {
			bound[ps] = make(map[string]int32, len(nodes))
			for n, c := range nodes {
				bound[ps][n] = c
			}
		}
		for i, a := range p {
			e := excess[a.PodSet]
			b := bound[a.PodSet][a.Node]
			if e == 0 || b == 0 {
				continue
			}
			t := min(e, b, counts[i])
			counts[i] -= t
			excess[a.PodSet] -= t
			bound[a.PodSet][a.Node] -= t
		}
		for i := len(p) - 1; i >= 0; i-- {
			e := excess[p[i].PodSet]
			if e == 0 {
				continue
			}
			t := min(e, counts[i])
			counts[i] -= t
			excess[p[i].PodSet] -= t
		}
	}
	out := make(admission.Placement, 0, len(p))
	for i, a := range p {
		if counts[i] > 0 {
			a.Count = counts[i]
			out = append(out, a)
		}
	}
	return out
}

// remainingGang is g with each pod set cut down to what progress left of it; pod sets with nothing left
// are dropped.
// heldToAdmission narrows gang g to the choices recorded when it was admitted (a), so that placing it
// again, after a restart lost its placement, keeps the product and domain its Job is pinned to.
func heldToAdmission(g admission.Gang, a *gantryv1beta1.Admission) admission.Gang {
	if a == nil {
		return g
	}
	out := g
	out.PodSets = slices.Clone(g.PodSets)
	for i := range out.PodSets {
		ps := &out.PodSets[i]
		for _, psa := range a.PodSets {
			if psa.Name == ps.Name && psa.GPUProduct != "" {
				ps.GPUProducts = []string{psa.GPUProduct}
			}
		}
		if g.TopologyKey != "" && a.TopologyDomain != "" {
			sel := make(map[string]string, len(ps.NodeSelector)+1)
			maps.Copy(sel, ps.NodeSelector)
			sel[g.TopologyKey] = a.TopologyDomain
			ps.NodeSelector = sel
		}
	}
	return out
}

func remainingGang(g admission.Gang, progress Progress) admission.Gang {
	out := g
	out.PodSets = make([]admission.PodSet, 0, len(g.PodSets))
	for _, ps := range g.PodSets {
		if n := progress.Left[ps.Name]; n > 0 {
			ps.Count = n
			out.PodSets = append(out.PodSets, ps)
		}
	}
	return out
}

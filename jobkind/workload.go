package jobkind

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// NewWorkload builds the hub Workload for a job of the kind: its demand, one pod set per pod set of the
// job, owned by the job and carrying the finalizers that keep it until its objects on workers are
// withdrawn and its runs counted in its namespace's Usage. An error says what in the job Gantry cannot dispatch.
func NewWorkload(k Kind, obj client.Object, priority int32) (*gantry.Workload, error) {
	sets, err := k.PodSets(obj)
	if err != nil {
		return nil, err
	}
	switch {
	case len(sets) == 0:
		return nil, fmt.Errorf("the %s has no pods", k.Name())
	case len(sets) > gantry.MaxPodSets:
		return nil, fmt.Errorf("the %s has %d groups of pods; at most %d are dispatched as one", k.Name(), len(sets), gantry.MaxPodSets)
	}
	products, topologyKey, err := PlacementOf(obj.GetAnnotations())
	if err != nil {
		return nil, err
	}
	deadline, err := AdmissionDeadlineOf(obj.GetAnnotations())
	if err != nil {
		return nil, err
	}
	dataLocation, err := DataLocationOf(obj.GetAnnotations())
	if err != nil {
		return nil, err
	}
	checkpoints, err := CheckpointIntervalOf(obj.GetAnnotations())
	if err != nil {
		return nil, err
	}
	podSets := make([]gantry.PodSet, 0, len(sets))
	for _, ps := range sets {
		p, err := podSetOf(ps, products)
		if err != nil {
			return nil, err
		}
		podSets = append(podSets, p)
	}
	labels := map[string]string{gantry.JobNameLabel: obj.GetName(), gantry.QueueLabel: obj.GetLabels()[gantry.QueueLabel]}
	return &gantry.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Name: WorkloadName(k, obj.GetName()), Namespace: obj.GetNamespace(), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(obj, k.GroupVersionKind())},
			Finalizers:      []string{gantry.WorkloadFinalizer, gantry.UsageFinalizer},
		},
		Spec: gantry.WorkloadSpec{JobKind: k.Name(), QueueName: labels[gantry.QueueLabel], Priority: priority,
			PodSets: podSets, TopologyKey: topologyKey, DataLocation: dataLocation, AdmissionDeadline: deadline, CheckpointInterval: checkpoints, JobGeneration: obj.GetGeneration(),
			Stopped: Stopped(obj)},
	}, nil
}

// Stopped says whether the job's owner stopped it: its annotation gantry.dev/stopped is "true".
func Stopped(obj client.Object) bool {
	return obj.GetAnnotations()[gantry.StoppedAnnotation] == "true"
}

// Changes says how the demand of want differs from that of have, field by field, for a person to read;
// empty when they describe the same job (the generation each was built from aside).
func Changes(have, want *gantry.WorkloadSpec) []string {
	var out []string
	differs := func(what string, a, b any) {
		if !equality.Semantic.DeepEqual(a, b) {
			out = append(out, fmt.Sprintf("%s %s -> %s", what, show(a), show(b)))
		}
	}
	differs("queue", have.QueueName, want.QueueName)
	differs("priority", have.Priority, want.Priority)
	differs("topology key", have.TopologyKey, want.TopologyKey)
	differs("admission deadline", have.AdmissionDeadline, want.AdmissionDeadline)
	differs("data location", have.DataLocation, want.DataLocation)
	differs("checkpoint interval", have.CheckpointInterval, want.CheckpointInterval)
	if len(have.PodSets) != len(want.PodSets) {
		return append(out, fmt.Sprintf("%d pod sets -> %d", len(have.PodSets), len(want.PodSets)))
	}
	for i := range have.PodSets {
		a, b := &have.PodSets[i], &want.PodSets[i]
		name := "pod set " + a.Name
		differs("pod set name", a.Name, b.Name)
		differs(name+" pods", a.Count, b.Count)
		differs(name+" requests", a.Requests, b.Requests)
		differs(name+" node selector", a.NodeSelector, b.NodeSelector)
		differs(name+" tolerations", a.Tolerations, b.Tolerations)
		differs(name+" node affinity", a.RequiredNodeAffinity, b.RequiredNodeAffinity)
		differs(name+" node name", a.NodeName, b.NodeName)
		differs(name+" pods per node", a.MaxPerNode, b.MaxPerNode)
		differs(name+" priority class", a.PriorityClassName, b.PriorityClassName)
		differs(name+" runtime class", a.RuntimeClassName, b.RuntimeClassName)
		differs(name+" GPU products", a.GPUProducts, b.GPUProducts)
		differs(name+" deferred", a.Deferred, b.Deferred)
	}
	return out
}

// show writes a field's value as a person reads it: a ResourceList as name=quantity pairs, a pointer
// as what it points to.
func show(v any) string {
	switch x := v.(type) {
	case corev1.ResourceList:
		names := make([]string, 0, len(x))
		for n := range x {
			names = append(names, string(n))
		}
		slices.Sort(names)
		for i, n := range names {
			q := x[corev1.ResourceName(n)]
			names[i] = n + "=" + q.String()
		}
		return "{" + strings.Join(names, ",") + "}"
	case *metav1.Duration:
		if x == nil {
			return "none"
		}
		return x.Duration.String()
	case *corev1.NodeSelector:
		if x == nil {
			return "none"
		}
		return fmt.Sprintf("%d terms", len(x.NodeSelectorTerms))
	case string:
		return fmt.Sprintf("%q", x)
	}
	return fmt.Sprint(v)
}

// podSetOf is the Workload's pod set for one of the job's: the pods' requests and node constraints, and
// the GPU products of the set's own annotation, or else of the job's.
func podSetOf(ps PodSet, jobProducts []string) (gantry.PodSet, error) {
	products := jobProducts
	if _, ok := ps.Annotations[gantry.GPUProductsAnnotation]; ok {
		own, _, err := PlacementOf(map[string]string{gantry.GPUProductsAnnotation: ps.Annotations[gantry.GPUProductsAnnotation]})
		if err != nil {
			return gantry.PodSet{}, fmt.Errorf("pod set %s: %w", ps.Name, err)
		}
		products = own
	}
	if ps.Count < 1 {
		return gantry.PodSet{}, fmt.Errorf("pod set %s runs no pods", ps.Name)
	}
	perNode, err := maxPerNode(ps.Template)
	if err != nil {
		return gantry.PodSet{}, fmt.Errorf("pod set %s: %w", ps.Name, err)
	}
	spec := &ps.Template.Spec
	var affinity *corev1.NodeSelector
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
		affinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return gantry.PodSet{
		Name: ps.Name, Count: ps.Count,
		Requests:     resourcehelper.PodRequests(&corev1.Pod{Spec: *requestsDefaulted(spec)}, resourcehelper.PodResourcesOptions{}),
		NodeSelector: spec.NodeSelector, Tolerations: spec.Tolerations, RequiredNodeAffinity: affinity,
		NodeName: spec.NodeName, MaxPerNode: perNode,
		PriorityClassName: spec.PriorityClassName, RuntimeClassName: ptr.Deref(spec.RuntimeClassName, ""),
		GPUProducts: products, Deferred: ps.Deferred,
	}, nil
}

// requestsDefaulted is the pod spec with what the API server sets when it creates the pod: a resource
// with a limit and no request requests its limit. A pod template inside a custom resource (a JobSet's,
// a RayJob's) is not defaulted until its pods are made, and its demand must count what they will request.
func requestsDefaulted(spec *corev1.PodSpec) *corev1.PodSpec {
	out := spec.DeepCopy()
	for _, cs := range [][]corev1.Container{out.InitContainers, out.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			for name, limit := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					if r.Requests == nil {
						r.Requests = corev1.ResourceList{}
					}
					r.Requests[name] = limit.DeepCopy()
				}
			}
		}
	}
	return out
}

// PriorityClassName is the priority class of the job's pods: the first one a pod set names.
func PriorityClassName(k Kind, obj client.Object) string {
	sets, _ := k.PodSets(obj)
	for _, ps := range sets {
		if name := ps.Template.Spec.PriorityClassName; name != "" {
			return name
		}
	}
	return ""
}

// AdmissionDeadlineOf reads a job's own admission deadline (gantry.dev/admission-deadline: "30m"); nil
// when the job has none.
func AdmissionDeadlineOf(annotations map[string]string) (*metav1.Duration, error) {
	return durationOf(annotations, gantry.AdmissionDeadlineAnnotation)
}

// CheckpointIntervalOf reads how often a job writes a checkpoint (gantry.dev/checkpoint-interval: "30m");
// nil when it does not say.
func CheckpointIntervalOf(annotations map[string]string) (*metav1.Duration, error) {
	return durationOf(annotations, gantry.CheckpointIntervalAnnotation)
}

// durationOf reads an annotation holding a positive duration; nil without it.
func durationOf(annotations map[string]string, key string) (*metav1.Duration, error) {
	v, ok := annotations[key]
	if !ok {
		return nil, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("annotation %s=%q is not a positive duration such as 30m or 2h", key, v)
	}
	return &metav1.Duration{Duration: d}, nil
}

// PlacementOf reads placement annotations: the GPU products pods accept, in order of preference
// (gantry.dev/gpu-products), and the node label key all pods must share a value of
// (gantry.dev/topology-key). It says what is wrong with them, if anything.
func PlacementOf(annotations map[string]string) (products []string, topologyKey string, err error) {
	if v, ok := annotations[gantry.GPUProductsAnnotation]; ok {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			switch {
			case p == "":
				return nil, "", fmt.Errorf("annotation %s=%q names an empty product", gantry.GPUProductsAnnotation, v)
			case slices.Contains(products, p):
				return nil, "", fmt.Errorf("annotation %s=%q names %q twice", gantry.GPUProductsAnnotation, v, p)
			}
			if errs := validation.IsValidLabelValue(p); len(errs) > 0 {
				return nil, "", fmt.Errorf("annotation %s: %q is not a node label value: %s", gantry.GPUProductsAnnotation, p, strings.Join(errs, "; "))
			}
			products = append(products, p)
		}
		if len(products) > gantry.MaxGPUProducts {
			return nil, "", fmt.Errorf("annotation %s lists %d products; at most %d are allowed", gantry.GPUProductsAnnotation, len(products), gantry.MaxGPUProducts)
		}
	}
	if v, ok := annotations[gantry.TopologyKeyAnnotation]; ok {
		if errs := validation.IsQualifiedName(v); len(errs) > 0 {
			return nil, "", fmt.Errorf("annotation %s: %q is not a node label key: %s", gantry.TopologyKeyAnnotation, v, strings.Join(errs, "; "))
		}
		topologyKey = v
	}
	return products, topologyKey, nil
}

// DataLocationOf reads where a job's data lives (gantry.dev/data-location: comma-separated key=value
// labels of WorkerClusters); nil when the job does not say.
func DataLocationOf(annotations map[string]string) ([]gantry.LabelTerm, error) {
	v, ok := annotations[gantry.DataLocationAnnotation]
	if !ok {
		return nil, nil
	}
	var terms []gantry.LabelTerm
	for _, t := range strings.Split(v, ",") {
		key, value, found := strings.Cut(strings.TrimSpace(t), "=")
		if !found {
			return nil, fmt.Errorf("annotation %s=%q: %q is not key=value", gantry.DataLocationAnnotation, v, t)
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, fmt.Errorf("annotation %s: %q is not a label key: %s", gantry.DataLocationAnnotation, key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			return nil, fmt.Errorf("annotation %s: %q is not a label value: %s", gantry.DataLocationAnnotation, value, strings.Join(errs, "; "))
		}
		if slices.ContainsFunc(terms, func(o gantry.LabelTerm) bool { return o.Key == key }) {
			return nil, fmt.Errorf("annotation %s=%q names %q twice", gantry.DataLocationAnnotation, v, key)
		}
		terms = append(terms, gantry.LabelTerm{Key: key, Value: value})
	}
	if len(terms) > gantry.MaxDataLocationTerms {
		return nil, fmt.Errorf("annotation %s has %d terms; at most %d are allowed", gantry.DataLocationAnnotation, len(terms), gantry.MaxDataLocationTerms)
	}
	return terms, nil
}

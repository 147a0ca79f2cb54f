package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/agent/admission"
	"github.com/gantry-dev/gantry/agent/agenttest"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

var res = hubtest.Resources

// quantityCmp compares quantities by value.
var quantityCmp = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func TestPodRequests(t *testing.T) {
	cases := map[string]struct {
		pod  *corev1.Pod
		want corev1.ResourceList
	}{
		"one container": {
			pod:  agenttest.MakePod("p", "ns").Request("cpu", "2", "nvidia.com/gpu", "1").Obj(),
			want: res("cpu", "2", "nvidia.com/gpu", "1"),
		},
		"containers add up": {
			pod:  agenttest.MakePod("p", "ns").Request("cpu", "1", "memory", "1Gi").Container("side", "cpu", "500m").Obj(),
			want: res("cpu", "1500m", "memory", "1Gi"),
		},
		"a larger init container wins": {
			pod:  agenttest.MakePod("p", "ns").Request("cpu", "1").InitContainer("init", "cpu", "4", "memory", "2Gi").Obj(),
			want: res("cpu", "4", "memory", "2Gi"),
		},
		"a smaller init container does not count": {
			pod:  agenttest.MakePod("p", "ns").Request("cpu", "4").InitContainer("init", "cpu", "1").Obj(),
			want: res("cpu", "4"),
		},
		"overhead is added": {
			pod:  agenttest.MakePod("p", "ns").Request("cpu", "1").Overhead("cpu", "250m", "memory", "120Mi").Obj(),
			want: res("cpu", "1250m", "memory", "120Mi"),
		},
		"no requests": {
			pod:  agenttest.MakePod("p", "ns").Obj(),
			want: corev1.ResourceList{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PodRequests(tc.pod), quantityCmp); diff != "" {
				t.Errorf("PodRequests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUsesNode(t *testing.T) {
	cases := map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"pending, unbound":  {agenttest.MakePod("p", "ns").Obj(), false},
		"bound, pending":    {agenttest.MakePod("p", "ns").Node("n1").Obj(), true},
		"running":           {agenttest.MakePod("p", "ns").Node("n1").Phase(corev1.PodRunning).Obj(), true},
		"succeeded":         {agenttest.MakePod("p", "ns").Node("n1").Phase(corev1.PodSucceeded).Obj(), false},
		"failed":            {agenttest.MakePod("p", "ns").Node("n1").Phase(corev1.PodFailed).Obj(), false},
		"unknown but bound": {agenttest.MakePod("p", "ns").Node("n1").Phase(corev1.PodUnknown).Obj(), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := UsesNode(tc.pod); got != tc.want {
				t.Errorf("UsesNode = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGangFromCopy(t *testing.T) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := agenttest.MakeCopy("train", "team-a").Priority(7).Created(created).
		PodSet("launcher", 1, "cpu", "1").
		PodSet("workers", 4, "nvidia.com/gpu", "8").NodeSelector(gantryv1beta1.GPUProductLabel, "H100").Obj()
	c.Spec.PodSets[1].Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	affinity := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"r1"}}}}}}
	c.Spec.PodSets[1].RequiredNodeAffinity = affinity
	c.Spec.PodSets[1].GPUProducts = []string{"H100", "A100"}
	c.Spec.TopologyKey = "topology.kubernetes.io/zone"
	want := admission.Gang{
		Key:          "team-a/train",
		Priority:     7,
		CreationTime: created,
		TopologyKey:  "topology.kubernetes.io/zone",
		PodSets: []admission.PodSet{
			{Name: "launcher", Count: 1, Requests: res("cpu", "1")},
			{Name: "workers", Count: 4, Requests: res("nvidia.com/gpu", "8"),
				NodeSelector:     map[string]string{gantryv1beta1.GPUProductLabel: "H100"},
				Tolerations:      []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}},
				RequiredAffinity: affinity,
				GPUProducts:      []string{"H100", "A100"}},
		},
	}
	if diff := cmp.Diff(want, GangFromCopy(c), quantityCmp); diff != "" {
		t.Errorf("GangFromCopy (-want +got):\n%s", diff)
	}
}

func TestAdmissionOf(t *testing.T) {
	c := agenttest.MakeCopy("train", "team-a").
		PodSet("launcher", 1, "cpu", "1").
		PodSet("workers", 2, "nvidia.com/gpu", "8").Obj()
	placement := admission.Placement{
		{PodSet: "launcher", Node: "n1", Count: 1, Domain: "zone-b"},
		{PodSet: "workers", Node: "n2", Count: 1, GPUProduct: "A100", Domain: "zone-b"},
		{PodSet: "workers", Node: "n3", Count: 1, GPUProduct: "A100", Domain: "zone-b"},
	}
	want := &gantryv1beta1.Admission{
		PodSets:        []gantryv1beta1.PodSetAdmission{{Name: "launcher"}, {Name: "workers", GPUProduct: "A100"}},
		TopologyDomain: "zone-b",
	}
	if diff := cmp.Diff(want, AdmissionOf(c, placement, "")); diff != "" {
		t.Errorf("AdmissionOf (-want +got):\n%s", diff)
	}
	plain := admission.Placement{{PodSet: "launcher", Node: "n1", Count: 1}, {PodSet: "workers", Node: "n2", Count: 2}}
	if got := AdmissionOf(c, plain, ""); got != nil {
		t.Errorf("AdmissionOf a placement without choices = %+v, want nil", got)
	}
	want = &gantryv1beta1.Admission{PodSets: []gantryv1beta1.PodSetAdmission{{Name: "launcher"}, {Name: "workers"}}, PodGroup: "train-1a2b3c4d"}
	if diff := cmp.Diff(want, AdmissionOf(c, plain, "train-1a2b3c4d")); diff != "" {
		t.Errorf("AdmissionOf a gang with a PodGroup (-want +got):\n%s", diff)
	}
}

func TestJobs(t *testing.T) {
	c := agenttest.MakeCopy("train", "ns").HubUID("u1").Obj()
	cases := map[string]struct {
		job          *batchv1.Job
		owns, finish bool
	}{
		"foreign":                 {agenttest.MakeJob("train", "ns").Obj(), false, false},
		"another workload's":      {agenttest.MakeJob("train", "ns").Workload("u2").Obj(), false, false},
		"ours, running":           {agenttest.MakeJob("train", "ns").Workload("u1").Obj(), true, false},
		"ours, complete":          {agenttest.MakeJob("train", "ns").Workload("u1").Finished(batchv1.JobComplete).Obj(), true, true},
		"ours, failed":            {agenttest.MakeJob("train", "ns").Workload("u1").Finished(batchv1.JobFailed).Obj(), true, true},
		"ours, failing (not yet)": {agenttest.MakeJob("train", "ns").Workload("u1").Finished(batchv1.JobFailureTarget).Obj(), true, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := OwnsJob(c, tc.job); got != tc.owns {
				t.Errorf("OwnsJob = %v, want %v", got, tc.owns)
			}
			if got := JobFinished(c, tc.job); got != tc.finish {
				t.Errorf("JobFinished = %v, want %v", got, tc.finish)
			}
		})
	}
	t.Run("empty label value is not a match for a Job without the label", func(t *testing.T) {
		if OwnsJob(agenttest.MakeCopy("x", "ns").HubUID("").Obj(), agenttest.MakeJob("x", "ns").Obj()) {
			t.Error("OwnsJob = true, want false")
		}
	})
}

func TestProgressOf(t *testing.T) {
	gang := agenttest.MakeCopy("train", "ns").HubUID("u1").
		PodSet("launcher", 1, "cpu", "1").
		PodSet("workers", 3, "nvidia.com/gpu", "8").Obj()
	launcher := func(name string) *agenttest.PodWrapper {
		return agenttest.MakePod(name, "ns").Workload("u1").Request("cpu", "1")
	}
	worker := func(name string) *agenttest.PodWrapper {
		return agenttest.MakePod(name, "ns").Workload("u1").Request("nvidia.com/gpu", "8")
	}
	cases := map[string]struct {
		pods []*corev1.Pod
		want Progress
	}{
		"no pods": {
			want: Progress{Left: map[string]int32{"launcher": 1, "workers": 3}, Bound: map[string]map[string]int32{}},
		},
		"unbound pods still need the reservation": {
			pods: []*corev1.Pod{launcher("l").Obj(), worker("w0").Obj()},
			want: Progress{Left: map[string]int32{"launcher": 1, "workers": 3}, Bound: map[string]map[string]int32{}},
		},
		"bound pods go to the pod set with their requests": {
			pods: []*corev1.Pod{worker("a").Node("n1").Obj(), worker("b").Node("n2").Obj(), launcher("c").Node("n1").Obj()},
			want: Progress{
				Left:  map[string]int32{"launcher": 0, "workers": 1},
				Bound: map[string]map[string]int32{"launcher": {"n1": 1}, "workers": {"n1": 1, "n2": 1}},
			},
		},
		"terminated pods count, bound or not": {
			pods: []*corev1.Pod{worker("a").Node("n1").Phase(corev1.PodSucceeded).Obj(), worker("b").Phase(corev1.PodFailed).Obj()},
			want: Progress{
				Left:  map[string]int32{"launcher": 1, "workers": 1},
				Bound: map[string]map[string]int32{"workers": {"n1": 1}},
			},
		},
		"pods that match no pod set fill the first one with room": {
			pods: []*corev1.Pod{agenttest.MakePod("odd", "ns").Workload("u1").Node("n3").Request("cpu", "7").Obj()},
			want: Progress{
				Left:  map[string]int32{"launcher": 0, "workers": 3},
				Bound: map[string]map[string]int32{"launcher": {"n3": 1}},
			},
		},
		"pods beyond the counts change nothing": {
			pods: []*corev1.Pod{
				worker("a").Node("n1").Obj(), worker("b").Node("n1").Obj(), worker("c").Node("n1").Obj(),
				worker("d").Node("n2").Obj(), launcher("l").Node("n2").Obj(), launcher("m").Node("n2").Obj(),
			},
			want: Progress{
				Left:  map[string]int32{"launcher": 0, "workers": 0},
				Bound: map[string]map[string]int32{"launcher": {"n2": 1}, "workers": {"n1": 3}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ProgressOf(gang, tc.pods)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ProgressOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTrimPlacement(t *testing.T) {
	gpu := res("nvidia.com/gpu", "8")
	at := func(ps, node string, n int32) admission.Assignment {
		return admission.Assignment{PodSet: ps, Node: node, Count: n, Requests: gpu}
	}
	full := admission.Placement{at("w", "n1", 2), at("w", "n2", 2), at("w", "n3", 1)}
	cases := map[string]struct {
		placement admission.Placement
		progress  Progress
		want      admission.Placement
	}{
		"nothing started": {
			placement: full,
			progress:  Progress{Left: map[string]int32{"w": 5}},
			want:      full,
		},
		"bound pods come off their own nodes first": {
			placement: full,
			progress:  Progress{Left: map[string]int32{"w": 3}, Bound: map[string]map[string]int32{"w": {"n2": 2}}},
			want:      admission.Placement{at("w", "n1", 2), at("w", "n3", 1)},
		},
		"pods bound elsewhere come off the last assignments": {
			placement: full,
			progress:  Progress{Left: map[string]int32{"w": 3}, Bound: map[string]map[string]int32{"w": {"n9": 2}}},
			want:      admission.Placement{at("w", "n1", 2), at("w", "n2", 1)},
		},
		"terminated pods (not bound) come off the last assignments": {
			placement: full,
			progress:  Progress{Left: map[string]int32{"w": 4}},
			want:      admission.Placement{at("w", "n1", 2), at("w", "n2", 2)},
		},
		"all started: nothing left": {
			placement: full,
			progress:  Progress{Left: map[string]int32{"w": 0}, Bound: map[string]map[string]int32{"w": {"n1": 2, "n2": 2, "n3": 1}}},
			want:      admission.Placement{},
		},
		"a placement smaller than what is left is kept": {
			placement: admission.Placement{at("w", "n1", 1)},
			progress:  Progress{Left: map[string]int32{"w": 5}},
			want:      admission.Placement{at("w", "n1", 1)},
		},
		"pod sets are trimmed independently": {
			placement: admission.Placement{at("a", "n1", 1), at("b", "n1", 2), at("b", "n2", 2)},
			progress:  Progress{Left: map[string]int32{"a": 1, "b": 1}, Bound: map[string]map[string]int32{"b": {"n1": 2, "n2": 1}}},
			want:      admission.Placement{at("a", "n1", 1), at("b", "n2", 1)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := append(admission.Placement(nil), tc.placement...)
			got := TrimPlacement(tc.placement, tc.progress)
			if diff := cmp.Diff(tc.want, got, quantityCmp); diff != "" {
				t.Errorf("TrimPlacement (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.placement, quantityCmp); diff != "" {
				t.Errorf("TrimPlacement changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

func TestCapacityFromSummary(t *testing.T) {
	s := admission.Summary{
		Nodes:      3,
		ReadyNodes: 2,
		Resources: []admission.ResourceCapacity{{
			Name:              gantryv1beta1.GPUResource,
			Allocatable:       resource.MustParse("16"),
			Free:              resource.MustParse("6"),
			LargestFreeOnNode: resource.MustParse("4"),
			LargestFreeNode:   "n2",
		}},
		GPUProducts: []admission.GPUProductCapacity{{
			Product: "NVIDIA-A100", Nodes: 2, Allocatable: 16, Free: 6, LargestFreeOnNode: 4, LargestFreeNode: "n2",
			Shapes: []admission.ShapeCount{{GPUs: 1, Pods: 6}, {GPUs: 2, Pods: 3}, {GPUs: 4, Pods: 1}, {GPUs: 8, Pods: 0}},
		}},
	}
	want := gantryv1beta1.CapacitySummary{
		Nodes:      3,
		ReadyNodes: 2,
		Resources: []gantryv1beta1.ResourceCapacity{{
			Name:              gantryv1beta1.GPUResource,
			Allocatable:       resource.MustParse("16"),
			Free:              resource.MustParse("6"),
			LargestFreeOnNode: resource.MustParse("4"),
			Admitted:          ptr.To(resource.MustParse("10")),
		}},
		GPUProducts: []gantryv1beta1.GPUProductCapacity{{
			Product: "NVIDIA-A100", Nodes: 2, Allocatable: 16, Free: 6, LargestFreeOnNode: 4,
			Shapes: []gantryv1beta1.GPUShapeCount{{GPUs: 1, Pods: 6}, {GPUs: 2, Pods: 3}, {GPUs: 4, Pods: 1}, {GPUs: 8, Pods: 0}},
		}},
	}
	admitted := map[corev1.ResourceName]int64{gantryv1beta1.GPUResource: 10000, corev1.ResourceCPU: 4000} // no CPU on the nodes
	if diff := cmp.Diff(want, CapacityFromSummary(s, admitted), quantityCmp); diff != "" {
		t.Errorf("CapacityFromSummary (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(gantryv1beta1.CapacitySummary{}, CapacityFromSummary(admission.Summary{}, nil)); diff != "" {
		t.Errorf("CapacityFromSummary of an empty cluster (-want +got):\n%s", diff)
	}
}

func TestHeldToAdmission(t *testing.T) {
	g := admission.Gang{Key: "ns/w", TopologyKey: "zone", PodSets: []admission.PodSet{
		{Name: "main", Count: 2, GPUProducts: []string{"H100", "A100"}, NodeSelector: map[string]string{"pool": "gpu"}},
	}}
	a := &gantryv1beta1.Admission{PodSets: []gantryv1beta1.PodSetAdmission{{Name: "main", GPUProduct: "A100"}}, TopologyDomain: "zone-b"}
	got := heldToAdmission(g, a)
	want := []admission.PodSet{{Name: "main", Count: 2, GPUProducts: []string{"A100"},
		NodeSelector: map[string]string{"pool": "gpu", "zone": "zone-b"}}}
	if diff := cmp.Diff(want, got.PodSets); diff != "" {
		t.Errorf("heldToAdmission (-want +got):\n%s", diff)
	}
	if len(g.PodSets[0].GPUProducts) != 2 || len(g.PodSets[0].NodeSelector) != 1 {
		t.Errorf("the gang passed in was modified: %+v", g.PodSets[0])
	}
	if diff := cmp.Diff(g, heldToAdmission(g, nil)); diff != "" {
		t.Errorf("without an admission the gang changed (-want +got):\n%s", diff)
	}
}

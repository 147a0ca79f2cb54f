package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/agent/agenttest"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/kueue"
)

// clusterQueue is a ClusterQueue of the cohort with one resource group of GPUs over the flavors, each
// given as name, nominal, and holding reserved.
func clusterQueue(name, cohort string, flavors ...kueueFlavor) *kueue.ClusterQueue {
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueue.ClusterQueueSpec{CohortName: cohort}}
	g := kueue.ResourceGroup{CoveredResources: []corev1.ResourceName{gantryv1beta1.GPUResource}}
	for _, f := range flavors {
		q := kueue.ResourceQuota{Name: gantryv1beta1.GPUResource, NominalQuota: resource.MustParse(f.nominal)}
		if f.borrow != "" {
			q.BorrowingLimit = ptr.To(resource.MustParse(f.borrow))
		}
		if f.lend != "" {
			q.LendingLimit = ptr.To(resource.MustParse(f.lend))
		}
		g.Flavors = append(g.Flavors, kueue.FlavorQuotas{Name: f.name, Resources: []kueue.ResourceQuota{q}})
		cq.Status.FlavorsReservation = append(cq.Status.FlavorsReservation, kueue.FlavorUsage{Name: f.name,
			Resources: []kueue.ResourceUsage{{Name: gantryv1beta1.GPUResource, Total: resource.MustParse(f.reserved)}}})
	}
	cq.Spec.ResourceGroups = []kueue.ResourceGroup{g}
	return cq
}

type kueueFlavor struct{ name, nominal, reserved, borrow, lend string }

// kueueOf is a Kueue with LocalQueue "team" of namespace ns feeding ClusterQueue "a", and the queues,
// cohorts and flavors given.
func kueueOf(cqs []*kueue.ClusterQueue, cohorts []*kueue.Cohort, flavors ...*kueue.ResourceFlavor) *Kueue {
	st := &Kueue{LocalQueues: map[types.NamespacedName]*kueue.LocalQueue{
		{Namespace: "ns", Name: "team"}: {ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "ns"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "a"}}},
		ClusterQueues: map[string]*kueue.ClusterQueue{}, Cohorts: map[string]*kueue.Cohort{}, Flavors: map[string]*kueue.ResourceFlavor{},
		Workloads: map[types.UID]*kueue.Workload{}}
	for _, cq := range cqs {
		st.ClusterQueues[cq.Name] = cq
	}
	for _, c := range cohorts {
		st.Cohorts[c.Name] = c
	}
	for _, f := range flavors {
		st.Flavors[f.Name] = f
	}
	return st
}

func flavor(name string, labels ...string) *kueue.ResourceFlavor {
	f := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueue.ResourceFlavorSpec{NodeLabels: map[string]string{}}}
	for i := 0; i < len(labels); i += 2 {
		f.Spec.NodeLabels[labels[i]] = labels[i+1]
	}
	return f
}

func inKueue(w *agenttest.CopyWrapper) *gantryv1beta1.Workload {
	c := w.Obj()
	c.Annotations = map[string]string{gantryv1beta1.KueueLocalQueueAnnotation: "team"}
	return c
}

func TestKueueAccountingJudgesAsKueueDoes(t *testing.T) {
	gpus := func(name, nominal, reserved string) kueueFlavor {
		return kueueFlavor{name: name, nominal: nominal, reserved: reserved}
	}
	cases := map[string]struct {
		kueue *Kueue
		copy  *gantryv1beta1.Workload
		// want: "fits", else "never: ..." or "wait: ..." with a part of the message.
		want string
	}{
		"within what the queue has left": {kueueOf([]*kueue.ClusterQueue{clusterQueue("a", "", gpus("gpu", "16", "8"))}, nil),
			inKueue(copyOf("j", 0, 1, "8")), "fits"},
		"more than it has left": {kueueOf([]*kueue.ClusterQueue{clusterQueue("a", "", gpus("gpu", "16", "8"))}, nil),
			inKueue(copyOf("j", 0, 2, "6")), "wait: Kueue's ClusterQueue a has 8 nvidia.com/gpu of flavor gpu left, borrowing included; the job needs 12"},
		"more than it could ever hold": {kueueOf([]*kueue.ClusterQueue{clusterQueue("a", "", gpus("gpu", "16", "0"))}, nil),
			inKueue(copyOf("j", 0, 3, "8")), "never: Kueue's ClusterQueue a can hold at most 16 nvidia.com/gpu of flavor gpu"},
		"borrowed from its cohort": {kueueOf([]*kueue.ClusterQueue{clusterQueue("a", "pool", gpus("gpu", "8", "8")),
			clusterQueue("b", "pool", gpus("gpu", "8", "0"))}, nil), inKueue(copyOf("j", 0, 1, "8")), "fits"},
		"up to its borrowing limit": {kueueOf([]*kueue.ClusterQueue{clusterQueue("a", "pool", kueueFlavor{"gpu", "8", "8", "4", ""}),
			clusterQueue("b", "pool", gpus("gpu", "8", "0"))}, nil), inKueue(copyOf("j", 0, 1, "8")),
			"wait: has 4 nvidia.com/gpu of flavor gpu left"},
		"up to what the others lend": {kueueOf([]*kueue.ClusterQueue{clusterQueue("a", "pool", gpus("gpu", "8", "8")),
			clusterQueue("b", "pool", kueueFlavor{"gpu", "8", "0", "", "2"})}, nil), inKueue(copyOf("j", 0, 1, "8")),
			"wait: has 2 nvidia.com/gpu of flavor gpu left"},
		"with the quota of a parent cohort": {kueueOf([]*kueue.ClusterQueue{clusterQueue("a", "pool", gpus("gpu", "0", "0"))},
			[]*kueue.Cohort{{ObjectMeta: metav1.ObjectMeta{Name: "pool"}, Spec: kueue.CohortSpec{ParentName: "org"}},
				{ObjectMeta: metav1.ObjectMeta{Name: "org"}, Spec: kueue.CohortSpec{ResourceGroups: clusterQueue("x", "", gpus("gpu", "16", "0")).Spec.ResourceGroups}}}),
			inKueue(copyOf("j", 0, 2, "8")), "fits"},
		"on the flavor its node selector picks": {kueueOf([]*kueue.ClusterQueue{clusterQueue("a", "", gpus("h100", "16", "0"), gpus("a100", "8", "8"))}, nil,
			flavor("h100", "gpu", "h100"), flavor("a100", "gpu", "a100")), inKueue(copyOf("j", 0, 1, "8").NodeSelector("gpu", "a100")),
			"wait: has 0 nvidia.com/gpu of flavor a100 left"},
		"on the next flavor when the first is full": {kueueOf([]*kueue.ClusterQueue{clusterQueue("a", "", gpus("h100", "8", "8"), gpus("a100", "8", "0"))}, nil),
			inKueue(copyOf("j", 0, 1, "8")), "fits"},
		"a resource the queue has no quota for": {kueueOf([]*kueue.ClusterQueue{clusterQueue("a", "", gpus("gpu", "16", "0"))}, nil),
			inKueue(copyOf("j", 0, 1, "8").PodSet("side", 1, "cpu", "2")), "never: Kueue's ClusterQueue a has no quota for cpu"},
		"a LocalQueue that does not exist": {kueueOf([]*kueue.ClusterQueue{clusterQueue("a", "", gpus("gpu", "16", "0"))}, nil),
			inKueue(agenttest.MakeCopy("j", "other").PodSet("main", 1, "nvidia.com/gpu", "8")), "wait: Kueue's LocalQueue team does not exist in namespace other"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, fits, never, msg := newKueueQuotas(tc.kueue).judge(tc.copy)
			got := "fits"
			switch {
			case never:
				got = "never: " + msg
			case !fits:
				got = "wait: " + msg
			}
			kind, part, _ := strings.Cut(tc.want, ": ")
			if !strings.HasPrefix(got, kind) || !strings.Contains(got, part) {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
}

func TestKueueQueueUnusable(t *testing.T) {
	st := kueueOf([]*kueue.ClusterQueue{clusterQueue("a", "", kueueFlavor{"gpu", "16", "0", "", ""})}, nil)
	st.ClusterQueues["a"].Status.Conditions = []metav1.Condition{{Type: kueue.ClusterQueueActive, Status: metav1.ConditionFalse, Message: "flavor gpu not found"}}
	if _, fits, never, msg := newKueueQuotas(st).judge(inKueue(copyOf("j", 0, 1, "8"))); fits || never || !strings.Contains(msg, "ClusterQueue a is inactive: flavor gpu not found") {
		t.Errorf("an inactive queue: fits %v never %v %q, want a wait that says so", fits, never, msg)
	}
	st.ClusterQueues["a"].Status.Conditions = nil
	st.LocalQueues[types.NamespacedName{Namespace: "ns", Name: "team"}].Spec.StopPolicy = ptr.To("Hold")
	if _, fits, _, msg := newKueueQuotas(st).judge(inKueue(copyOf("j", 0, 1, "8"))); fits || !strings.Contains(msg, "LocalQueue team is stopped (stopPolicy Hold)") {
		t.Errorf("a stopped LocalQueue: fits %v %q, want a wait that says so", fits, msg)
	}
}

// The agent admits through a LocalQueue only what its ClusterQueue holds, counting what it admitted
// there that Kueue does not count yet; a worker that runs no Kueue rejects such a copy.
func TestDecideAdmitsThroughKueueWithinItsQueue(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("n1"), gpuNode("n2"), gpuNode("n3")}
	queue := func() *Kueue {
		return kueueOf([]*kueue.ClusterQueue{clusterQueue("a", "", kueueFlavor{"gpu", "16", "0", "", ""})}, nil)
	}
	cases := map[string]struct {
		in   Input
		want map[string]string
	}{
		"two fit the queue, the third waits though the nodes hold it": {
			in: Input{Nodes: nodes, Kueue: queue(), Copies: []*gantryv1beta1.Workload{
				inKueue(copyOf("a", 0, 1, "8")), inKueue(copyOf("b", 1, 1, "8")), inKueue(copyOf("c", 2, 1, "8"))}},
			want: map[string]string{"ns/a": "True/Fits", "ns/b": "True/Fits", "ns/c": "False/KueueQueueFull"}},
		"one admitted before, not counted by Kueue yet, takes its part": {
			in: Input{Nodes: nodes, Kueue: queue(), Copies: []*gantryv1beta1.Workload{
				inKueue(copyOf("a", 0, 2, "8").Admitted()), inKueue(copyOf("b", 1, 1, "8"))}},
			want: map[string]string{"ns/b": "False/KueueQueueFull"}},
		"a worker that runs no Kueue": {
			in:   Input{Nodes: nodes, Copies: []*gantryv1beta1.Workload{inKueue(copyOf("a", 0, 1, "8"))}},
			want: map[string]string{"ns/a": "False/KueueQuotaTooSmall"}},
		"a copy not sent through Kueue is not judged by it": {
			in:   Input{Nodes: nodes, Kueue: queue(), Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 3, "8").Obj()}},
			want: map[string]string{"ns/a": "True/Fits"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.in.Now = now
			got := outcomeOf(tc.in, Decide(tc.in)).Updates
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s: %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}

// A pass reads Kueue's objects only when a copy goes through a LocalQueue or a job waits in one.
func TestThroughKueue(t *testing.T) {
	plain := copyOf("a", 0, 1, "8").Obj()
	job := agenttest.MakeJob("a", "ns").Workload("hub-a").Obj()
	if ThroughKueue([]*gantryv1beta1.Workload{plain}, jobs(job)) {
		t.Error("a pass without Kueue's copies or jobs reads Kueue")
	}
	if !ThroughKueue([]*gantryv1beta1.Workload{plain, inKueue(copyOf("b", 0, 1, "8"))}, nil) {
		t.Error("a copy sent through a LocalQueue did not count")
	}
	job.Labels[gantryv1beta1.KueueQueueNameLabel] = "team"
	if !ThroughKueue(nil, jobs(job)) {
		t.Error("a job waiting in a LocalQueue did not count")
	}
}

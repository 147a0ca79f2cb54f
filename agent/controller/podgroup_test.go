package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/agent/admission"
	"github.com/gantry-dev/gantry/agent/agenttest"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
)

func TestGangPodGroup(t *testing.T) {
	c := agenttest.MakeCopy("train", "team-a").
		PodSet("launcher", 1, "cpu", "1").
		PodSet("workers", 3, "nvidia.com/gpu", "8").
		PodSet("submitter", 1, "cpu", "1").Deferred().Obj()
	c.Labels[gantryv1beta1.JobNameLabel] = "train"
	c.Spec.TopologyKey = "topology.kubernetes.io/zone"
	for i := range c.Spec.PodSets[:2] {
		c.Spec.PodSets[i].PriorityClassName = "research-high"
	}
	want := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PodGroupName(c),
			Namespace: "team-a",
			Labels: map[string]string{
				gantryv1beta1.WorkloadUIDLabel:   "hub-train",
				gantryv1beta1.DispatchEpochLabel: "1",
				gantryv1beta1.JobNameLabel:       "train",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "gantry.dev/v1beta1", Kind: "Workload", Name: "train",
				UID: "copy-train", Controller: ptr.To(true)}},
		},
		Spec: schedulingv1beta1.PodGroupSpec{
			// The deferred submitter comes once the others run: it is not waited for, and its class does not count.
			SchedulingPolicy:      schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 4}},
			PriorityClassName:     "research-high",
			SchedulingConstraints: &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: "topology.kubernetes.io/zone"}}},
		},
	}
	if diff := cmp.Diff(want, GangPodGroup(c)); diff != "" {
		t.Errorf("GangPodGroup (-want +got):\n%s", diff)
	}

	for name, c := range map[string]*gantryv1beta1.Workload{
		"one pod":                         copyOf("one", 0, 1, "8").Obj(),
		"one pod and a deferred pod set":  copyOf("two", 0, 1, "8").PodSet("submitter", 1, "cpu", "1").Deferred().Obj(),
		"no pod set that is not deferred": agenttest.MakeCopy("d", "ns").PodSet("later", 4, "cpu", "1").Deferred().Obj(),
	} {
		if pg := GangPodGroup(c); pg != nil {
			t.Errorf("%s: GangPodGroup = %s, want none: fewer than two pods would wait for each other", name, pg.Name)
		}
	}
}

// The name is a valid label value for any copy name, and a later dispatch's copy (another UID) never
// gets the name of an earlier one's PodGroup.
func TestPodGroupName(t *testing.T) {
	long := strings.Repeat("a", 60) + "-b." + strings.Repeat("c", 100)
	seen := map[string]bool{}
	for _, c := range []*gantryv1beta1.Workload{
		agenttest.MakeCopy("train", "ns").Obj(),
		agenttest.MakeCopy("train", "ns").UID("copy-train-epoch-2").Obj(),
		agenttest.MakeCopy(long, "ns").Obj(),
		agenttest.MakeCopy(strings.Repeat("x", 54)+".y", "ns").Obj(),
	} {
		name := PodGroupName(c)
		if errs := validation.IsValidLabelValue(name); len(errs) > 0 {
			t.Errorf("PodGroupName(%q) = %q: not a label value: %v", c.Name, name, errs)
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("PodGroupName(%q) = %q: not an object name: %v", c.Name, name, errs)
		}
		if seen[name] {
			t.Errorf("PodGroupName(%q) = %q twice", c.Name, name)
		}
		seen[name] = true
	}
	if got := PodGroupName(agenttest.MakeCopy("train", "ns").Obj()); !strings.HasPrefix(got, "train-") {
		t.Errorf("PodGroupName = %q, want it to start with the copy's name", got)
	}
}

// An admission gives the gang its PodGroup only where the cluster serves the API; an admitted copy's
// PodGroup that is missing is made again while pods may wait for it; once its pods were all placed, a
// pod that comes after them lowers the quorum to one.
func TestDecidePodGroups(t *testing.T) {
	gang := func() *agenttest.CopyWrapper { return copyOf("a", 0, 2, "8") }
	admitted := func() *gantryv1beta1.Workload {
		c := gang().Admitted().Obj()
		c.Status.Admission = &gantryv1beta1.Admission{PodGroup: PodGroupName(c)}
		return c
	}
	pgKey := types.NamespacedName{Namespace: "ns", Name: PodGroupName(gang().Obj())}
	pgWith := func(minCount int32) map[types.NamespacedName]*schedulingv1beta1.PodGroup {
		pg := GangPodGroup(gang().Obj())
		pg.Spec.SchedulingPolicy.Gang.MinCount = minCount
		return map[types.NamespacedName]*schedulingv1beta1.PodGroup{pgKey: pg}
	}
	member := func(name string) *agenttest.PodWrapper {
		p := gpuPod(name, "hub-a", "8")
		p.Labels[gantryv1beta1.PodGroupLabel] = pgKey.Name
		return p
	}
	twoNodes := []*corev1.Node{gpuNode("n1"), gpuNode("n2")}
	placement := map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 1, "n2", 1)}
	job := jobs(agenttest.MakeJob("a", "ns").Workload("hub-a").Created(now).Obj())
	none := map[types.NamespacedName]*schedulingv1beta1.PodGroup{}
	cases := map[string]struct {
		in                        Input
		wantGangOnAdmit           bool
		wantMadeAgain, wantLoosen []string
	}{
		"served: the admission makes the gang's PodGroup": {
			in:              Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{gang().Obj()}, PodGroups: none},
			wantGangOnAdmit: true,
		},
		"not served: the admission makes none": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{gang().Obj()}},
		},
		"missing while pods wait: made again": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{admitted()}, Jobs: job, Placements: placement,
				Pods: []*corev1.Pod{member("a-0").Obj(), member("a-1").Obj()}, PodGroups: none},
			wantMadeAgain: []string{pgKey.Name},
		},
		"missing once the gang was placed: nothing waits for it": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{admitted()}, Jobs: job, Placements: placement,
				Pods: []*corev1.Pod{member("a-0").Node("n1").Obj(), member("a-1").Node("n2").Obj()}, PodGroups: none},
		},
		"placed whole, then a replacement waits: the quorum goes to one": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{admitted()}, Jobs: job, Placements: placement,
				Pods: []*corev1.Pod{member("a-0").Node("n1").Phase(corev1.PodSucceeded).Obj(), member("a-1").Node("n2").Phase(corev1.PodFailed).Obj(),
					member("a-2").Obj()}, PodGroups: pgWith(2)},
			wantLoosen: []string{pgKey.Name},
		},
		"still being placed: the quorum holds": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{admitted()}, Jobs: job, Placements: placement,
				Pods: []*corev1.Pod{member("a-0").Node("n1").Obj(), member("a-1").Obj()}, PodGroups: pgWith(2)},
		},
		"placed whole and nothing waits: no write": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{admitted()}, Jobs: job, Placements: placement,
				Pods: []*corev1.Pod{member("a-0").Node("n1").Obj(), member("a-1").Node("n2").Obj()}, PodGroups: pgWith(2)},
		},
		"lowered already: no write": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{admitted()}, Jobs: job, Placements: placement,
				Pods:      []*corev1.Pod{member("a-0").Node("n1").Phase(corev1.PodSucceeded).Obj(), member("a-1").Node("n2").Obj(), member("a-2").Obj()},
				PodGroups: pgWith(1)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.in.Now = now
			plan := Decide(tc.in)
			gotGang := false
			for _, u := range plan.Updates {
				if u.Admits() && u.PodGroup != nil {
					gotGang = true
					if u.PodGroup.Name != pgKey.Name || u.PodGroup.Spec.SchedulingPolicy.Gang.MinCount != 2 {
						t.Errorf("admission's PodGroup = %s with quorum %d, want %s with 2", u.PodGroup.Name, u.PodGroup.Spec.SchedulingPolicy.Gang.MinCount, pgKey.Name)
					}
				}
			}
			if gotGang != tc.wantGangOnAdmit {
				t.Errorf("admission with a PodGroup: %v, want %v (updates %+v)", gotGang, tc.wantGangOnAdmit, plan.Updates)
			}
			if diff := cmp.Diff(tc.wantMadeAgain, names(plan.PodGroups)); diff != "" {
				t.Errorf("PodGroups made again (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLoosen, names(plan.Loosen)); diff != "" {
				t.Errorf("PodGroups loosened (-want +got):\n%s", diff)
			}
		})
	}
}

func names(pgs []*schedulingv1beta1.PodGroup) []string {
	var out []string
	for _, pg := range pgs {
		out = append(out, pg.Name)
	}
	return out
}

// A gang the scheduler would not place as a whole is given up with the scheduler's word on the group,
// which speaks for all of its pods.
func TestPlacementTimeoutSaysWhatTheSchedulerSaidOfTheGang(t *testing.T) {
	const timeout = 5 * time.Minute
	c := copyOf("a", 0, 2, "8").Admitted().Obj()
	c.Status.Admission = &gantryv1beta1.Admission{PodGroup: PodGroupName(c)}
	pg := GangPodGroup(c)
	pg.Status.Conditions = []metav1.Condition{{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse,
		Reason: schedulingv1beta1.PodGroupReasonUnschedulable, Message: "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"}}
	member := func(name string) *corev1.Pod {
		p := gpuPod(name, "hub-a", "8").Unschedulable("pod group is unschedulable").Obj()
		p.Labels[gantryv1beta1.PodGroupLabel] = pg.Name
		return p
	}
	in := Input{Nodes: []*corev1.Node{gpuNode("n1"), gpuNode("n2")}, Copies: []*gantryv1beta1.Workload{c},
		Jobs:       jobs(agenttest.MakeJob("a", "ns").Workload("hub-a").Created(now.Add(-timeout - time.Second)).Obj()),
		Pods:       []*corev1.Pod{member("a-0"), member("a-1")},
		Placements: map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 1, "n2", 1)},
		PodGroups:  map[types.NamespacedName]*schedulingv1beta1.PodGroup{client.ObjectKeyFromObject(pg): pg},
		Now:        now, PlacementTimeout: timeout}
	plan := Decide(in)
	if len(plan.Updates) != 1 || plan.Updates[0].Condition.Reason != gantryv1beta1.ReasonPlacementTimeout {
		t.Fatalf("updates %+v, want the copy given up", plan.Updates)
	}
	want := "PodGroup " + pg.Name + ": Unschedulable: minCount (2) cannot be satisfied"
	if msg := plan.Updates[0].Condition.Message; !strings.Contains(msg, want) || !strings.HasPrefix(msg, "2 of 2 pods not placed") {
		t.Errorf("message %q, want the count and %q", msg, want)
	}
}

package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/agent/admission"
	"github.com/gantry-dev/gantry/agent/agenttest"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/expectations"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

var (
	t0  = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	now = t0.Add(time.Hour)
)

func gpuNode(name string) *corev1.Node { return gpuNodeWrapper(name).Obj() }

func gpuNodeWrapper(name string) *agenttest.NodeWrapper {
	return agenttest.MakeNode(name).Allocatable("cpu", "64", "memory", "512Gi").GPUs(8, "NVIDIA-A100")
}

// copyOf is a copy created minutes after t0 with one pod set "main" of count pods of gpus GPUs each.
func copyOf(name string, minutes int, count int32, gpus string) *agenttest.CopyWrapper {
	return agenttest.MakeCopy(name, "ns").Created(t0.Add(time.Duration(minutes)*time.Minute)).
		PodSet("main", count, "nvidia.com/gpu", gpus)
}

func gpuPod(name, hubUID string, gpus string) *agenttest.PodWrapper {
	return agenttest.MakePod(name, "ns").Workload(hubUID).Request("nvidia.com/gpu", gpus)
}

func jobs(js ...*batchv1.Job) map[types.NamespacedName]client.Object {
	out := map[types.NamespacedName]client.Object{}
	for _, j := range js {
		out[types.NamespacedName{Namespace: j.Namespace, Name: j.Name}] = j
	}
	return out
}

func gpuPlacement(nodeCounts ...any) admission.Placement {
	var p admission.Placement
	for i := 0; i < len(nodeCounts); i += 2 {
		p = append(p, admission.Assignment{PodSet: "main", Node: nodeCounts[i].(string), Count: int32(nodeCounts[i+1].(int)),
			Requests: res("nvidia.com/gpu", "8")})
	}
	return p
}

// outcome is what a test checks of a Plan.
type outcome struct {
	// Updates: copy key -> "Status/Reason".
	Updates map[string]string
	// Reserved: copy key -> pods reserved in the snapshot.
	Reserved map[string]int32
	// FreeGPU: node -> nvidia.com/gpu free in the snapshot (negative when overcommitted).
	FreeGPU map[string]int64
	// Remembered: copy keys whose placement the plan keeps for the next pass.
	Remembered []string
}

func outcomeOf(in Input, plan Plan) outcome {
	o := outcome{Updates: map[string]string{}, Reserved: map[string]int32{}, FreeGPU: map[string]int64{}}
	for _, u := range plan.Updates {
		o.Updates[GangKey(u.Copy)] = string(u.Condition.Status) + "/" + u.Condition.Reason
	}
	for _, c := range in.Copies {
		if p, ok := plan.Snapshot.Reservation(GangKey(c)); ok {
			for _, a := range p {
				o.Reserved[GangKey(c)] += a.Count
			}
		}
		if _, ok := plan.Placements[c.UID]; ok {
			o.Remembered = append(o.Remembered, GangKey(c))
		}
	}
	for _, n := range in.Nodes {
		free, _ := plan.Snapshot.NodeFree(n.Name)
		q := free[gantryv1beta1.GPUResource]
		o.FreeGPU[n.Name] = q.Value()
	}
	return o
}

func TestDecide(t *testing.T) {
	twoNodes := []*corev1.Node{gpuNode("n1"), gpuNode("n2")}
	cases := map[string]struct {
		in   Input
		want outcome
	}{
		"a copy that fits is admitted and reserved": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Obj()}},
			want: outcome{
				Updates:    map[string]string{"ns/a": "True/Fits"},
				Reserved:   map[string]int32{"ns/a": 2},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/a"},
			},
		},
		"a later copy waits for the earlier one's reservation": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{
				copyOf("b", 1, 1, "4").Obj(), copyOf("a", 0, 2, "6").Obj(),
			}},
			want: outcome{
				Updates:    map[string]string{"ns/a": "True/Fits", "ns/b": "False/InsufficientResources"},
				Reserved:   map[string]int32{"ns/a": 2},
				FreeGPU:    map[string]int64{"n1": 2, "n2": 2},
				Remembered: []string{"ns/a"},
			},
		},
		"higher priority goes first": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{
				copyOf("a", 0, 2, "6").Obj(), copyOf("b", 1, 1, "8").Priority(10).Obj(),
			}},
			want: outcome{
				Updates:    map[string]string{"ns/a": "False/InsufficientResources", "ns/b": "True/Fits"},
				Reserved:   map[string]int32{"ns/b": 1},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 8},
				Remembered: []string{"ns/b"},
			},
		},
		"several copies are admitted in one pass": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{
				copyOf("a", 0, 1, "8").Obj(), copyOf("b", 1, 1, "8").Obj(), copyOf("c", 2, 1, "8").Obj(),
			}},
			want: outcome{
				Updates:    map[string]string{"ns/a": "True/Fits", "ns/b": "True/Fits", "ns/c": "False/InsufficientResources"},
				Reserved:   map[string]int32{"ns/a": 1, "ns/b": 1},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/a", "ns/b"},
			},
		},
		"a pod bigger than every node never fits": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 1, "16").Obj()}},
			want: outcome{
				Updates: map[string]string{"ns/a": "False/NeverFits"},
				FreeGPU: map[string]int64{"n1": 8, "n2": 8},
			},
		},
		"a selector no node matches": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{
				copyOf("a", 0, 1, "1").NodeSelector(gantryv1beta1.GPUProductLabel, "NVIDIA-H100").Obj(),
			}},
			want: outcome{
				Updates: map[string]string{"ns/a": "False/NoEligibleNode"},
				FreeGPU: map[string]int64{"n1": 8, "n2": 8},
			},
		},
		"a foreign Job with the copy's name rejects it, and it reserves nothing": {
			in: Input{
				Nodes:  twoNodes,
				Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 1, "8").Obj(), copyOf("b", 1, 2, "8").Obj()},
				Jobs:   jobs(agenttest.MakeJob("a", "ns").Obj()),
			},
			want: outcome{
				Updates:    map[string]string{"ns/a": "False/JobNameConflict", "ns/b": "True/Fits"},
				Reserved:   map[string]int32{"ns/b": 2},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/b"},
			},
		},
		"a Job Gantry created for an earlier workload of the same name holds the copy back, and it reserves nothing": {
			in: Input{
				Nodes:  twoNodes,
				Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 1, "8").Obj(), copyOf("b", 1, 2, "8").Obj()},
				Jobs:   jobs(agenttest.MakeJob("a", "ns").Workload("hub-a-before").Obj()),
			},
			want: outcome{
				Updates:    map[string]string{"ns/a": "False/PreviousJobPresent", "ns/b": "True/Fits"},
				Reserved:   map[string]int32{"ns/b": 2},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/b"},
			},
		},
		"a copy held back by an earlier Job is decided again once that Job is gone": {
			in: Input{
				Nodes: twoNodes,
				Copies: []*gantryv1beta1.Workload{
					copyOf("a", 0, 1, "8").Condition(metav1.ConditionFalse, gantryv1beta1.ReasonPreviousJobPresent, "m").Obj(),
				},
			},
			want: outcome{
				Updates:    map[string]string{"ns/a": "True/Fits"},
				Reserved:   map[string]int32{"ns/a": 1},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 8},
				Remembered: []string{"ns/a"},
			},
		},
		"a Job with an empty workload-uid label is not Gantry's: it rejects the copy": {
			in: Input{
				Nodes:  twoNodes,
				Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 1, "8").Obj()},
				Jobs:   jobs(agenttest.MakeJob("a", "ns").Workload("").Obj()),
			},
			want: outcome{
				Updates: map[string]string{"ns/a": "False/JobNameConflict"},
				FreeGPU: map[string]int64{"n1": 8, "n2": 8},
			},
		},
		"a copy that needs a cordoned node waits for it": {
			in: Input{
				Nodes:  []*corev1.Node{gpuNode("n1"), gpuNodeWrapper("n2").Cordoned().Obj()},
				Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Obj()},
			},
			want: outcome{
				Updates: map[string]string{"ns/a": "False/InsufficientResources"},
				FreeGPU: map[string]int64{"n1": 8, "n2": 8},
			},
		},
		"a copy that needs nodes that are not Ready waits for them": {
			in: Input{
				Nodes:  []*corev1.Node{gpuNodeWrapper("n1").Unreachable().Obj(), gpuNodeWrapper("n2").Unreachable().Obj()},
				Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Obj()},
			},
			want: outcome{
				Updates: map[string]string{"ns/a": "False/InsufficientResources"},
				FreeGPU: map[string]int64{"n1": 8, "n2": 8},
			},
		},
		"a copy too big even with every node back is rejected": {
			in: Input{
				Nodes:  []*corev1.Node{gpuNode("n1"), gpuNodeWrapper("n2").Cordoned().Obj()},
				Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 3, "8").Obj()},
			},
			want: outcome{
				Updates: map[string]string{"ns/a": "False/NeverFits"},
				FreeGPU: map[string]int64{"n1": 8, "n2": 8},
			},
		},
		"the copy's own Job is no conflict": {
			in: Input{
				Nodes:  twoNodes,
				Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 1, "8").Obj()},
				Jobs:   jobs(agenttest.MakeJob("a", "ns").Workload("hub-a").Obj()),
			},
			want: outcome{
				Updates:    map[string]string{"ns/a": "True/Fits"},
				Reserved:   map[string]int32{"ns/a": 1},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 8},
				Remembered: []string{"ns/a"},
			},
		},
		"an admitted copy holds only its pods not yet bound; bound ones are usage": {
			in: Input{
				Nodes:      twoNodes,
				Copies:     []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Admitted().Obj(), copyOf("b", 1, 1, "1").Obj()},
				Pods:       []*corev1.Pod{gpuPod("a-0", "hub-a", "8").Node("n1").Phase(corev1.PodRunning).Obj(), gpuPod("a-1", "hub-a", "8").Obj()},
				Placements: map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 1, "n2", 1)},
			},
			want: outcome{
				Updates:    map[string]string{"ns/b": "False/InsufficientResources"},
				Reserved:   map[string]int32{"ns/a": 1},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/a"},
			},
		},
		"an admitted copy whose pods all run holds nothing more": {
			in: Input{
				Nodes:  twoNodes,
				Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Admitted().Obj()},
				Pods: []*corev1.Pod{
					gpuPod("a-0", "hub-a", "8").Node("n1").Phase(corev1.PodRunning).Obj(),
					gpuPod("a-1", "hub-a", "8").Node("n2").Phase(corev1.PodRunning).Obj(),
				},
				Placements: map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 1, "n2", 1)},
			},
			want: outcome{
				Updates:    map[string]string{},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/a"},
			},
		},
		"an admitted copy with no known placement is placed again": {
			in: Input{
				Nodes:  twoNodes,
				Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Admitted().Obj(), copyOf("b", 1, 1, "1").Obj()},
			},
			want: outcome{
				Updates:    map[string]string{"ns/b": "False/InsufficientResources"},
				Reserved:   map[string]int32{"ns/a": 2},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/a"},
			},
		},
		"an admitted copy is held even where the cluster is overcommitted": {
			in: Input{
				Nodes:  []*corev1.Node{gpuNode("n1")},
				Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 1, "8").Admitted().Obj()},
				Pods:   []*corev1.Pod{agenttest.MakePod("other", "ns").Node("n1").Request("nvidia.com/gpu", "8").Obj()},
			},
			want: outcome{
				Updates:    map[string]string{},
				Reserved:   map[string]int32{"ns/a": 1},
				FreeGPU:    map[string]int64{"n1": -8},
				Remembered: []string{"ns/a"},
			},
		},
		"a finished Job releases its copy's reservation": {
			in: Input{
				Nodes:      twoNodes,
				Copies:     []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Admitted().Obj(), copyOf("b", 1, 2, "8").Obj()},
				Jobs:       jobs(agenttest.MakeJob("a", "ns").Workload("hub-a").Finished(batchv1.JobComplete).Obj()),
				Placements: map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 1, "n2", 1)},
			},
			want: outcome{
				Updates:    map[string]string{"ns/b": "True/Fits"},
				Reserved:   map[string]int32{"ns/b": 2},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/b"},
			},
		},
		"a copy being deleted is ignored": {
			in: Input{
				Nodes:      twoNodes,
				Copies:     []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Admitted().Deleting().Obj(), copyOf("b", 1, 2, "8").Obj(), copyOf("c", 2, 1, "1").Deleting().Obj()},
				Placements: map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 1, "n2", 1)},
			},
			want: outcome{
				Updates:    map[string]string{"ns/b": "True/Fits"},
				Reserved:   map[string]int32{"ns/b": 2},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/b"},
			},
		},
		"an admission the cache does not show yet still holds its room": {
			in: Input{
				Nodes:      twoNodes,
				Copies:     []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").ResourceVersion("5").Obj(), copyOf("b", 1, 1, "1").Obj()},
				Placements: map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 1, "n2", 1)},
				Assumed: assumed("copy-a", "5", metav1.Condition{
					Type: gantryv1beta1.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: gantryv1beta1.ReasonFits}),
			},
			want: outcome{
				Updates:    map[string]string{"ns/b": "False/InsufficientResources"},
				Reserved:   map[string]int32{"ns/a": 2},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/a"},
			},
		},
		"a copy rejected for good stays rejected": {
			in: Input{
				Nodes: twoNodes,
				Copies: []*gantryv1beta1.Workload{
					copyOf("a", 0, 1, "1").Condition(metav1.ConditionFalse, gantryv1beta1.ReasonNeverFits, "m").Obj(),
					copyOf("b", 1, 1, "1").Condition(metav1.ConditionFalse, gantryv1beta1.ReasonJobNameConflict, "m").Obj(),
				},
			},
			want: outcome{
				Updates: map[string]string{},
				FreeGPU: map[string]int64{"n1": 8, "n2": 8},
			},
		},
		"a copy rejected for good is decided again when its spec changed": {
			in: Input{
				Nodes: twoNodes,
				Copies: []*gantryv1beta1.Workload{
					copyOf("a", 0, 1, "1").Condition(metav1.ConditionFalse, gantryv1beta1.ReasonNeverFits, "m").Generation(2).Obj(),
				},
			},
			want: outcome{
				Updates:    map[string]string{"ns/a": "True/Fits"},
				Reserved:   map[string]int32{"ns/a": 1},
				FreeGPU:    map[string]int64{"n1": 7, "n2": 8},
				Remembered: []string{"ns/a"},
			},
		},
		"a transient rejection is decided again": {
			in: Input{
				Nodes: twoNodes,
				Copies: []*gantryv1beta1.Workload{
					copyOf("a", 0, 1, "1").Condition(metav1.ConditionFalse, gantryv1beta1.ReasonInsufficientResources, "m").Obj(),
				},
			},
			want: outcome{
				Updates:    map[string]string{"ns/a": "True/Fits"},
				Reserved:   map[string]int32{"ns/a": 1},
				FreeGPU:    map[string]int64{"n1": 7, "n2": 8},
				Remembered: []string{"ns/a"},
			},
		},
		"an admitted copy stays admitted": {
			in: Input{
				Nodes:  []*corev1.Node{gpuNode("n1").DeepCopy()},
				Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 1, "16").Admitted().Obj()},
			},
			want: outcome{
				Updates: map[string]string{},
				FreeGPU: map[string]int64{"n1": 8},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.in.Now = now
			got := outcomeOf(tc.in, Decide(tc.in))
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideReservationTTL(t *testing.T) {
	const ttl = 5 * time.Minute
	twoNodes := []*corev1.Node{gpuNode("n1"), gpuNode("n2")}
	ownJob := jobs(agenttest.MakeJob("a", "ns").Workload("hub-a").Obj())
	cases := map[string]struct {
		in   Input
		want outcome
	}{
		"an admission the hub has not confirmed within the TTL is released": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{
				copyOf("a", 0, 2, "8").Admitted().Since(now.Add(-ttl - time.Second)).Obj(),
				copyOf("b", 1, 1, "8").Obj(),
			}, Placements: map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 1, "n2", 1)}},
			want: outcome{
				Updates:    map[string]string{"ns/a": "False/ReservationExpired", "ns/b": "True/Fits"},
				Reserved:   map[string]int32{"ns/b": 1},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 8},
				Remembered: []string{"ns/b"},
			},
		},
		"within the TTL the room is held": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{
				copyOf("a", 0, 2, "8").Admitted().Since(now.Add(-ttl + time.Second)).Obj(),
				copyOf("b", 1, 1, "8").Obj(),
			}, Placements: map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 1, "n2", 1)}},
			want: outcome{
				Updates:    map[string]string{"ns/b": "False/InsufficientResources"},
				Reserved:   map[string]int32{"ns/a": 2},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/a"},
			},
		},
		"a confirmed admission never expires": {
			in: Input{Nodes: twoNodes, Jobs: ownJob, Copies: []*gantryv1beta1.Workload{
				copyOf("a", 0, 2, "8").Admitted().Since(now.Add(-time.Hour)).Obj(),
			}, Placements: map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 1, "n2", 1)}},
			want: outcome{
				Reserved:   map[string]int32{"ns/a": 2},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/a"},
			},
		},
		"an expired copy is not admitted again": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{
				copyOf("a", 0, 2, "8").Condition(metav1.ConditionFalse, gantryv1beta1.ReasonReservationExpired, "expired").Obj(),
			}},
			want: outcome{FreeGPU: map[string]int64{"n1": 8, "n2": 8}},
		},
		"an expired copy whose Job the hub created after all is fitted": {
			in: Input{Nodes: twoNodes, Jobs: ownJob, Copies: []*gantryv1beta1.Workload{
				copyOf("a", 0, 2, "8").Condition(metav1.ConditionFalse, gantryv1beta1.ReasonReservationExpired, "expired").Obj(),
			}},
			want: outcome{
				Updates:    map[string]string{"ns/a": "True/Fits"},
				Reserved:   map[string]int32{"ns/a": 2},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/a"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.in.Now, tc.in.ReservationTTL = now, ttl
			got := outcomeOf(tc.in, Decide(tc.in))
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideHoldsNodesForAStarvingCopy(t *testing.T) {
	twoNodes := []*corev1.Node{gpuNode("n1"), gpuNode("n2")}
	in := Input{
		Nodes: twoNodes,
		// A pod of 4 GPUs runs on each node: "big" (two whole nodes) has waited an hour.
		Pods: []*corev1.Pod{
			gpuPod("x-0", "other", "4").Node("n1").Phase(corev1.PodRunning).Obj(),
			gpuPod("x-1", "other", "4").Node("n2").Phase(corev1.PodRunning).Obj(),
		},
		Copies: []*gantryv1beta1.Workload{copyOf("big", 0, 2, "8").Obj(), copyOf("small", 50, 1, "2").Obj()},
		Now:    now,
	}
	got := outcomeOf(in, Decide(in))
	if got.Updates["ns/small"] != "True/Fits" {
		t.Fatalf("without starvation protection small passes big: %v", got.Updates)
	}

	in.StarvationTimeout = 10 * time.Minute
	plan := Decide(in)
	got = outcomeOf(in, plan)
	want := map[string]string{"ns/big": "False/InsufficientResources", "ns/small": "False/HeldForStarvingGang"}
	if diff := cmp.Diff(want, got.Updates); diff != "" {
		t.Errorf("updates (-want +got):\n%s", diff)
	}
	for _, u := range plan.Updates {
		if GangKey(u.Copy) == "ns/small" && !strings.Contains(u.Condition.Message, `"ns/big"`) {
			t.Errorf("small's message %q does not name the copy it waits behind", u.Condition.Message)
		}
	}
}

func TestDecidePlacementTimeout(t *testing.T) {
	const timeout = 5 * time.Minute
	twoNodes := []*corev1.Node{gpuNode("n1"), gpuNode("n2")}
	jobAt := func(created time.Time) map[types.NamespacedName]client.Object {
		return jobs(agenttest.MakeJob("a", "ns").Workload("hub-a").Created(created).Obj())
	}
	admittedA := func() *gantryv1beta1.Workload { return copyOf("a", 0, 2, "8").Admitted().Obj() }
	placed := gpuPod("a-0", "hub-a", "8").Node("n1").Phase(corev1.PodRunning).Obj()
	waiting := gpuPod("a-1", "hub-a", "8").Unschedulable("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.").Obj()
	placement := map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 1, "n2", 1)}
	cases := map[string]struct {
		in   Input
		want outcome
	}{
		"pods still not placed after the timeout: the copy is given up and holds nothing": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{admittedA()}, Jobs: jobAt(now.Add(-timeout - time.Second)),
				Pods: []*corev1.Pod{placed, waiting}, Placements: placement},
			want: outcome{
				Updates: map[string]string{"ns/a": "False/PlacementTimeout"},
				FreeGPU: map[string]int64{"n1": 0, "n2": 8}, // the placed pod still runs until the hub removes the Job
			},
		},
		"within the timeout the rest of the gang is still held": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{admittedA()}, Jobs: jobAt(now.Add(-timeout + time.Second)),
				Pods: []*corev1.Pod{placed, waiting}, Placements: placement},
			want: outcome{
				Reserved:   map[string]int32{"ns/a": 1},
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/a"},
			},
		},
		"a gang all placed never times out": {
			in: Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{admittedA()}, Jobs: jobAt(now.Add(-time.Hour)),
				Pods: []*corev1.Pod{placed, gpuPod("a-1", "hub-a", "8").Node("n2").Phase(corev1.PodRunning).Obj()}, Placements: placement},
			want: outcome{
				FreeGPU:    map[string]int64{"n1": 0, "n2": 0},
				Remembered: []string{"ns/a"},
			},
		},
		"a copy given up is not admitted again": {
			in: Input{Nodes: twoNodes, Jobs: jobAt(now.Add(-time.Hour)), Copies: []*gantryv1beta1.Workload{
				copyOf("a", 0, 2, "8").Condition(metav1.ConditionFalse, gantryv1beta1.ReasonPlacementTimeout, "given up").Obj(),
			}},
			want: outcome{FreeGPU: map[string]int64{"n1": 8, "n2": 8}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.in.Now, tc.in.PlacementTimeout = now, timeout
			plan := Decide(tc.in)
			got := outcomeOf(tc.in, plan)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
			for _, u := range plan.Updates {
				if u.Condition.Reason == gantryv1beta1.ReasonPlacementTimeout &&
					(!strings.Contains(u.Condition.Message, "1 of 2 pods not placed") || !strings.Contains(u.Condition.Message, "Insufficient nvidia.com/gpu")) {
					t.Errorf("message %q does not say what is missing and why", u.Condition.Message)
				}
			}
		})
	}
}

// A deferred pod set (a RayJob's submitter, made once the Ray cluster is ready) is timed from its first
// pod's creation, not from the job's: a Ray cluster slow to come up does not lose the gang its room.
func TestDecidePlacementTimeoutOfDeferredPodSets(t *testing.T) {
	const timeout = 5 * time.Minute
	twoNodes := []*corev1.Node{gpuNode("n1"), gpuNode("n2")}
	ray := func() *gantryv1beta1.Workload {
		return agenttest.MakeCopy("r", "ns").Created(t0).PodSet("head", 1, "nvidia.com/gpu", "8").
			PodSet("submitter", 1, "nvidia.com/gpu", "8").Deferred().Admitted().Obj()
	}
	rayJob := jobs(agenttest.MakeJob("r", "ns").Workload("hub-r").Created(now.Add(-time.Hour)).Obj())
	head := gpuPod("r-head", "hub-r", "8").PodSet("head").Node("n1").Phase(corev1.PodRunning).Created(now.Add(-time.Hour)).Obj()
	submitter := func(created time.Time) *corev1.Pod {
		return gpuPod("r-submitter", "hub-r", "8").PodSet("submitter").Created(created).
			Unschedulable("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.").Obj()
	}
	eight := hubtest.Resources("nvidia.com/gpu", "8")
	placement := map[types.UID]admission.Placement{"copy-r": {
		{PodSet: "head", Node: "n1", Count: 1, Requests: eight}, {PodSet: "submitter", Node: "n2", Count: 1, Requests: eight}}}
	held := outcome{Reserved: map[string]int32{"ns/r": 1}, FreeGPU: map[string]int64{"n1": 0, "n2": 0}, Remembered: []string{"ns/r"}}
	cases := map[string]struct {
		pods []*corev1.Pod
		want outcome
		wake time.Duration
	}{
		"an hour after the job, no submitter pod yet: its room is held and no clock runs": {
			pods: []*corev1.Pod{head}, want: held,
		},
		"the submitter pod made within the timeout: held, and woken when it would run out": {
			pods: []*corev1.Pod{head, submitter(now.Add(-time.Minute))}, want: held, wake: timeout - time.Minute + time.Second,
		},
		"the submitter pod not placed a timeout after it was made: given up": {
			pods: []*corev1.Pod{head, submitter(now.Add(-timeout - time.Second))},
			want: outcome{Updates: map[string]string{"ns/r": "False/PlacementTimeout"}, FreeGPU: map[string]int64{"n1": 0, "n2": 8}},
		},
		"the head not placed a timeout after the job was made: given up, whatever the submitter": {
			pods: []*corev1.Pod{gpuPod("r-head", "hub-r", "8").PodSet("head").Unschedulable("no room").Obj()},
			want: outcome{Updates: map[string]string{"ns/r": "False/PlacementTimeout"}, FreeGPU: map[string]int64{"n1": 8, "n2": 8}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := Input{Nodes: twoNodes, Copies: []*gantryv1beta1.Workload{ray()}, Jobs: rayJob, Pods: tc.pods,
				Placements: placement, Now: now, PlacementTimeout: timeout}
			plan := Decide(in)
			if diff := cmp.Diff(tc.want, outcomeOf(in, plan), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
			if plan.Wake != tc.wake {
				t.Errorf("Wake = %v, want %v", plan.Wake, tc.wake)
			}
		})
	}
}

func TestDecideWakesForTimeouts(t *testing.T) {
	twoNodes := []*corev1.Node{gpuNode("n1"), gpuNode("n2")}
	in := Input{
		Nodes: twoNodes, Now: now,
		Copies: []*gantryv1beta1.Workload{
			copyOf("a", 0, 2, "8").Admitted().Obj(),                                  // its Job exists since 1 minute, no pod placed
			copyOf("b", 0, 1, "8").Admitted().Since(now.Add(-2 * time.Minute)).Obj(), // no Job yet
		},
		Jobs:              jobs(agenttest.MakeJob("a", "ns").Workload("hub-a").Created(now.Add(-time.Minute)).Obj()),
		Placements:        map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 1, "n2", 1)},
		PlacementTimeout:  5 * time.Minute,
		ReservationTTL:    10 * time.Minute,
		StarvationTimeout: time.Hour,
	}
	if got, want := Decide(in).Wake, 4*time.Minute+time.Second; got != want {
		t.Errorf("Wake = %v, want %v (the placement timeout of a)", got, want)
	}
	in.PlacementTimeout = 0
	if got, want := Decide(in).Wake, 8*time.Minute+time.Second; got != want {
		t.Errorf("Wake = %v, want %v (the reservation TTL of b)", got, want)
	}
	in.ReservationTTL = 0
	if got := Decide(in).Wake; got != 0 {
		t.Errorf("Wake = %v with no timeout pending, want 0", got)
	}
}

func TestDecideConditions(t *testing.T) {
	in := Input{
		Nodes: []*corev1.Node{gpuNode("n1"), gpuNode("n2")},
		Copies: []*gantryv1beta1.Workload{
			copyOf("fits", 0, 2, "8").Generation(3).Obj(),
			copyOf("conflict", 1, 1, "1").Obj(),
			copyOf("conflict-empty", 2, 1, "1").Obj(),
			copyOf("earlier", 3, 1, "1").Obj(),
		},
		Jobs: jobs(agenttest.MakeJob("conflict", "ns").Obj(), agenttest.MakeJob("conflict-empty", "ns").Workload("").Obj(),
			agenttest.MakeJob("earlier", "ns").Workload("x").Obj()),
		Now: now,
	}
	plan := Decide(in)
	var got []metav1.Condition
	for _, u := range plan.Updates {
		got = append(got, u.Condition)
	}
	at := metav1.NewTime(now)
	want := []metav1.Condition{
		{
			Type: gantryv1beta1.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: gantryv1beta1.ReasonJobNameConflict,
			Message: "Job ns/conflict already exists in this cluster and was not created by Gantry for this workload " +
				"(it lacks the label gantry.dev/workload-uid=hub-conflict); it is left untouched",
			LastTransitionTime: at,
		},
		{
			Type: gantryv1beta1.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: gantryv1beta1.ReasonJobNameConflict,
			Message: "Job ns/conflict-empty already exists in this cluster and was not created by Gantry for this workload " +
				`(its label gantry.dev/workload-uid is empty, not "hub-conflict-empty"); it is left untouched`,
			LastTransitionTime: at,
		},
		{
			Type: gantryv1beta1.WorkloadAdmitted, Status: metav1.ConditionFalse, Reason: gantryv1beta1.ReasonPreviousJobPresent,
			Message: "Job ns/earlier, created by Gantry for an earlier workload of the same name " +
				`(its label gantry.dev/workload-uid is "x", not "hub-earlier"), is still in this cluster; ` +
				"the hub removes it, and this copy is decided again once it is gone",
			LastTransitionTime: at,
		},
		{
			Type: gantryv1beta1.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: gantryv1beta1.ReasonFits,
			Message: `2 pods on 2 nodes: "main" 1 on n1, 1 on n2`, ObservedGeneration: 3, LastTransitionTime: at,
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
}

// TestDecideWritesOnlyChanges checks that a copy showing the decision already is not written again.
func TestDecideWritesOnlyChanges(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("n1")}
	first := Decide(Input{Nodes: nodes, Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Obj()}, Now: now})
	if len(first.Updates) != 1 || first.Updates[0].Condition.Reason != gantryv1beta1.ReasonInsufficientResources &&
		first.Updates[0].Condition.Reason != gantryv1beta1.ReasonNeverFits {
		t.Fatalf("first pass: want one rejection, got %+v", first.Updates)
	}
	c := first.Updates[0].Condition
	if c.Message == "" {
		t.Error("rejection has no message")
	}
	shown := copyOf("a", 0, 2, "8").Condition(c.Status, c.Reason, c.Message).Obj()
	second := Decide(Input{Nodes: nodes, Copies: []*gantryv1beta1.Workload{shown}, Now: now.Add(time.Minute)})
	if len(second.Updates) != 0 {
		t.Errorf("second pass wrote %+v, want no writes", second.Updates)
	}

	// The same holds while the cache is behind the write: the assumption stands in for the copy.
	stale := copyOf("a", 0, 2, "8").ResourceVersion("7").Obj()
	written := assumed(stale.UID, "7", c)
	third := Decide(Input{Nodes: nodes, Copies: []*gantryv1beta1.Workload{stale}, Now: now.Add(time.Minute), Assumed: written})
	if len(third.Updates) != 0 {
		t.Errorf("pass with a stale cache wrote %+v, want no writes", third.Updates)
	}
	if keepBehind(written, []*gantryv1beta1.Workload{stale}); written.Len() != 1 {
		t.Error("assumption dropped while the cache is still behind")
	}

	// Once the cache moved on, the assumption is dropped.
	fresh := copyOf("a", 0, 2, "8").ResourceVersion("8").Condition(c.Status, c.Reason, c.Message).Obj()
	fourth := Decide(Input{Nodes: nodes, Copies: []*gantryv1beta1.Workload{fresh}, Now: now.Add(time.Minute), Assumed: written})
	if keepBehind(written, []*gantryv1beta1.Workload{fresh}); len(fourth.Updates) != 0 || written.Len() != 0 {
		t.Errorf("pass with a fresh cache: updates %+v, %d assumed; want none", fourth.Updates, written.Len())
	}
}

// assumed is a memory of one Admitted condition written over the copy's version stale.
func assumed(uid types.UID, stale string, c metav1.Condition) *expectations.Written[types.UID, metav1.Condition] {
	w := expectations.NewWritten[types.UID, metav1.Condition]()
	w.Record(uid, stale, c)
	return w
}

func TestDescribePlacement(t *testing.T) {
	at := func(ps, node string, n int32) admission.Assignment {
		return admission.Assignment{PodSet: ps, Node: node, Count: n}
	}
	cases := map[string]struct {
		p    admission.Placement
		want string
	}{
		"one pod":      {admission.Placement{at("main", "n1", 1)}, `1 pod on 1 node: "main" 1 on n1`},
		"two pod sets": {admission.Placement{at("l", "n1", 1), at("w", "n1", 2), at("w", "n2", 4)}, `7 pods on 2 nodes: "l" 1 on n1; "w" 2 on n1, 4 on n2`},
		"long": {
			admission.Placement{at("w", "n1", 1), at("w", "n2", 1), at("w", "n3", 1), at("w", "n4", 1), at("w", "n5", 1), at("w", "n6", 1), at("w", "n7", 1), at("w", "n8", 1)},
			`8 pods on 8 nodes: "w" 1 on n1, 1 on n2, 1 on n3, 1 on n4, 1 on n5, 1 on n6, and 2 more`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := describePlacement(tc.p); got != tc.want {
				t.Errorf("describePlacement = %q, want %q", got, tc.want)
			}
		})
	}
	if got := condition(&gantryv1beta1.Workload{}, metav1.ConditionFalse, "R", strings.Repeat("x", maxConditionMessage+10), now); len(got.Message) != maxConditionMessage {
		t.Errorf("message of %d bytes, want it cut to %d", len(got.Message), maxConditionMessage)
	}
}

// TestDecidePreviousJob plays a Workload submitted again while this cluster was cut off from the hub:
// the Job Gantry created for the earlier Workload of the same name is still here. The copy waits,
// without counting as a rejection of the cluster, and is admitted once that Job is gone.
func TestDecidePreviousJob(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("n1")}
	earlier := jobs(agenttest.MakeJob("a", "ns").Workload("hub-a-before").Obj())
	first := Decide(Input{Nodes: nodes, Copies: []*gantryv1beta1.Workload{copyOf("a", 0, 1, "8").Obj()}, Jobs: earlier, Now: now})
	if len(first.Updates) != 1 {
		t.Fatalf("first pass: updates %+v, want one", first.Updates)
	}
	c := first.Updates[0].Condition
	if c.Status != metav1.ConditionFalse || c.Reason != gantryv1beta1.ReasonPreviousJobPresent {
		t.Fatalf("first pass: %s/%s, want False/%s", c.Status, c.Reason, gantryv1beta1.ReasonPreviousJobPresent)
	}
	if !strings.Contains(c.Message, "Job ns/a") || !strings.Contains(c.Message, `"hub-a-before"`) {
		t.Errorf("message %q does not name the Job and its workload-uid label", c.Message)
	}
	if gantryv1beta1.RejectsCluster(c.Reason) {
		t.Errorf("%s counts as a rejection of the cluster: the hub would never nominate it again", c.Reason)
	}
	if _, ok := first.Snapshot.Reservation("ns/a"); ok {
		t.Error("a copy held back by an earlier Job reserved room")
	}

	shown := copyOf("a", 0, 1, "8").Condition(c.Status, c.Reason, c.Message).Obj()
	if second := Decide(Input{Nodes: nodes, Copies: []*gantryv1beta1.Workload{shown}, Jobs: earlier, Now: now}); len(second.Updates) != 0 {
		t.Errorf("while the earlier Job is there: updates %+v, want none", second.Updates)
	}

	third := Decide(Input{Nodes: nodes, Copies: []*gantryv1beta1.Workload{shown}, Now: now})
	got := outcomeOf(Input{Nodes: nodes, Copies: []*gantryv1beta1.Workload{shown}}, third)
	want := outcome{Updates: map[string]string{"ns/a": "True/Fits"}, Reserved: map[string]int32{"ns/a": 1},
		FreeGPU: map[string]int64{"n1": 0}, Remembered: []string{"ns/a"}}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("once the earlier Job is gone (-want +got):\n%s", diff)
	}
}

// TestDecideWaitsForNodesBack plays a cordoned node that a copy needs: the copy waits, with a message
// naming the node, and is admitted once the node is uncordoned.
func TestDecideWaitsForNodesBack(t *testing.T) {
	copyA := func() *agenttest.CopyWrapper { return copyOf("a", 0, 2, "8") }
	first := Decide(Input{Nodes: []*corev1.Node{gpuNode("n1"), gpuNodeWrapper("n2").Cordoned().Obj()},
		Copies: []*gantryv1beta1.Workload{copyA().Obj()}, Now: now})
	if len(first.Updates) != 1 {
		t.Fatalf("first pass: updates %+v, want one", first.Updates)
	}
	c := first.Updates[0].Condition
	if c.Reason != gantryv1beta1.ReasonInsufficientResources || !strings.Contains(c.Message, "n2 (cordoned)") {
		t.Fatalf("first pass: %s %q, want %s naming n2 as cordoned", c.Reason, c.Message, gantryv1beta1.ReasonInsufficientResources)
	}

	back := []*corev1.Node{gpuNode("n1"), gpuNode("n2")}
	shown := copyA().Condition(c.Status, c.Reason, c.Message).Obj()
	second := Decide(Input{Nodes: back, Copies: []*gantryv1beta1.Workload{shown}, Now: now})
	got := outcomeOf(Input{Nodes: back, Copies: []*gantryv1beta1.Workload{shown}}, second)
	want := outcome{Updates: map[string]string{"ns/a": "True/Fits"}, Reserved: map[string]int32{"ns/a": 2},
		FreeGPU: map[string]int64{"n1": 0, "n2": 0}, Remembered: []string{"ns/a"}}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("once n2 is uncordoned (-want +got):\n%s", diff)
	}
}

// A copy of a kind the cluster does not serve is refused at once, for good, and holds no room; one of
// a kind it serves is fitted as usual.
func TestDecideKindNotServed(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("n1")}
	js := copyOf("a", 0, 1, "8").Obj()
	js.Spec.JobKind = gantryv1beta1.JobKindJobSet
	jobsOnly := map[gantryv1beta1.JobKind]bool{gantryv1beta1.JobKindJob: true}
	p := Decide(Input{Nodes: nodes, Copies: []*gantryv1beta1.Workload{js}, Kinds: jobsOnly, Now: now})
	if len(p.Updates) != 1 || p.Updates[0].Condition.Reason != gantryv1beta1.ReasonKindNotServed ||
		!strings.Contains(p.Updates[0].Condition.Message, "JobSet (jobset.x-k8s.io/v1alpha2)") {
		t.Fatalf("updates %+v", p.Updates)
	}
	if !gantryv1beta1.RejectsCluster(gantryv1beta1.ReasonKindNotServed) {
		t.Error("KindNotServed is not a final answer: the hub would nominate the cluster again")
	}
	if _, ok := p.Snapshot.Reservation("ns/a"); ok {
		t.Error("a copy of a kind not served reserved room")
	}
	served := Decide(Input{Nodes: nodes, Copies: []*gantryv1beta1.Workload{js},
		Kinds: map[gantryv1beta1.JobKind]bool{gantryv1beta1.JobKindJob: true, gantryv1beta1.JobKindJobSet: true}, Now: now})
	if len(served.Updates) != 1 || served.Updates[0].Condition.Reason != gantryv1beta1.ReasonFits {
		t.Fatalf("served: updates %+v", served.Updates)
	}
}

// A copy whose pods name a PriorityClass or RuntimeClass the cluster lacks is refused at once, with the
// class named, and holds no room; with the classes there it is fitted; with the classes not known it is
// not judged on them.
func TestDecideClassNotFound(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("n1")}
	named := func(priority, runtime string) *gantryv1beta1.Workload {
		c := copyOf("a", 0, 1, "8").Obj()
		c.Spec.PodSets[0].PriorityClassName, c.Spec.PodSets[0].RuntimeClassName = priority, runtime
		return c
	}
	for name, tc := range map[string]struct {
		copy          *gantryv1beta1.Workload
		priority      map[string]bool
		runtime       map[string]*nodev1.RuntimeClass
		reason, words string
	}{
		"no such PriorityClass": {copy: named("urgent", ""), priority: map[string]bool{"low": true}, runtime: map[string]*nodev1.RuntimeClass{},
			reason: gantryv1beta1.ReasonClassNotFound, words: `names PriorityClass "urgent", which this cluster does not have`},
		"no such RuntimeClass": {copy: named("", "nvidia"), priority: map[string]bool{}, runtime: map[string]*nodev1.RuntimeClass{"kata": {}},
			reason: gantryv1beta1.ReasonClassNotFound, words: `names RuntimeClass "nvidia"`},
		"both there": {copy: named("urgent", "nvidia"), priority: map[string]bool{"urgent": true}, runtime: map[string]*nodev1.RuntimeClass{"nvidia": {}},
			reason: gantryv1beta1.ReasonFits},
		"classes unknown": {copy: named("urgent", "nvidia"), reason: gantryv1beta1.ReasonFits},
	} {
		t.Run(name, func(t *testing.T) {
			p := Decide(Input{Nodes: nodes, Copies: []*gantryv1beta1.Workload{tc.copy}, PriorityClasses: tc.priority, RuntimeClasses: tc.runtime, Now: now})
			if len(p.Updates) != 1 || p.Updates[0].Condition.Reason != tc.reason || !strings.Contains(p.Updates[0].Condition.Message, tc.words) {
				t.Fatalf("updates %+v, want %s saying %q", p.Updates, tc.reason, tc.words)
			}
			if _, held := p.Snapshot.Reservation("ns/a"); held != (tc.reason == gantryv1beta1.ReasonFits) {
				t.Errorf("room held %v", held)
			}
		})
	}
	if !gantryv1beta1.RejectsCluster(gantryv1beta1.ReasonClassNotFound) {
		t.Error("ClassNotFound is not a rejection: the hub would wait on the cluster")
	}
}

// A copy that does not fit learns which admitted copies, of no higher priority and with their Job here,
// would make room by going; one of lower priority than all of them learns of none.
func TestDecideAsksTheWhatIf(t *testing.T) {
	in := Input{
		Nodes: []*corev1.Node{gpuNode("n1")},
		Pods:  []*corev1.Pod{gpuPod("low-0", "hub-low", "8").Node("n1").PodSet("main").Obj()},
		Copies: []*gantryv1beta1.Workload{
			copyOf("low", 0, 1, "8").Priority(1).Admitted().Since(now.Add(-time.Minute)).Obj(),
			copyOf("high", 1, 1, "8").Priority(10).Obj(),
			copyOf("lowest", 2, 1, "8").Priority(0).Obj(),
		},
		Jobs:       jobs(agenttest.MakeJob("low", "ns").Workload("hub-low").Obj()),
		Placements: map[types.UID]admission.Placement{"copy-low": gpuPlacement("n1", 1)},
		Now:        now,
	}
	plan := Decide(in)
	got, conds := map[string][]string{}, map[string]metav1.Condition{}
	for _, u := range plan.Updates {
		got[GangKey(u.Copy)], conds[GangKey(u.Copy)] = u.WouldFitWithout, u.Condition
		if u.Condition.Reason != gantryv1beta1.ReasonInsufficientResources {
			t.Errorf("%s: %s", GangKey(u.Copy), u.Condition.Reason)
		}
	}
	if want := map[string][]string{"ns/high": {"ns/low"}, "ns/lowest": nil}; !cmp.Equal(got, want) {
		t.Errorf("what-ifs %v, want %v", got, want)
	}
	// A copy already showing what the what-if says gets no write.
	in.Copies[1].Status.WouldFitWithout = []string{"ns/low"}
	in.Copies[1].Status.Conditions = []metav1.Condition{conds["ns/high"]}
	for _, u := range Decide(in).Updates {
		if GangKey(u.Copy) == "ns/high" {
			t.Errorf("wrote %s again", GangKey(u.Copy))
		}
	}
}

// While the hub deletes a workload a waiting copy's what-if named, the nodes that copy could use are
// held for it: a smaller copy of lower priority does not take the room the preemption frees.
func TestDecideHoldsTheRoomAPreemptionFrees(t *testing.T) {
	leaving := agenttest.MakeJob("low", "ns").Workload("hub-low").Obj()
	leaving.DeletionTimestamp = &metav1.Time{Time: now}
	high := copyOf("high", 1, 2, "8").Priority(10).Obj()
	high.Status.WouldFitWithout = []string{"ns/low"}
	in := Input{
		Nodes: []*corev1.Node{gpuNode("n1"), gpuNode("n2")},
		Pods:  []*corev1.Pod{gpuPod("low-0", "hub-low", "8").Node("n1").PodSet("main").Obj()},
		Copies: []*gantryv1beta1.Workload{
			copyOf("low", 0, 1, "8").Priority(1).Admitted().Since(now.Add(-time.Minute)).Obj(),
			high, copyOf("small", 2, 1, "8").Obj(),
		},
		Jobs:       jobs(leaving),
		Placements: map[types.UID]admission.Placement{"copy-low": gpuPlacement("n1", 1)},
		Now:        now,
	}
	want := map[string]string{"ns/high": "False/InsufficientResources", "ns/small": "False/HeldForStarvingGang"}
	if got := outcomeOf(in, Decide(in)).Updates; !cmp.Equal(got, want) {
		t.Errorf("updates %v, want %v", got, want)
	}
	// The victim's pod went, so the waiting copy's message changes: the write keeps what its what-if
	// named, by which the hub preempts; a write without it would have the hub look for other victims.
	high.Status.Conditions = []metav1.Condition{{Type: gantryv1beta1.WorkloadAdmitted, Status: metav1.ConditionFalse,
		Reason: gantryv1beta1.ReasonInsufficientResources, Message: "as the last pass saw it"}}
	in.Pods = nil
	plan := Decide(in)
	i := slices.IndexFunc(plan.Updates, func(u Update) bool { return GangKey(u.Copy) == "ns/high" })
	if i < 0 || !slices.Equal(plan.Updates[i].WouldFitWithout, []string{"ns/low"}) {
		t.Errorf("the waiting copy's write does not keep what its what-if named: %+v", plan.Updates)
	}
	if got := outcomeOf(in, plan).Updates["ns/small"]; got != "False/HeldForStarvingGang" {
		t.Errorf("small copy %s once the victim's pod is gone", got)
	}
	leaving.DeletionTimestamp = nil // not preempted: the small copy may use the free node
	in.Pods = []*corev1.Pod{gpuPod("low-0", "hub-low", "8").Node("n1").PodSet("main").Obj()}
	if got := outcomeOf(in, Decide(in)).Updates["ns/small"]; got != "True/Fits" {
		t.Errorf("small copy %s without a preemption under way", got)
	}
}

// The RuntimeClass a pod set names counts as it does at the pods' admission on the cluster: its pod
// overhead adds to each pod's requests (two 3-CPU pods with 1 CPU of overhead do not fit a 7-CPU node),
// its scheduling's node selector and tolerations narrow and widen where they may run.
func TestDecideCountsTheRuntimeClass(t *testing.T) {
	cpuNode := func(name, cpu string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		n := agenttest.MakeNode(name).Allocatable("cpu", cpu, "pods", "110").Obj()
		n.Labels, n.Spec.Taints = labels, taints
		return n
	}
	twoPods := func(runtime string) *gantryv1beta1.Workload {
		c := copyOf("a", 0, 2, "0").Obj()
		c.Spec.PodSets[0].Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
		c.Spec.PodSets[0].RuntimeClassName = runtime
		return c
	}
	kata := &nodev1.RuntimeClass{Handler: "kata", Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
	sandboxed := &nodev1.RuntimeClass{Handler: "gvisor", Scheduling: &nodev1.Scheduling{
		NodeSelector: map[string]string{"sandbox": "gvisor"},
		Tolerations:  []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}}
	taint := corev1.Taint{Key: "sandbox", Value: "only", Effect: corev1.TaintEffectNoSchedule}
	for name, tc := range map[string]struct {
		nodes  []*corev1.Node
		copy   *gantryv1beta1.Workload
		reason string
	}{
		"without overhead two 3-CPU pods fit 7 CPUs": {nodes: []*corev1.Node{cpuNode("n", "7", nil)}, copy: twoPods(""), reason: gantryv1beta1.ReasonFits},
		"with 1 CPU of overhead each they do not":    {nodes: []*corev1.Node{cpuNode("n", "7", nil)}, copy: twoPods("kata"), reason: gantryv1beta1.ReasonNeverFits},
		"with overhead they fit 8 CPUs":              {nodes: []*corev1.Node{cpuNode("n", "8", nil)}, copy: twoPods("kata"), reason: gantryv1beta1.ReasonFits},
		"the class's node selector leaves out a node without its label": {nodes: []*corev1.Node{cpuNode("n", "64", nil)},
			copy: twoPods("gvisor"), reason: gantryv1beta1.ReasonNoEligibleNode},
		"the class's tolerations let it onto a node it selects and taints": {nodes: []*corev1.Node{cpuNode("n", "64", map[string]string{"sandbox": "gvisor"}, taint)},
			copy: twoPods("gvisor"), reason: gantryv1beta1.ReasonFits},
		"without the class the tainted node is not for it": {nodes: []*corev1.Node{cpuNode("n", "64", map[string]string{"sandbox": "gvisor"}, taint)},
			copy: twoPods(""), reason: gantryv1beta1.ReasonNoEligibleNode},
	} {
		t.Run(name, func(t *testing.T) {
			p := Decide(Input{Nodes: tc.nodes, Copies: []*gantryv1beta1.Workload{tc.copy},
				RuntimeClasses: map[string]*nodev1.RuntimeClass{"kata": kata, "gvisor": sandboxed}, Now: now})
			if len(p.Updates) != 1 || p.Updates[0].Condition.Reason != tc.reason {
				t.Fatalf("updates %+v, want %s", p.Updates, tc.reason)
			}
		})
	}
}

// TestDecideCountsWhatAdmittedCopiesAskFor: the plan's Admitted, which the report carries for the hub,
// adds the copies it keeps admitted and those it admits, and leaves out those whose Job finished and
// those it could not admit.
func TestDecideCountsWhatAdmittedCopiesAskFor(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("n1"), gpuNode("n2")}
	in := Input{
		Nodes: nodes,
		Copies: []*gantryv1beta1.Workload{
			copyOf("running", 0, 1, "4").Admitted().Obj(),
			copyOf("done", 1, 1, "8").Admitted().Obj(),
			copyOf("new", 2, 2, "2").Obj(),
			copyOf("too-big", 3, 1, "16").Obj(),
		},
		Jobs: jobs(agenttest.MakeJob("running", "ns").Workload("hub-running").Obj(),
			agenttest.MakeJob("done", "ns").Workload("hub-done").Finished(batchv1.JobComplete).Obj()),
		Placements: map[types.UID]admission.Placement{"copy-running": gpuPlacement("n1", 1)},
		Now:        now,
	}
	plan := Decide(in)
	if got := outcomeOf(in, plan).Updates; got["ns/new"] != "True/Fits" || got["ns/too-big"] == "True/Fits" {
		t.Fatalf("updates %v: want ns/new admitted and ns/too-big not", got)
	}
	want := map[corev1.ResourceName]int64{gantryv1beta1.GPUResource: (4 + 2*2) * 1000}
	if diff := cmp.Diff(want, plan.Admitted); diff != "" {
		t.Errorf("Admitted (-want +got):\n%s", diff)
	}
}

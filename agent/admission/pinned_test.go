package admission

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// onNode pins a pod set to one node, as a pod template's spec.nodeName does.
func onNode(ps PodSet, node string) PodSet {
	ps.NodeName = node
	return ps
}

// atMost caps the pods of a pod set a node takes, as host ports, an anti-affinity of the set's pods by
// node or a spread over nodes do.
func atMost(ps PodSet, n int32) PodSet {
	ps.MaxPerNode = n
	return ps
}

// What a pod template states of its placement counts in admission: a node it names takes all its pods
// or none, and never more than that node holds; a per-node limit spreads its pods.
func TestAdmitWhatThePodTemplateStates(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	g := func(key string, age time.Duration, sets ...PodSet) Gang {
		return Gang{Key: key, CreationTime: t0.Add(-age), PodSets: sets}
	}
	three := []Node{gpuNode("a", 8, h100), gpuNode("b", 8, h100), gpuNode("c", 8, h100)}
	cases := []struct {
		name  string
		gangs []Gang
		want  []Decision
		words string // in the message of the last decision
	}{{
		name: "two gangs naming the same node: the second waits, though other nodes are free",
		gangs: []Gang{
			g("first", time.Hour, onNode(gpuPods("w", 1, 8), "b")),
			g("second", time.Minute, onNode(gpuPods("w", 1, 8), "b")),
		},
		want: []Decision{
			{Key: "first", Admitted: true, Placement: Placement{at("w", "b", 1)}},
			{Key: "second", Unfit: &Unfit{Reason: InsufficientResources}},
		},
	}, {
		name:  "a node that is not there: no eligible node, and it says why",
		gangs: []Gang{g("lost", time.Hour, onNode(gpuPods("w", 1, 1), "gone"))},
		want:  []Decision{{Key: "lost", Unfit: &Unfit{Reason: NoEligibleNode}}},
		words: "not the node its pod template names (spec.nodeName gone)",
	}, {
		name:  "more pods than the named node holds: never fits",
		gangs: []Gang{g("big", time.Hour, onNode(gpuPods("w", 2, 8), "a"))},
		want:  []Decision{{Key: "big", Unfit: &Unfit{Reason: NeverFits}}},
	}, {
		name:  "one pod a node: spread over three nodes, though one would hold them all",
		gangs: []Gang{g("spread", time.Hour, atMost(gpuPods("w", 3, 1), 1))},
		want: []Decision{{Key: "spread", Admitted: true, Placement: Placement{
			at("w", "a", 1), at("w", "b", 1), at("w", "c", 1)}}},
	}, {
		name:  "one pod a node, more pods than nodes: never fits",
		gangs: []Gang{g("wide", time.Hour, atMost(gpuPods("w", 4, 1), 1))},
		want:  []Decision{{Key: "wide", Unfit: &Unfit{Reason: NeverFits}}},
		words: "at most 1 a node",
	}, {
		name:  "two pods a node",
		gangs: []Gang{g("pairs", time.Hour, atMost(gpuPods("w", 4, 1), 2))},
		want: []Decision{{Key: "pairs", Admitted: true, Placement: Placement{
			at("w", "a", 2), at("w", "b", 2)}}},
	}}
	onlyReason := cmpopts.IgnoreFields(Unfit{}, "Message", "PodSet", "Resource")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := NewSnapshot(three).Admit(tc.gangs)
			if d := cmp.Diff(tc.want, got, ignoreRequests, onlyReason, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("decisions (-want +got):\n%s", d)
			}
			if last := got[len(got)-1]; tc.words != "" && (last.Unfit == nil || !strings.Contains(last.Unfit.Message, tc.words)) {
				t.Errorf("message %v, want it to say %q", last.Unfit, tc.words)
			}
		})
	}
}

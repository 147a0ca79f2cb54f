package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/agent/agenttest"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Every result the agent writes falls in a known outcome, and reasons it never writes do not.
func TestAdmissionOutcome(t *testing.T) {
	for _, r := range Results {
		reason := r
		if r == "Admitted" {
			reason = gantryv1beta1.ReasonFits
		}
		if got := admissionOutcome(reason); got == OutcomeOther {
			t.Errorf("result %s has no outcome", r)
		}
	}
	if got := admissionOutcome("MadeUp"); got != OutcomeOther {
		t.Errorf("an unknown reason has outcome %s", got)
	}
	if got := boundedResult("MadeUp"); got != OutcomeOther {
		t.Errorf("an unknown result is counted as %s", got)
	}
}

// A copy holds its room from its admission until all its pods are bound; the pass that sees them all
// bound says how long that took, once.
func TestDecideTimesPlacements(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("n1"), gpuNode("n2")}
	pending := copyOf("a", 0, 2, "8").Obj()
	admitted := copyOf("a", 0, 2, "8").Admitted().Since(now).Obj()
	job := jobs(agenttest.MakeJob("a", "ns").Workload("hub-a").Created(now.Add(time.Second)).Obj())
	bound := func(n int) []*corev1.Pod {
		var pods []*corev1.Pod
		for i, node := range []string{"n1", "n2"}[:n] {
			pods = append(pods, gpuPod([]string{"a-0", "a-1"}[i], "hub-a", "8").Node(node).Phase(corev1.PodRunning).Obj())
		}
		return pods
	}
	admittedAt := map[types.UID]time.Time{"copy-a": now}
	for name, tc := range map[string]struct {
		in          Input
		wantPlacing map[types.UID]time.Time
		wantPlaced  map[types.UID]time.Duration
	}{
		"admitted in this pass":               {in: Input{Now: now, Nodes: nodes, Copies: []*gantryv1beta1.Workload{pending}}, wantPlacing: admittedAt},
		"one of two pods bound":               {in: Input{Now: now.Add(2 * time.Second), Nodes: nodes, Copies: []*gantryv1beta1.Workload{admitted}, Jobs: job, Pods: bound(1), Placing: admittedAt}, wantPlacing: admittedAt},
		"all bound":                           {in: Input{Now: now.Add(3 * time.Second), Nodes: nodes, Copies: []*gantryv1beta1.Workload{admitted}, Jobs: job, Pods: bound(2), Placing: admittedAt}, wantPlaced: map[types.UID]time.Duration{"copy-a": 3 * time.Second}},
		"all bound, seen before":              {in: Input{Now: now.Add(4 * time.Second), Nodes: nodes, Copies: []*gantryv1beta1.Workload{admitted}, Jobs: job, Pods: bound(2)}},
		"after a restart: from the condition": {in: Input{Now: now.Add(5 * time.Second), Nodes: nodes, Copies: []*gantryv1beta1.Workload{admitted}, Jobs: job, Pods: bound(1)}, wantPlacing: admittedAt},
		"the Job finished": {in: Input{Now: now.Add(5 * time.Second), Nodes: nodes, Copies: []*gantryv1beta1.Workload{admitted}, Placing: admittedAt,
			Jobs: jobs(agenttest.MakeJob("a", "ns").Workload("hub-a").Finished(batchv1.JobComplete).Obj())}},
	} {
		plan := Decide(tc.in)
		if diff := cmp.Diff(tc.wantPlacing, plan.Placing, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: placing (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(tc.wantPlaced, plan.Placed, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: placed (-want +got):\n%s", name, diff)
		}
	}
}

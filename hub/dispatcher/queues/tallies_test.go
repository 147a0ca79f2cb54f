package queues

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// TestTalliesStandForTheAdmittedWorkloads: a pass counts the book's admitted Workloads in tallies, by
// GlobalQueue, cluster, priority and Queue, and lists one by one those being preempted, those admitted
// before statuses named their GlobalQueue and those the dispatcher's own write stands in for. It decides
// and counts as it would over all of them listed, and the queue statuses say the same.
func TestTalliesStandForTheAdmittedWorkloads(t *testing.T) {
	victim := makeHubWorkload("victim", "q").Nominated("gq", 1, "w2").AdmittedOn("w2").Obj()
	victim.Status.Preemption = &gantry.Preemption{Cluster: "w2", Epoch: 1, Preemptor: "ns/waiting", Reason: gantry.ReasonInQueuePriority}
	overlaid := makeHubWorkload("overlaid", "q").Nominated("gq", 1, "w1").AdmittedOn("w1").Obj()
	r := Read{
		GlobalQueues: []gantry.GlobalQueue{*hubtest.MakeGlobalQueue("gq").SelectAll().PreemptWithinQueue(gantry.PreemptLowerPriority).
			Cluster("w1", gantry.GPUResource, "32").Cluster("w2", gantry.GPUResource, "32").Obj()},
		Queues:     []gantry.Queue{*hubtest.MakeQueue("q", "ns").GlobalQueue("gq").Obj(), *hubtest.MakeQueue("q2", "ns").GlobalQueue("gq").Obj()},
		Clusters:   map[string]dispatch.Cluster{"w1": {Name: "w1", Connected: true, AgentReady: true}, "w2": {Name: "w2", Connected: true, AgentReady: true}},
		Namespaces: []corev1.Namespace{namespace("ns", nil)},
	}
	// The dispatcher's write taking it back is in flight.
	taken := overlaid.DeepCopy()
	taken.Status.Preemption = &gantry.Preemption{Cluster: "w1", Epoch: 1, Preemptor: "ns/waiting", Reason: gantry.ReasonInQueuePriority}
	r.Own = map[string]*gantry.Workload{keyOf(taken): taken}
	p := fullPass(r,
		makeHubWorkload("a1", "q").Nominated("gq", 1, "w1").AdmittedOn("w1").Obj(),
		makeHubWorkload("a2", "q").Nominated("gq", 1, "w1").AdmittedOn("w1").Obj(), // a1's tally
		makeHubWorkload("a3", "q2").Nominated("gq", 1, "w1").AdmittedOn("w1").Obj(),
		makeHubWorkload("a4", "q").Priority(5).Nominated("gq", 1, "w2").AdmittedOn("w2").Obj(),
		makeHubWorkload("legacy", "q").Nominated("", 1, "w2").AdmittedOn("w2").Obj(),
		victim, overlaid,
		makeHubWorkload("waiting", "q").Priority(9).Obj(),
	)
	snap := p.Snapshot()
	listed := keysOf(snap.Workloads)
	if want := []string{"ns/legacy", "ns/overlaid", "ns/victim", "ns/waiting"}; !cmp.Equal(want, listed) {
		t.Errorf("listed %v, want %v", listed, want)
	}
	if got, want := keysOf(snap.Tallied), []string{"ns/a1", "ns/a2", "ns/a3", "ns/a4"}; !cmp.Equal(want, got) {
		t.Errorf("tallied %v, want %v", got, want)
	}
	counted := map[string]int{}
	for i, tl := range snap.Tallies {
		counted[fmt.Sprintf("%s/%s/%d", tl.Cluster, p.out.tallyQueues[i].name, tl.Priority)] += tl.Workloads
	}
	if want := map[string]int{"w1/q/0": 2, "w1/q2/0": 1, "w2/q/5": 1}; !cmp.Equal(want, counted) {
		t.Errorf("tallies count %v, want %v", counted, want)
	}

	all := *snap
	all.Workloads, all.Tallies, all.Tallied = slices.Concat(snap.Workloads, snap.Tallied), nil, nil
	want, wantUsage := dispatch.PlanWithUsage(&all)
	got, usage := dispatch.PlanWithUsage(snap)
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("a pass over the tallies decides otherwise (-listed +tallied):\n%s", diff)
	}
	if diff := cmp.Diff(wantUsage, usage, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("a pass over the tallies counts otherwise (-listed +tallied):\n%s", diff)
	}

	globals, locals := p.Statuses(usage.Queues)
	if g := globals["gq"]; g.AdmittedWorkloads != 7 || g.PendingWorkloads != 1 {
		t.Errorf("GlobalQueue counts %d admitted, %d pending; want 7 and 1", g.AdmittedWorkloads, g.PendingWorkloads)
	}
	if q, q2 := locals["ns/q"], locals["ns/q2"]; q.AdmittedWorkloads != 6 || q.PendingWorkloads != 1 || q2.AdmittedWorkloads != 1 {
		t.Errorf("Queue counts %+v and %+v; want 6 admitted and 1 pending, 1 admitted", q, q2)
	}
	for _, u := range globals["gq"].Usage {
		gpus := u.Admitted[gantry.GPUResource]
		if want := map[string]int64{"w1": 32, "w2": 24}[u.Name]; gpus.Value() != want {
			t.Errorf("admitted on %s: %s GPUs, want %d", u.Name, gpus.String(), want)
		}
	}
}

func keysOf(ws []*dispatch.Workload) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.Key)
	}
	slices.Sort(out)
	return out
}

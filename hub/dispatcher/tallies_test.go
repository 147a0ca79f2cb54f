package dispatcher

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/dispatch"
)

// TestTalliesStandForTheAdmittedWorkloads: a pass counts the book's admitted Workloads in tallies, by
// GlobalQueue, cluster, priority and Queue, and lists one by one those being preempted, those admitted
// before statuses named their GlobalQueue and those the dispatcher's own write stands in for. It decides
// and counts as it would over all of them listed, and the queue statuses say the same.
func TestTalliesStandForTheAdmittedWorkloads(t *testing.T) {
	victim := makeHubWorkload("victim", "q").nominated("gq", 1, "w2").admittedOn("w2").obj()
	victim.Status.Preemption = &gantry.Preemption{Cluster: "w2", Epoch: 1, Preemptor: "ns/waiting", Reason: gantry.ReasonInQueuePriority}
	overlaid := makeHubWorkload("overlaid", "q").nominated("gq", 1, "w1").admittedOn("w1").obj()
	st := &hubState{
		globals: []gantry.GlobalQueue{{ObjectMeta: metav1.ObjectMeta{Name: "gq"}, Spec: gantry.GlobalQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			Preemption:        gantry.PreemptionPolicy{WithinQueue: gantry.PreemptLowerPriority},
			Clusters: []gantry.ClusterQuota{
				{Name: "w1", Quota: corev1.ResourceList{gantry.GPUResource: resource.MustParse("32")}},
				{Name: "w2", Quota: corev1.ResourceList{gantry.GPUResource: resource.MustParse("32")}},
			}}}},
		queues:     []gantry.Queue{*queue("ns", "q", "gq"), *queue("ns", "q2", "gq")},
		clusters:   []gantry.WorkerCluster{agentReady("w1"), agentReady("w2")},
		namespaces: map[string]labels.Set{"ns": {}},
	}
	st.hold(
		makeHubWorkload("a1", "q").nominated("gq", 1, "w1").admittedOn("w1").obj(),
		makeHubWorkload("a2", "q").nominated("gq", 1, "w1").admittedOn("w1").obj(), // a1's tally
		makeHubWorkload("a3", "q2").nominated("gq", 1, "w1").admittedOn("w1").obj(),
		makeHubWorkload("a4", "q").priority(5).nominated("gq", 1, "w2").admittedOn("w2").obj(),
		makeHubWorkload("legacy", "q").nominated("", 1, "w2").admittedOn("w2").obj(),
		victim, overlaid,
		makeHubWorkload("waiting", "q").priority(9).obj(),
	)
	// The dispatcher's write taking it back is in flight.
	taken := overlaid.DeepCopy()
	taken.Status.Preemption = &gantry.Preemption{Cluster: "w1", Epoch: 1, Preemptor: "ns/waiting", Reason: gantry.ReasonInQueuePriority}
	st.over = map[string]*entry{keyOf(taken): newEntry(taken, nil)}

	in := buildSnapshot(st, fakeCopies{connected: map[string]bool{"w1": true, "w2": true}}, at.Time, dispatch.DefaultRejectionTTL)
	snap := in.snap
	listed := keysOf(snap.Workloads)
	if want := []string{"ns/legacy", "ns/overlaid", "ns/victim", "ns/waiting"}; !cmp.Equal(want, listed) {
		t.Errorf("listed %v, want %v", listed, want)
	}
	if got, want := keysOf(snap.Tallied), []string{"ns/a1", "ns/a2", "ns/a3", "ns/a4"}; !cmp.Equal(want, got) {
		t.Errorf("tallied %v, want %v", got, want)
	}
	counted := map[string]int{}
	for i, tl := range snap.Tallies {
		counted[fmt.Sprintf("%s/%s/%d", tl.Cluster, in.tallyQueues[i].name, tl.Priority)] += tl.Workloads
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

	globals, locals := queueStatuses(in, usage.Queues)
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

func agentReady(name string) gantry.WorkerCluster {
	return gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: gantry.WorkerClusterStatus{
		Conditions: []metav1.Condition{{Type: gantry.ClusterAgentReady, Status: metav1.ConditionTrue}}}}
}

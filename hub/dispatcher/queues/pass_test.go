package queues

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// at is when the tests' objects were made, and when the builders record what happened to them.
var at = metav1.NewTime(hubtest.T0)

// hubWorkload starts a Workload of 8 GPUs (two pods of 4) in namespace ns, created at at and submitted to
// queue.
func hubWorkload(ns, name, queue string) *hubtest.WorkloadWrapper {
	return hubtest.MakeWorkload(name, ns).UID("uid-"+name).Created(at.Time).Queue(queue).PodSet("main", 2, gantry.GPUResource, "4")
}

func makeHubWorkload(name, queue string) *hubtest.WorkloadWrapper {
	return hubWorkload("ns", name, queue).OwnedByJob(name, "job-uid-"+name)
}

// namespace is a Namespace with the labels, as a pass reads it.
func namespace(name string, labels map[string]string) corev1.Namespace {
	return corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// fullPass is the pass over every one of the Workloads, with what r reads of the hub besides.
func fullPass(r Read, wls ...*gantry.Workload) *Pass {
	m := NewManager(0)
	m.Replace(wls)
	m.Sync()
	if r.Now.IsZero() {
		r.Now = at.Time
	}
	return m.Full(r)
}

func TestBuildSnapshotResolvesQueues(t *testing.T) {
	r := Read{
		GlobalQueues: []gantry.GlobalQueue{*hubtest.MakeGlobalQueue("gq").Select("team", "a").Cluster("w1", gantry.GPUResource, "8").Obj(),
			*hubtest.MakeGlobalQueue("paused").SelectAll().Cluster("w1", gantry.GPUResource, "8").Held(false).Obj(),
			*hubtest.MakeGlobalQueue("closing").SelectAll().Cluster("w1", gantry.GPUResource, "8").Held(true).Obj()},
		Queues: []gantry.Queue{
			*hubtest.MakeQueue("paused", "team-a").GlobalQueue("paused").Obj(),
			*hubtest.MakeQueue("closing", "team-a").GlobalQueue("closing").Obj(),
			*hubtest.MakeQueue("q", "team-a").GlobalQueue("gq").Obj(),
			*hubtest.MakeQueue("q", "team-b").GlobalQueue("gq").Obj(),
			*hubtest.MakeQueue("dangling", "team-a").GlobalQueue("gone").Obj(),
		},
		Clusters:   map[string]dispatch.Cluster{"w1": {Name: "w1", Connected: true, AgentReady: true}},
		Namespaces: []corev1.Namespace{namespace("team-a", map[string]string{"team": "a"}), namespace("team-b", map[string]string{"team": "b"})},
	}
	snap := fullPass(r, hubWorkload("team-a", "ok", "q").Obj(), hubWorkload("team-a", "no-queue", "missing").Obj(),
		hubWorkload("team-a", "no-global", "dangling").Obj(), hubWorkload("team-b", "not-selected", "q").Obj(),
		hubWorkload("team-a", "held", "paused").Obj(), hubWorkload("team-a", "drained", "closing").Obj()).Snapshot()
	if q := snap.Queues["gq"]; q == nil || q.MaxCandidates != gantry.DefaultMaxCandidates || q.Quota["w1"][gantry.GPUResource] != 8000 {
		t.Errorf("queue %+v", q)
	}
	got := map[string]string{}
	for _, w := range snap.Workloads {
		switch {
		case w.QueueProblem != nil && w.GlobalQueue == "":
			got[w.Key] = w.QueueProblem.Reason + ": " + w.QueueProblem.Message
		case w.Key != "team-a/ok" || w.GlobalQueue != "gq" || w.Requests[gantry.GPUResource] != 8000:
			t.Errorf("workload %+v", w)
		}
	}
	want := map[string]string{
		"team-a/no-queue":     gantry.ReasonQueueNotFound + `: Queue "missing" not found in namespace team-a`,
		"team-a/no-global":    gantry.ReasonGlobalQueueNotFound + `: GlobalQueue "gone" of Queue "dangling" not found`,
		"team-b/not-selected": gantry.ReasonNamespaceNotSelected + `: namespace team-b is not selected by the namespaceSelector of GlobalQueue "gq"`,
		"team-a/held":         gantry.ReasonQueueHeld + `: GlobalQueue "paused" is held (spec.held): nothing of it is dispatched until it is no longer held`,
		"team-a/drained":      gantry.ReasonQueueDrained + `: GlobalQueue "closing" is held and drained: what waits in it is finished, and its job marked Failed`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("blocked (-want +got):\n%s", diff)
	}
}

// TestBuildSnapshotCountsAdmittedWorkloadsWhereTheyWereAdmitted: an admitted workload counts against
// the GlobalQueue recorded with its nomination, whatever its Queue says now, also while its Workload is
// being deleted; a pending one is dispatched under the GlobalQueue its Queue names now.
func TestBuildSnapshotCountsAdmittedWorkloadsWhereTheyWereAdmitted(t *testing.T) {
	type entry struct {
		GlobalQueue, NominatedQueue string
		Phase                       dispatch.Phase
		Written                     bool // writable: the executor may write it
		Blocked                     string
	}
	cases := map[string]struct {
		wl      *gantry.Workload
		globals []string // GlobalQueues that exist; gq and other when nil
		want    map[string]entry
	}{
		"admitted, its Queue deleted": {
			wl:   makeHubWorkload("w", "gone").Nominated("gq", 1, "w1").AdmittedOn("w1").Obj(),
			want: map[string]entry{"ns/w": {GlobalQueue: "gq", Phase: dispatch.Admitted, Written: true}},
		},
		"admitted, its Queue names another GlobalQueue": {
			wl:   makeHubWorkload("w", "moved").Nominated("gq", 1, "w1").AdmittedOn("w1").Obj(),
			want: map[string]entry{"ns/w": {GlobalQueue: "gq", Phase: dispatch.Admitted, Written: true}},
		},
		"admitted, its GlobalQueue deleted: no ledger, until it is recreated": {
			wl:      makeHubWorkload("w", "q").Nominated("gq", 1, "w1").AdmittedOn("w1").Obj(),
			globals: []string{"other"},
			want:    map[string]entry{"ns/w": {GlobalQueue: "gq", Phase: dispatch.Admitted, Written: true}},
		},
		"admitted before the GlobalQueue was recorded": {
			wl:   makeHubWorkload("w", "moved").Nominated("", 1, "w1").AdmittedOn("w1").Obj(),
			want: map[string]entry{"ns/w": {GlobalQueue: "other", Phase: dispatch.Admitted, Written: true}},
		},
		"admitted and being deleted": {
			wl:   makeHubWorkload("w", "q").Nominated("gq", 1, "w1").AdmittedOn("w1").Deleting().Obj(),
			want: map[string]entry{"ns/w": {GlobalQueue: "gq", Phase: dispatch.Admitted}},
		},
		"pending and being deleted": {
			wl:   makeHubWorkload("w", "q").Nominated("gq", 1, "w1").Deleting().Obj(),
			want: map[string]entry{},
		},
		"finished and being deleted": {
			wl:   makeHubWorkload("w", "q").Nominated("gq", 1, "w1").AdmittedOn("w1").Finished(gantry.ReasonJobSucceeded).Deleting().Obj(),
			want: map[string]entry{},
		},
		"pending, nominated under the GlobalQueue its Queue no longer names": {
			wl:   makeHubWorkload("w", "moved").Nominated("gq", 1, "w1").Obj(),
			want: map[string]entry{"ns/w": {GlobalQueue: "other", NominatedQueue: "gq", Written: true}},
		},
		"pending, its Queue deleted": {
			wl:   makeHubWorkload("w", "gone").Nominated("gq", 1, "w1").Obj(),
			want: map[string]entry{"ns/w": {Written: true, Blocked: gantry.ReasonQueueNotFound}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.globals == nil {
				tc.globals = []string{"gq", "other"}
			}
			r := Read{
				Queues:     []gantry.Queue{*hubtest.MakeQueue("q", "ns").GlobalQueue("gq").Obj(), *hubtest.MakeQueue("moved", "ns").GlobalQueue("other").Obj()},
				Clusters:   map[string]dispatch.Cluster{"w1": {Name: "w1"}},
				Namespaces: []corev1.Namespace{namespace("ns", map[string]string{"team": "a"})},
			}
			for _, name := range tc.globals {
				r.GlobalQueues = append(r.GlobalQueues, *hubtest.MakeGlobalQueue(name).SelectAll().Cluster("w1").Obj())
			}
			p := fullPass(r, tc.wl)
			snap := p.Snapshot()
			got := map[string]entry{}
			for _, w := range slices.Concat(snap.Workloads, snap.Tallied) {
				got[w.Key] = entry{GlobalQueue: w.GlobalQueue, NominatedQueue: w.NominatedQueue, Phase: w.Phase}
				if w.QueueProblem != nil {
					got[w.Key] = entry{Blocked: w.QueueProblem.Reason, Phase: w.Phase}
				}
			}
			if key := keyOf(tc.wl); p.Writable(key) != nil {
				e := got[key]
				e.Written = true
				got[key] = e
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("snapshot (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRejectionsOfAWorkload: the snapshot takes in when each cluster rejected the Workload (from its
// creation when the time was not recorded) and how often it was taken back from each cluster, but for
// preemptions; dispatch.Plan decides what they mean now.
func TestRejectionsOfAWorkload(t *testing.T) {
	wl := makeHubWorkload("w", "q").
		RejectedBy("recent", gantry.ReasonNeverFits, "no", at.Add(time.Minute)).
		RejectedBy("untimed", gantry.ReasonNeverFits, "no", time.Time{}).
		Evicted("refusing", 1, gantry.ReasonPlacementTimeout, time.Time{}).
		Evicted("refusing", 2, gantry.ReasonRemoteJobRefused, time.Time{}).
		Evicted("preempting", 3, gantry.ReasonPreempted, time.Time{}).
		Obj()
	want := &dispatch.Refusals{
		RejectedAt:  map[string]time.Time{"recent": at.Add(time.Minute), "untimed": wl.CreationTimestamp.Time},
		EvictedFrom: map[string]dispatch.Evictions{"refusing": {Count: 2, LastReason: gantry.ReasonRemoteJobRefused}},
	}
	if diff := cmp.Diff(want, refusalsOf(wl)); diff != "" {
		t.Errorf("refusals (-want +got):\n%s", diff)
	}
	if got := refusalsOf(makeHubWorkload("w", "q").Obj()); got != nil {
		t.Errorf("a Workload without rejections or evictions: %v", got)
	}
}

// A GlobalQueue's cohort, weight, and its borrowing and lending limits per cluster reach the dispatcher.
func TestGlobalQueueOfCarriesTheCohortAndTheScores(t *testing.T) {
	gq := hubtest.MakeGlobalQueue("research").Cohort("lab").Weight(3).
		Score(gantry.ScorePreference, 2).Score(gantry.ScoreSpread, 1).PreferredClusters("w2").Mode(gantry.DispatchIncremental).
		Cluster("w1", gantry.GPUResource, "8").BorrowingLimit(gantry.GPUResource, "4").LendingLimit(gantry.GPUResource, "2").
		Cluster("w2", gantry.GPUResource, "8").Obj()
	q, _ := globalQueueOf(gq)
	want := &dispatch.GlobalQueue{Name: "research", MaxCandidates: gantry.DefaultMaxCandidates, Clusters: []string{"w1", "w2"},
		Quota:             map[string]dispatch.Resources{"w1": {gantry.GPUResource: 8000}, "w2": {gantry.GPUResource: 8000}},
		Cohort:            "lab",
		Weight:            ptr.To[int32](3),
		BorrowingLimit:    map[string]dispatch.Resources{"w1": {gantry.GPUResource: 4000}},
		LendingLimit:      map[string]dispatch.Resources{"w1": {gantry.GPUResource: 2000}},
		Scores:            []dispatch.WeightedScore{{Name: "Preference", Weight: 2}, {Name: "Spread", Weight: 1}},
		PreferredClusters: []string{"w2"},
		Incremental:       true,
	}
	if diff := cmp.Diff(want, q); diff != "" {
		t.Errorf("globalQueueOf (-want +got):\n%s", diff)
	}
}

// Cohorts reach the dispatcher with their quota, lending limits and weight per cluster; a cohort whose
// parents lead back to it becomes a root, one under a parent without a Cohort object keeps its parent.
func TestBuildSnapshotCarriesTheTreeOfCohorts(t *testing.T) {
	cohort := func(name, parent string) *hubtest.CohortWrapper { return hubtest.MakeCohort(name).Parent(parent) }
	cases := map[string]struct {
		cohorts []gantry.Cohort
		want    map[string]*dispatch.Cohort
	}{
		"none": {want: map[string]*dispatch.Cohort{}},
		"a tree with quota, limits and weights": {
			cohorts: []gantry.Cohort{
				*cohort("org", "").Cluster("w1", gantry.GPUResource, "16").Obj(),
				*cohort("team-a", "org").Weight(2).
					Cluster("w1", gantry.GPUResource, "4").LendingLimit(gantry.GPUResource, "2").
					Cluster("w2").LendingLimit(gantry.GPUResource, "0").Obj(),
			},
			want: map[string]*dispatch.Cohort{
				"org": {Name: "org", Quota: map[string]dispatch.Resources{"w1": {gantry.GPUResource: 16000}}},
				"team-a": {Name: "team-a", Parent: "org", Weight: ptr.To[int32](2),
					Quota:        map[string]dispatch.Resources{"w1": {gantry.GPUResource: 4000}},
					LendingLimit: map[string]dispatch.Resources{"w1": {gantry.GPUResource: 2000}, "w2": {gantry.GPUResource: 0}}},
			},
		},
		"a cycle of parents, as the specs say (the dispatcher treats its cohorts as roots)": {
			cohorts: []gantry.Cohort{*cohort("x", "y").Obj(), *cohort("y", "x").Obj(), *cohort("z", "x").Obj()},
			want: map[string]*dispatch.Cohort{
				"x": {Name: "x", Parent: "y"}, "y": {Name: "y", Parent: "x"}, "z": {Name: "z", Parent: "x"},
			},
		},
		"a parent without a Cohort object": {
			cohorts: []gantry.Cohort{*cohort("team-a", "org").Obj()},
			want:    map[string]*dispatch.Cohort{"team-a": {Name: "team-a", Parent: "org"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			snap := fullPass(Read{Cohorts: tc.cohorts}).Snapshot()
			if diff := cmp.Diff(tc.want, snap.Cohorts); diff != "" {
				t.Errorf("cohorts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPendingWordsCountForTheirSpecOnly: what a Workload's Pending condition says is what dispatch.Plan
// compares its verdicts with (a verdict shown is not written again) only while it is true and was
// written for the Workload's current spec.
func TestPendingWordsCountForTheirSpecOnly(t *testing.T) {
	shown := func(generation, observed int64, status metav1.ConditionStatus) *gantry.Workload {
		wl := makeHubWorkload("w", "q").Generation(generation).Obj()
		apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: gantry.WorkloadPending, Status: status,
			Reason: gantry.ReasonWaitingForQuota, Message: "waiting for quota of GlobalQueue gq", ObservedGeneration: observed})
		return wl
	}
	v := dispatch.Verdict{Key: "ns/w", Reason: gantry.ReasonWaitingForQuota, Message: "waiting for quota of GlobalQueue gq"}
	cases := map[string]struct {
		wl   *gantry.Workload
		want bool
	}{
		"written for its spec":      {shown(2, 2, metav1.ConditionTrue), true},
		"written for an older spec": {shown(3, 2, metav1.ConditionTrue), false},
		"no longer true":            {shown(2, 2, metav1.ConditionFalse), false},
		"none":                      {makeHubWorkload("w", "q").Obj(), false},
	}
	for name, tc := range cases {
		if got := newEntry(tc.wl, nil).w.Shows(v); got != tc.want {
			t.Errorf("%s: shows %v, want %v", name, got, tc.want)
		}
	}
}

package dispatcher

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/ptr"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

type fakeCopies struct {
	connected map[string]bool
	copies    map[string]*gantry.Workload // by cluster
	byName    map[string]*gantry.Workload // by cluster/workload name, before copies
	kinds     map[string][]gantry.JobKind // by cluster; a connected cluster not listed runs batch Jobs only
	untried   map[string]bool             // clusters the hub has not tried to connect yet
}

// Worker implements Workers: the connected clusters, whose caches hold the copies.
func (f fakeCopies) Worker(c string) (remote.Worker, bool) {
	if !f.connected[c] {
		return nil, false
	}
	return fakeWorker{f: f, name: c}, true
}

func (f fakeCopies) Tried(c string) bool { return !f.untried[c] }

// fakeWorker is a connected cluster of fakeCopies; a pass reads only its copies and kinds.
type fakeWorker struct {
	remote.Worker // nil: a pass calls nothing else
	f             fakeCopies
	name          string
}

func (w fakeWorker) Kinds() []gantry.JobKind {
	if k, ok := w.f.kinds[w.name]; ok {
		return k
	}
	return []gantry.JobKind{gantry.JobKindJob}
}

func (w fakeWorker) CopyInPlace(key types.NamespacedName) *gantry.Workload {
	if cp, ok := w.f.byName[w.name+"/"+key.Name]; ok {
		return cp
	}
	return w.f.copies[w.name]
}

// hold makes the state hold the Workloads as the dispatcher's book would.
func (st *hubState) hold(wls ...*gantry.Workload) {
	b := newBook()
	b.replace(wls)
	b.sync()
	st.workloads, st.tallies, st.entries = b.order, b.tallies, b.entries
}

// at is when the tests' objects were made, and when the builders record what happened to them.
var at = metav1.NewTime(hubtest.T0)

// hubWorkload starts a Workload of 8 GPUs (two pods of 4) in namespace ns, created at at and submitted to
// queue.
func hubWorkload(ns, name, queue string) *hubtest.WorkloadWrapper {
	return hubtest.MakeWorkload(name, ns).UID("uid-"+name).Created(at.Time).Queue(queue).PodSet("main", 2, gantry.GPUResource, "4")
}

func TestBuildSnapshotResolvesQueues(t *testing.T) {
	st := &hubState{
		globals: []gantry.GlobalQueue{*hubtest.MakeGlobalQueue("gq").Select("team", "a").Cluster("w1", gantry.GPUResource, "8").Obj()},
		queues: []gantry.Queue{
			*hubtest.MakeQueue("q", "team-a").GlobalQueue("gq").Obj(),
			*hubtest.MakeQueue("q", "team-b").GlobalQueue("gq").Obj(),
			*hubtest.MakeQueue("dangling", "team-a").GlobalQueue("gone").Obj(),
		},
		clusters:   []gantry.WorkerCluster{*hubtest.MakeWorkerCluster("w1").AgentReady().Obj()},
		namespaces: map[string]labels.Set{"team-a": {"team": "a"}, "team-b": {"team": "b"}},
	}
	st.hold(hubWorkload("team-a", "ok", "q").Obj(), hubWorkload("team-a", "no-queue", "missing").Obj(),
		hubWorkload("team-a", "no-global", "dangling").Obj(), hubWorkload("team-b", "not-selected", "q").Obj())
	in := buildSnapshot(st, fakeCopies{connected: map[string]bool{"w1": true}}, at.Time, dispatch.DefaultRejectionTTL)
	snap := in.snap

	if diff := cmp.Diff(map[string]dispatch.Cluster{"w1": {Name: "w1", Connected: true, AgentReady: true, Kinds: map[string]bool{"Job": true}}}, snap.Clusters); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
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
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("blocked (-want +got):\n%s", diff)
	}
}

func TestObserveCopiesFencesStaleCopies(t *testing.T) {
	wl := hubWorkload("ns", "w", "q").Nominated("", 2, "current", "stale", "stranger", "rejecting", "waiting", "lost").Obj()
	copies := fakeCopies{
		connected: map[string]bool{"current": true, "stale": true, "stranger": true, "rejecting": true, "waiting": true},
		copies: map[string]*gantry.Workload{
			"current":   hubtest.MakeCopyOf(wl, 2).Admitted().Since(at.Time).Obj(),
			"stale":     hubtest.MakeCopyOf(wl, 1).Admitted().Since(at.Time).Obj(),
			"stranger":  hubtest.MakeCopy(wl.Name, wl.Namespace, "an-older-workload", 2).Admitted().Since(at.Time).Obj(),
			"rejecting": hubtest.MakeCopyOf(wl, 2).Condition(metav1.ConditionFalse, gantry.ReasonNeverFits, "too big").Obj(),
			"waiting":   hubtest.MakeCopyOf(wl, 2).Condition(metav1.ConditionFalse, gantry.ReasonInsufficientResources, "later").Obj(),
		},
	}
	got := observeCopies(wl, copies)
	want := []dispatch.Copy{
		{Cluster: "current", Admitted: true, AdmittedAt: at.Time},
		{Cluster: "rejecting", Rejected: true, Reason: gantry.ReasonNeverFits, Message: "too big"},
		{Cluster: "waiting", Waiting: true, Reason: gantry.ReasonInsufficientResources, Message: "later"},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("observed copies (-want +got):\n%s", diff)
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
			st := &hubState{
				queues:     []gantry.Queue{*hubtest.MakeQueue("q", "ns").GlobalQueue("gq").Obj(), *hubtest.MakeQueue("moved", "ns").GlobalQueue("other").Obj()},
				clusters:   []gantry.WorkerCluster{*hubtest.MakeWorkerCluster("w1").Obj()},
				namespaces: map[string]labels.Set{"ns": {"team": "a"}},
			}
			st.hold(tc.wl)
			for _, name := range tc.globals {
				st.globals = append(st.globals, *hubtest.MakeGlobalQueue(name).SelectAll().Cluster("w1").Obj())
			}
			in := buildSnapshot(st, fakeCopies{}, at.Time, dispatch.DefaultRejectionTTL)
			snap := in.snap
			got := map[string]entry{}
			for _, w := range slices.Concat(snap.Workloads, snap.Tallied) {
				got[w.Key] = entry{GlobalQueue: w.GlobalQueue, NominatedQueue: w.NominatedQueue, Phase: w.Phase}
				if w.QueueProblem != nil {
					got[w.Key] = entry{Blocked: w.QueueProblem.Reason, Phase: w.Phase}
				}
			}
			if key := keyOf(tc.wl); st.writable(key) != nil {
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
	rejectedAt, evicted := rejectionsOf(wl)
	if diff := cmp.Diff(map[string]time.Time{"recent": at.Add(time.Minute), "untimed": wl.CreationTimestamp.Time}, rejectedAt); diff != "" {
		t.Errorf("rejected at (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]dispatch.Evictions{"refusing": {Count: 2, LastReason: gantry.ReasonRemoteJobRefused}}, evicted); diff != "" {
		t.Errorf("evictions (-want +got):\n%s", diff)
	}
	if got, _ := rejectionsOf(makeHubWorkload("w", "q").Obj()); got != nil {
		t.Errorf("a Workload without rejections: %v", got)
	}
}

// The dispatcher's Events go to the hub's job of any kind: the Workload's controller, as its owner
// reference names it, is what the event recorder refers to.
func TestJobRefIsTheWorkloadsControllerOfAnyKind(t *testing.T) {
	owned := func(refs ...metav1.OwnerReference) *gantry.Workload {
		return &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "jobset-train", OwnerReferences: refs}}
	}
	controller := func(apiVersion, kind, name string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}
	}
	for _, want := range []corev1.ObjectReference{
		{APIVersion: "batch/v1", Kind: "Job", Namespace: "team-a", Name: "train", UID: "uid-train"},
		{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Namespace: "team-a", Name: "train", UID: "uid-train"},
		{APIVersion: "ray.io/v1", Kind: "RayJob", Namespace: "team-a", Name: "train", UID: "uid-train"},
		{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Namespace: "team-a", Name: "train", UID: "uid-train"},
	} {
		notController := controller("v1", "ConfigMap", "other")
		notController.Controller = nil
		job := jobRef(owned(notController, controller(want.APIVersion, want.Kind, want.Name)))
		if job == nil {
			t.Fatalf("no job for a Workload owned by %s", want.Kind)
		}
		// The recorder's own way to an object's reference, with a scheme that knows none of the kinds.
		got, err := reference.GetReference(runtime.NewScheme(), job)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Errorf("reference (-want +got):\n%s", diff)
		}
	}
	if job := jobRef(owned()); job != nil {
		t.Errorf("a Workload without controller: %v, want none", job)
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
			snap := buildSnapshot(&hubState{cohorts: tc.cohorts}, fakeCopies{}, at.Time, dispatch.DefaultRejectionTTL).snap
			if diff := cmp.Diff(tc.want, snap.Cohorts); diff != "" {
				t.Errorf("cohorts (-want +got):\n%s", diff)
			}
		})
	}
}

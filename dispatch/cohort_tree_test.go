package dispatch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Cohorts form a tree: a queue borrows, through its cohort's parent, what queues of sibling cohorts
// leave unused, within each cohort's lending limit; a cohort's own quota is lent only within its tree;
// a cycle of parents leaves each cohort on it a root.
func TestPlanBorrowsAcrossACohortTree(t *testing.T) {
	a := func() *queueBuilder { return makeQueue("a").cohort("team-a").quota("c", "nvidia.com/gpu", 8) }
	b := func() *queueBuilder { return makeQueue("b").cohort("team-b").quota("c", "nvidia.com/gpu", 8) }
	org := func() *cohortBuilder { return makeCohort("org") }
	teamA := func() *cohortBuilder { return makeCohort("team-a").parent("org") }
	teamB := func() *cohortBuilder { return makeCohort("team-b").parent("org") }
	nominated := func(key, queue string) Nomination {
		return Nomination{Key: key, Epoch: 1, GlobalQueue: queue, Clusters: []string{"c"}}
	}
	waiting := func(key, queue string) Verdict {
		return Verdict{Key: key, Reason: gantry.ReasonWaitingForQuota, Message: "waiting for quota of GlobalQueue " + queue + ""}
	}
	cases := map[string]struct {
		snapshot *Snapshot
		want     Result
	}{
		"a queue borrows a sibling cohort's unused quota through their parent": {
			snapshot: makeSnapshot().cluster("c").queue(a().obj()).queue(b().obj()).
				cohorts(org().obj(), teamA().obj(), teamB().obj()).workloads(
				makeWorkload("ns/own", "b").gpus(8).admittedOn("c").obj(),
				makeWorkload("ns/more", "b").gpus(8).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{nominated("ns/more", "b")}},
		},
		"no more than the tree lends": {
			snapshot: makeSnapshot().cluster("c").queue(a().obj()).queue(b().obj()).
				cohorts(org().obj(), teamA().obj(), teamB().obj()).workloads(
				makeWorkload("ns/huge", "b").gpus(17).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{{Key: "ns/huge", Reason: gantry.ReasonNoClusterCanHold,
				Message: "no cluster of GlobalQueue b can ever hold this workload: c: needs 17 nvidia.com/gpu, quota is 8, 16 with what its cohort may lend"}}},
		},
		"a cohort's lending limit keeps the rest for its own tree": {
			snapshot: makeSnapshot().cluster("c").queue(a().obj()).queue(b().obj()).
				cohorts(org().obj(), teamA().lendingLimit("c", 2).obj(), teamB().obj()).workloads(
				makeWorkload("ns/own", "b").gpus(8).admittedOn("c").obj(),
				makeWorkload("ns/three", "b").gpus(3).createdAt(1).obj(),
				makeWorkload("ns/two", "b").gpus(2).createdAt(2).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{nominated("ns/two", "b")}, Verdicts: []Verdict{waiting("ns/three", "b")}},
		},
		"what a cohort does not lend, other teams never borrow": {
			snapshot: makeSnapshot().cluster("c").queue(a().obj()).queue(b().obj()).
				cohorts(org().obj(), teamA().lendingLimit("c", 0).obj(), teamB().obj()).workloads(
				makeWorkload("ns/b-own", "b").gpus(8).admittedOn("c").obj(),
				makeWorkload("ns/b-one", "b").gpus(1).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{waiting("ns/b-one", "b")}},
		},
		"the parent's own quota is lent to every team": {
			snapshot: makeSnapshot().cluster("c").queue(a().obj()).queue(b().obj()).
				cohorts(org().quota("c", 4).obj(), teamA().obj(), teamB().obj()).workloads(
				makeWorkload("ns/a-own", "a").gpus(8).admittedOn("c").obj(),
				makeWorkload("ns/b-own", "b").gpus(8).admittedOn("c").obj(),
				makeWorkload("ns/b-three", "b").gpus(3).createdAt(1).obj(),
				makeWorkload("ns/a-one", "a").gpus(1).createdAt(2).obj(),
				makeWorkload("ns/a-two", "a").gpus(1).createdAt(3).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{nominated("ns/a-one", "a"), nominated("ns/b-three", "b")}, Verdicts: []Verdict{waiting("ns/a-two", "a")}},
		},
		"a team's own quota is lent to its queues only": {
			snapshot: makeSnapshot().cluster("c").queue(a().obj()).queue(b().obj()).
				cohorts(org().obj(), teamA().quota("c", 4).lendingLimit("c", 8).obj(), teamB().obj()).workloads(
				makeWorkload("ns/a-own", "a").gpus(8).admittedOn("c").obj(),
				makeWorkload("ns/b-own", "b").gpus(8).admittedOn("c").obj(),
				makeWorkload("ns/a-four", "a").gpus(4).createdAt(1).obj(),
				makeWorkload("ns/b-one", "b").gpus(1).createdAt(2).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{nominated("ns/a-four", "a")}, Verdicts: []Verdict{waiting("ns/b-one", "b")}},
		},
		"a lender waits while a sibling cohort holds what it lent": {
			snapshot: makeSnapshot().cluster("c").queue(a().obj()).queue(b().obj()).
				cohorts(org().obj(), teamA().obj(), teamB().obj()).workloads(
				makeWorkload("ns/b-all", "b").gpus(14).admittedOn("c").obj(),
				makeWorkload("ns/a-four", "a").gpus(4).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{waiting("ns/a-four", "a")}},
		},
		"cohorts on a cycle of parents are roots": {
			snapshot: makeSnapshot().cluster("c").queue(a().obj()).queue(b().obj()).
				cohorts(makeCohort("team-a").parent("team-b").obj(), makeCohort("team-b").parent("team-a").obj()).workloads(
				makeWorkload("ns/own", "b").gpus(8).admittedOn("c").obj(),
				makeWorkload("ns/more", "b").gpus(8).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{waiting("ns/more", "b")}},
		},
		"a parent without a Cohort object joins its sub-cohorts": {
			snapshot: makeSnapshot().cluster("c").queue(a().obj()).queue(b().obj()).
				cohorts(teamA().obj(), teamB().obj()).workloads(
				makeWorkload("ns/own", "b").gpus(8).admittedOn("c").obj(),
				makeWorkload("ns/more", "b").gpus(8).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{nominated("ns/more", "b")}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Plan(tc.snapshot), cmpopts.EquateEmpty(), ignoreReach); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
		})
	}
}

// A cohort whose parents lead back to it is on a cycle; one below a cycle, under a root or under a
// parent without a Cohort object is not.
func TestOnParentCycle(t *testing.T) {
	cohorts := map[string]*Cohort{
		"x": {Name: "x", Parent: "y"}, "y": {Name: "y", Parent: "x"}, // a cycle
		"z":    {Name: "z", Parent: "x"}, // below the cycle, not on it
		"self": {Name: "self", Parent: "self"},
		"leaf": {Name: "leaf", Parent: "root"}, "root": {Name: "root"},
		"orphan": {Name: "orphan", Parent: "missing"},
	}
	got := map[string]bool{}
	for name := range cohorts {
		got[name] = OnParentCycle(cohorts, name)
	}
	want := map[string]bool{"x": true, "y": true, "z": false, "self": true, "leaf": false, "root": false, "orphan": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("on a cycle (-want +got):\n%s", diff)
	}
}

// In a tree, what a queue borrows is lent by the unused quota of the whole tree, cohorts' own included;
// each cohort's usage says what its tree lends within it, uses of that and borrows beyond.
func TestSharesAndUsageOfACohortTree(t *testing.T) {
	s := makeSnapshot().cluster("c").
		queue(makeQueue("a").cohort("team-a").quota("c", "nvidia.com/gpu", 8).obj()).
		queue(makeQueue("b").cohort("team-b").quota("c", "nvidia.com/gpu", 8).obj()).
		cohorts(makeCohort("org").quota("c", 4).obj(), makeCohort("team-a").parent("org").obj(), makeCohort("team-b").parent("org").obj()).
		workloads(makeWorkload("ns/b", "b").gpus(14).admittedOn("c").obj()).obj()
	gpus := func(n int64) Resources { return Resources{"nvidia.com/gpu": n * 1000} }
	wantShares := map[string]map[string]Share{
		"b": {"c": {Borrowed: gpus(6), Lent: Resources{}}},
		"a": {"c": {Borrowed: Resources{}, Lent: gpus(4)}}, // 8 of the 12 idle (a's 8, org's 4)
	}
	usage := UsageOf(s)
	if diff := cmp.Diff(wantShares, usage.Queues, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("queue shares (-want +got):\n%s", diff)
	}
	wantUsage := map[string]map[string]CohortUse{
		"team-a": {"c": {Lendable: gpus(8), Used: gpus(0), Borrowed: Resources{}}},
		"team-b": {"c": {Lendable: gpus(8), Used: gpus(14), Borrowed: gpus(6)}},
		"org":    {"c": {Lendable: gpus(20), Used: gpus(14), Borrowed: Resources{}}},
	}
	if diff := cmp.Diff(wantUsage, usage.Cohorts, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("cohort usage (-want +got):\n%s", diff)
	}
}

func TestComponentOf(t *testing.T) {
	s := makeSnapshot().queue(makeQueue("alone").obj()).queue(makeQueue("leaf").cohort("team").obj()).
		queue(makeQueue("unnamed").cohort("no-object").obj()).queue(makeQueue("looped").cohort("x").obj()).
		queue(makeQueue("below-loop").cohort("under-loop").obj()).
		cohorts(makeCohort("team").parent("org").obj(), makeCohort("org").obj(),
			makeCohort("x").parent("y").obj(), makeCohort("y").parent("x").obj(), makeCohort("under-loop").parent("x").obj()).obj()
	for queue, want := range map[string]string{
		"alone":      "queue/alone",
		"leaf":       "cohort/org",       // up its tree to the root
		"unnamed":    "cohort/no-object", // a cohort without an object is a root
		"looped":     "cohort/x",         // a cohort on a cycle of parents is a root, as the ledger makes it
		"below-loop": "cohort/x",
		"missing":    "queue/missing",
	} {
		if got := ComponentOf(s, queue); got != want {
			t.Errorf("ComponentOf(%q) = %q, want %q", queue, got, want)
		}
	}
}

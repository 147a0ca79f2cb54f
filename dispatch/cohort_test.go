package dispatch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Queues of a cohort borrow one another's unused quota on the same cluster, within the lender's lending
// limit and the borrower's borrowing limit; what others borrowed keeps a lender below its own quota
// until it is given back; a queue in no cohort borrows nothing.
func TestPlanBorrowsWithinACohort(t *testing.T) {
	lender := func() *queueBuilder { return makeQueue("lender").cohort("research").quota("a", "nvidia.com/gpu", 8) }
	borrower := func() *queueBuilder { return makeQueue("borrower").cohort("research").quota("a", "nvidia.com/gpu", 8) }
	nominated := func(key, queue string) Nomination {
		return Nomination{Key: key, Epoch: 1, GlobalQueue: queue, Clusters: []string{"a"}}
	}
	waiting := func(key, queue string) Verdict {
		return Verdict{Key: key, Reason: gantry.ReasonWaitingForQuota, Message: "waiting for quota of GlobalQueue " + queue + ""}
	}
	cases := map[string]struct {
		snapshot *Snapshot
		want     Result
	}{
		"the lender's unused quota is borrowed": {
			snapshot: makeSnapshot().cluster("a").queue(lender().obj()).queue(borrower().obj()).workloads(
				makeWorkload("ns/own", "borrower").gpus(8).admittedOn("a").obj(),
				makeWorkload("ns/more", "borrower").gpus(8).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{nominated("ns/more", "borrower")}},
		},
		"a job bigger than the queue's quota fits with what the cohort lends": {
			snapshot: makeSnapshot().cluster("a").queue(lender().obj()).queue(borrower().obj()).workloads(
				makeWorkload("ns/big", "borrower").gpus(16).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{nominated("ns/big", "borrower")}},
		},
		"no more than the cohort lends": {
			snapshot: makeSnapshot().cluster("a").queue(lender().obj()).queue(borrower().obj()).workloads(
				makeWorkload("ns/huge", "borrower").gpus(17).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{{Key: "ns/huge", Reason: gantry.ReasonNoClusterCanHold,
				Message: "no cluster of GlobalQueue borrower can ever hold this workload: a: needs 17 nvidia.com/gpu, quota is 8, 16 with what its cohort may lend"}}},
		},
		"the lender's lending limit": {
			snapshot: makeSnapshot().cluster("a").queue(lender().lendingLimit("a", 2).obj()).queue(borrower().obj()).workloads(
				makeWorkload("ns/own", "borrower").gpus(8).admittedOn("a").obj(),
				makeWorkload("ns/three", "borrower").gpus(3).createdAt(1).obj(),
				makeWorkload("ns/two", "borrower").gpus(2).createdAt(2).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{nominated("ns/two", "borrower")}, Verdicts: []Verdict{waiting("ns/three", "borrower")}},
		},
		"the borrower's borrowing limit": {
			snapshot: makeSnapshot().cluster("a").queue(lender().obj()).queue(borrower().borrowingLimit("a", 4).obj()).workloads(
				makeWorkload("ns/own", "borrower").gpus(8).admittedOn("a").obj(),
				makeWorkload("ns/five", "borrower").gpus(5).createdAt(1).obj(),
				makeWorkload("ns/four", "borrower").gpus(4).createdAt(2).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{nominated("ns/four", "borrower")}, Verdicts: []Verdict{waiting("ns/five", "borrower")}},
		},
		"what was borrowed keeps the lender below its quota until it is given back": {
			snapshot: makeSnapshot().cluster("a").queue(lender().obj()).queue(borrower().obj()).workloads(
				makeWorkload("ns/own", "borrower").gpus(8).admittedOn("a").obj(),
				makeWorkload("ns/borrowed", "borrower").gpus(6).admittedOn("a").obj(),
				makeWorkload("ns/lenders", "lender").gpus(4).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{waiting("ns/lenders", "lender")}},
		},
		"the lender keeps what it did not lend": {
			snapshot: makeSnapshot().cluster("a").queue(lender().lendingLimit("a", 2).obj()).queue(borrower().obj()).workloads(
				makeWorkload("ns/own", "borrower").gpus(8).admittedOn("a").obj(),
				makeWorkload("ns/borrowed", "borrower").gpus(2).admittedOn("a").obj(),
				makeWorkload("ns/lenders", "lender").gpus(6).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{nominated("ns/lenders", "lender")}},
		},
		"a winner is confirmed only within what the cohort lends": {
			snapshot: makeSnapshot().cluster("a").queue(lender().obj()).queue(borrower().obj()).workloads(
				makeWorkload("ns/lenders", "lender").gpus(8).admittedOn("a").obj(),
				makeWorkload("ns/own", "borrower").gpus(8).admittedOn("a").obj(),
				makeWorkload("ns/late", "borrower").gpus(4).nominated(1, "a").copyAdmitted("a", 5).obj(),
			).obj(),
			want: Result{}, // no winner: it keeps its nomination until the cohort has room
		},
		"another cohort lends nothing": {
			snapshot: makeSnapshot().cluster("a").queue(makeQueue("lender").cohort("other").quota("a", "nvidia.com/gpu", 8).obj()).queue(borrower().obj()).workloads(
				makeWorkload("ns/own", "borrower").gpus(8).admittedOn("a").obj(),
				makeWorkload("ns/more", "borrower").gpus(8).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{waiting("ns/more", "borrower")}},
		},
		"no cohort, no borrowing": {
			snapshot: makeSnapshot().cluster("a").queue(makeQueue("lender").quota("a", "nvidia.com/gpu", 8).obj()).queue(makeQueue("borrower").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/own", "borrower").gpus(8).admittedOn("a").obj(),
				makeWorkload("ns/more", "borrower").gpus(8).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{waiting("ns/more", "borrower")}},
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

// What each queue of a cohort borrows and lends, per cluster.
func TestCohortShares(t *testing.T) {
	s := makeSnapshot().cluster("a", "b").
		queue(makeQueue("big").cohort("research").quota("a", "nvidia.com/gpu", 8).quota("b", "nvidia.com/gpu", 8).obj()).
		queue(makeQueue("small").cohort("research").quota("a", "nvidia.com/gpu", 4).obj()).
		queue(makeQueue("needy").cohort("research").quota("a", "nvidia.com/gpu", 4).obj()).
		queue(makeQueue("alone").quota("a", "nvidia.com/gpu", 8).obj()).
		workloads(
			makeWorkload("ns/n1", "needy").gpus(10).admittedOn("a").obj(), // 6 borrowed of the 12 the others leave idle
			makeWorkload("ns/b1", "big").gpus(4).admittedOn("b").obj(),
			makeWorkload("ns/x", "alone").gpus(8).admittedOn("a").obj(),
		).obj()
	gpus := func(n int64) Resources { return Resources{"nvidia.com/gpu": n * 1000} }
	want := map[string]map[string]Share{
		"needy": {"a": {Borrowed: gpus(6), Lent: Resources{}}},
		"big":   {"a": {Borrowed: Resources{}, Lent: gpus(4)}}, // idle 8 of 12
		"small": {"a": {Borrowed: Resources{}, Lent: gpus(2)}}, // idle 4 of 12
	}
	if diff := cmp.Diff(want, UsageOf(s).Queues, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("queue shares (-want +got):\n%s", diff)
	}
}

// The README's example: vision (16 GPUs, borrowing limit 8) and speech (16, lending limit 12) on one
// cluster.
func TestTheReadmesCohortExample(t *testing.T) {
	vision := makeQueue("vision").cohort("research").quota("worker-1", "nvidia.com/gpu", 16).borrowingLimit("worker-1", 8).obj()
	speech := makeQueue("speech").cohort("research").quota("worker-1", "nvidia.com/gpu", 16).lendingLimit("worker-1", 12).obj()
	big := makeSnapshot().cluster("worker-1").queue(vision).queue(speech).workloads(
		makeWorkload("ns/twenty", "vision").gpus(20).obj()).obj()
	if got := Plan(big).Nominations; len(got) != 1 {
		t.Errorf("a 20-GPU job of vision: nominations %+v, want one", got)
	}
	running := makeWorkload("ns/vision", "vision").gpus(24).admittedOn("worker-1").obj()
	full := makeSnapshot().cluster("worker-1").queue(vision).queue(speech).workloads(running,
		makeWorkload("ns/one-more", "vision").gpus(1).obj()).obj()
	if got := Plan(full).Nominations; len(got) != 0 {
		t.Errorf("vision beyond 24: nominations %+v, want none", got)
	}
	speechJobs := makeSnapshot().cluster("worker-1").queue(vision).queue(speech).workloads(running,
		makeWorkload("ns/s1", "speech").gpus(4).createdAt(1).obj(),
		makeWorkload("ns/s2", "speech").gpus(4).createdAt(2).obj(),
		makeWorkload("ns/s3", "speech").gpus(4).createdAt(3).obj()).obj()
	res := Plan(speechJobs)
	var keys []string
	for _, n := range res.Nominations {
		keys = append(keys, n.Key)
	}
	if diff := cmp.Diff([]string{"ns/s1", "ns/s2"}, keys); diff != "" || len(res.Verdicts) != 1 || res.Verdicts[0].Reason != gantry.ReasonWaitingForQuota {
		t.Errorf("speech's three jobs: nominated %v, verdicts %+v; want two nominated, the third waiting for quota", keys, res.Verdicts)
	}
	gpus := func(n int64) Resources { return Resources{"nvidia.com/gpu": n * 1000} }
	want := map[string]map[string]Share{
		"vision": {"worker-1": {Borrowed: gpus(8), Lent: Resources{}}},
		"speech": {"worker-1": {Borrowed: Resources{}, Lent: gpus(8)}},
	}
	if diff := cmp.Diff(want, UsageOf(full).Queues, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("shares (-want +got):\n%s", diff)
	}
}

// A lending limit above the quota lends the quota, no more; a negative one (refused by the API) lends
// nothing.
func TestLendingLimitsOutsideTheQuota(t *testing.T) {
	for _, tc := range []struct {
		lend int
		want int // nominations of a 16-GPU job of the borrower
	}{{lend: 100, want: 1}, {lend: -1, want: 0}} {
		s := makeSnapshot().cluster("a").
			queue(makeQueue("lender").cohort("c").quota("a", "nvidia.com/gpu", 8).lendingLimit("a", tc.lend).obj()).
			queue(makeQueue("borrower").cohort("c").quota("a", "nvidia.com/gpu", 8).obj()).
			workloads(makeWorkload("ns/16", "borrower").gpus(16).obj(),
				makeWorkload("ns/17", "borrower").gpus(17).createdAt(1).obj()).obj()
		res := Plan(s)
		if len(res.Nominations) != tc.want || len(res.Verdicts) != 2-tc.want || res.Verdicts[len(res.Verdicts)-1].Reason != gantry.ReasonNoClusterCanHold {
			t.Errorf("lending limit %d: nominations %+v, verdicts %+v", tc.lend, res.Nominations, res.Verdicts)
		}
	}
}

package dispatch

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// preempts sets the queue's preemption rules.
func (b *queueBuilder) preempts(withinQueue, reclaim, fairSharing gantry.PreemptionRule) *queueBuilder {
	b.q.Preemption = gantry.PreemptionPolicy{WithinQueue: withinQueue, ReclaimWithinCohort: reclaim, FairSharing: fairSharing}
	return b
}

func (b *workloadBuilder) preemptedFor(key string) *workloadBuilder { b.w.PreemptedFor = key; return b }

const (
	never      = gantry.PreemptNever
	lower      = gantry.PreemptLowerPriority
	lowerNewer = gantry.PreemptLowerOrNewerEqualPriority
	lowerEqual = gantry.PreemptLowerOrEqualPriority
)

// A workload no cluster has quota for preempts, on the cluster where it takes the fewest, the running
// workloads its queue's rules allow: never one of higher priority, never while its earlier victims are
// still leaving.
func TestPlanPreempts(t *testing.T) {
	q := func() *queueBuilder { return makeQueue("q").quota("c", "nvidia.com/gpu", 8) }
	// a lends its 8 GPUs on c to b, which has none of its own.
	a := func() *queueBuilder { return makeQueue("a").cohort("lab").quota("c", "nvidia.com/gpu", 8) }
	b := func() *queueBuilder { return makeQueue("b").cohort("lab").quota("c", "nvidia.com/gpu", 0) }
	run := func(key, queue string, gpus int, prio int32, sec int) *Workload {
		return makeWorkload(key, queue).gpus(gpus).priority(prio).createdAt(sec).admittedOn("c").obj()
	}
	pending := func(key, queue string, gpus int, prio int32) *Workload {
		return makeWorkload(key, queue).gpus(gpus).priority(prio).createdAt(100).obj()
	}
	preempt := func(victim, preemptor, reason string) Preemption {
		return Preemption{Victim: victim, Cluster: "c", Preemptor: preemptor, Reason: reason}
	}
	cases := map[string]struct {
		snapshot *Snapshot
		want     []Preemption
		// verdict is the preemptor's Pending reason.
		verdict string
	}{
		"a higher priority preempts the newest of lower priority within its queue": {
			snapshot: makeSnapshot().cluster("c").queue(q().preempts(lower, never, never).obj()).workloads(
				run("ns/old", "q", 4, 0, 1), run("ns/new", "q", 4, 0, 2), pending("ns/high", "q", 4, 10)).obj(),
			want:    []Preemption{preempt("ns/new", "ns/high", gantry.ReasonInQueuePriority)},
			verdict: gantry.ReasonPreempting,
		},
		"of equal priority, the one that loses the least work since its last checkpoint": {
			snapshot: func() *Snapshot {
				s := makeSnapshot().cluster("c").queue(q().preempts(lower, never, never).obj()).workloads(
					run("ns/old", "q", 4, 0, 1), run("ns/new", "q", 4, 0, 2), pending("ns/high", "q", 4, 10)).obj()
				s.Now = t0.Add(time.Hour)
				s.Workloads[0].Run = &gantry.Run{Started: metav1.NewTime(t0), Checkpointed: &metav1.Time{Time: t0.Add(59 * time.Minute)}}
				s.Workloads[1].Run = &gantry.Run{Started: metav1.NewTime(t0.Add(50 * time.Minute))}
				return s
			}(),
			want:    []Preemption{preempt("ns/old", "ns/high", gantry.ReasonInQueuePriority)},
			verdict: gantry.ReasonPreempting,
		},
		"of equal priority, the one whose checkpoint interval saved the most": {
			snapshot: func() *Snapshot {
				s := makeSnapshot().cluster("c").queue(q().preempts(lower, never, never).obj()).workloads(
					run("ns/old", "q", 4, 0, 1), run("ns/new", "q", 4, 0, 2), pending("ns/high", "q", 4, 10)).obj()
				s.Now = t0.Add(time.Hour)
				s.Workloads[0].Run = &gantry.Run{Started: metav1.NewTime(t0)}
				s.Workloads[0].CheckpointInterval = &metav1.Duration{Duration: 20 * time.Minute} // saved at 60 min
				s.Workloads[1].Run = &gantry.Run{Started: metav1.NewTime(t0.Add(55 * time.Minute))}
				return s
			}(),
			want:    []Preemption{preempt("ns/old", "ns/high", gantry.ReasonInQueuePriority)},
			verdict: gantry.ReasonPreempting,
		},
		"the lowest priority goes first, and only as many as it takes": {
			snapshot: makeSnapshot().cluster("c").queue(q().preempts(lower, never, never).obj()).workloads(
				run("ns/five", "q", 2, 5, 1), run("ns/one", "q", 2, 1, 2), run("ns/three", "q", 4, 3, 3), pending("ns/high", "q", 4, 10)).obj(),
			want: []Preemption{preempt("ns/three", "ns/high", gantry.ReasonInQueuePriority)},
			// ns/one goes first, but ns/three alone makes room: ns/one is given back.
			verdict: gantry.ReasonPreempting,
		},
		"rules default to Never": {
			snapshot: makeSnapshot().cluster("c").queue(q().obj()).workloads(
				run("ns/low", "q", 8, 0, 1), pending("ns/high", "q", 4, 10)).obj(),
			verdict: gantry.ReasonWaitingForQuota,
		},
		"never a higher priority": {
			snapshot: makeSnapshot().cluster("c").queue(q().preempts(lowerNewer, never, never).obj()).workloads(
				run("ns/higher", "q", 8, 20, 1), pending("ns/high", "q", 4, 10)).obj(),
			verdict: gantry.ReasonWaitingForQuota,
		},
		"LowerPriority spares equal priority": {
			snapshot: makeSnapshot().cluster("c").queue(q().preempts(lower, never, never).obj()).workloads(
				run("ns/equal", "q", 8, 10, 101), pending("ns/high", "q", 4, 10)).obj(),
			verdict: gantry.ReasonWaitingForQuota,
		},
		"LowerOrNewerEqualPriority takes equal priority queued later": {
			snapshot: makeSnapshot().cluster("c").queue(q().preempts(lowerNewer, never, never).obj()).workloads(
				run("ns/older", "q", 4, 10, 1), run("ns/newer", "q", 4, 10, 101), pending("ns/high", "q", 4, 10)).obj(),
			want:    []Preemption{preempt("ns/newer", "ns/high", gantry.ReasonInQueuePriority)},
			verdict: gantry.ReasonPreempting,
		},
		"nothing more while its victims are leaving": {
			snapshot: makeSnapshot().cluster("c").queue(q().preempts(lower, never, never).obj()).workloads(
				makeWorkload("ns/leaving", "q").gpus(4).admittedOn("c").preemptedFor("ns/high").obj(),
				run("ns/low", "q", 4, 0, 1), pending("ns/high", "q", 8, 10)).obj(),
			verdict: gantry.ReasonPreempting,
		},
		"a lender takes back what a borrower uses": {
			snapshot: makeSnapshot().cluster("c").queue(a().preempts(never, lowerEqual, never).obj()).queue(b().obj()).workloads(
				run("ns/b1", "b", 4, 0, 1), run("ns/b2", "b", 4, 0, 2), pending("ns/a1", "a", 4, 0)).obj(),
			want:    []Preemption{preempt("ns/b2", "ns/a1", gantry.ReasonInCohortReclamation)},
			verdict: gantry.ReasonPreempting,
		},
		"reclaiming by LowerPriority spares equal priority": {
			snapshot: makeSnapshot().cluster("c").queue(a().preempts(never, lower, never).obj()).queue(b().obj()).workloads(
				run("ns/b1", "b", 8, 0, 1), pending("ns/a1", "a", 4, 0)).obj(),
			verdict: gantry.ReasonWaitingForQuota,
		},
		"a queue that would borrow itself does not reclaim": {
			snapshot: makeSnapshot().cluster("c").
				queue(makeQueue("a").cohort("lab").quota("c", "nvidia.com/gpu", 2).preempts(never, lowerEqual, never).obj()).
				queue(makeQueue("b").cohort("lab").quota("c", "nvidia.com/gpu", 6).obj()).workloads(
				run("ns/b1", "b", 8, 0, 1), pending("ns/a1", "a", 4, 0)).obj(),
			verdict: gantry.ReasonWaitingForQuota,
		},
		"a workload of a queue that does not borrow is never reclaimed": {
			snapshot: makeSnapshot().cluster("c").queue(a().preempts(never, lowerEqual, lowerEqual).obj()).
				queue(makeQueue("b").cohort("lab").quota("c", "nvidia.com/gpu", 8).obj()).workloads(
				run("ns/a0", "a", 8, 0, 1), run("ns/b1", "b", 8, 0, 1), pending("ns/a1", "a", 4, 0)).obj(),
			verdict: gantry.ReasonWaitingForQuota,
		},
		"a queue outside the cohort is never touched": {
			snapshot: makeSnapshot().cluster("c").queue(a().preempts(lowerEqual, lowerEqual, lowerEqual).obj()).
				queue(makeQueue("x").quota("c", "nvidia.com/gpu", 8).obj()).queue(b().obj()).workloads(
				run("ns/x1", "x", 8, 0, 1), run("ns/b1", "b", 8, 0, 1), pending("ns/a1", "a", 12, 5)).obj(),
			// a may use 8 of its own and the 0 b lends: ns/b1 borrows all of a's.
			verdict: gantry.ReasonNoClusterCanHold,
		},
		"fair sharing takes from the queue with the larger share": {
			snapshot: makeSnapshot().cluster("c").cohorts(makeCohort("lab").quota("c", 8).obj()).
				queue(makeQueue("a").cohort("lab").quota("c", "nvidia.com/gpu", 0).preempts(never, never, lowerEqual).obj()).
				queue(makeQueue("b").cohort("lab").quota("c", "nvidia.com/gpu", 0).obj()).workloads(
				run("ns/b1", "b", 2, 0, 1), run("ns/b2", "b", 2, 0, 2), run("ns/b3", "b", 2, 0, 3), run("ns/b4", "b", 2, 0, 4),
				pending("ns/a1", "a", 2, 0)).obj(),
			want:    []Preemption{preempt("ns/b4", "ns/a1", gantry.ReasonInCohortFairSharing)},
			verdict: gantry.ReasonPreempting,
		},
		"fair sharing stops where the shares would cross": {
			snapshot: makeSnapshot().cluster("c").cohorts(makeCohort("lab").quota("c", 8).obj()).
				queue(makeQueue("a").cohort("lab").quota("c", "nvidia.com/gpu", 0).preempts(never, never, lowerEqual).obj()).
				queue(makeQueue("b").cohort("lab").quota("c", "nvidia.com/gpu", 0).obj()).workloads(
				run("ns/a0", "a", 4, 0, 1), run("ns/b1", "b", 2, 0, 1), run("ns/b2", "b", 2, 0, 2),
				pending("ns/a1", "a", 2, 0)).obj(),
			verdict: gantry.ReasonWaitingForQuota,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res := Plan(tc.snapshot)
			if diff := cmp.Diff(tc.want, res.Preemptions, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(Preemption{}, "Message")); diff != "" {
				t.Errorf("preemptions (-want +got):\n%s", diff)
			}
			if got := verdictOf(res, preemptorOf(tc.snapshot)); got.Reason != tc.verdict {
				t.Errorf("preemptor's verdict = %+v, want reason %s", got, tc.verdict)
			}
		})
	}
}

func preemptorOf(s *Snapshot) string {
	for _, w := range s.Workloads {
		if w.Phase == Pending {
			return w.Key
		}
	}
	return ""
}

func verdictOf(res Result, key string) Verdict {
	for _, v := range res.Verdicts {
		if v.Key == key {
			return v
		}
	}
	return Verdict{}
}

// The preemptor's verdict names its victims and the cluster; each victim's message names the preemptor.
func TestPreemptionMessagesNameBothSides(t *testing.T) {
	s := makeSnapshot().cluster("c").queue(makeQueue("q").quota("c", "nvidia.com/gpu", 8).preempts(lower, never, never).obj()).workloads(
		makeWorkload("ns/low", "q").gpus(8).admittedOn("c").obj(),
		makeWorkload("ns/high", "q").gpus(4).priority(10).obj()).obj()
	res := Plan(s)
	if v := verdictOf(res, "ns/high"); v.Message != "preempting ns/low (InQueuePriority) on c to make room for it" {
		t.Errorf("preemptor's message = %q", v.Message)
	}
	if len(res.Preemptions) != 1 || !strings.Contains(res.Preemptions[0].Message, "to make room for ns/high (priority 10)") {
		t.Errorf("preemptions = %+v", res.Preemptions)
	}
}

// Among clusters, the one needing the fewest victims; at most MaxPreemptionsPerPass in one pass.
func TestPreemptionChoosesTheLeastHarmAndIsBounded(t *testing.T) {
	q := makeQueue("q").quota("c1", "nvidia.com/gpu", 4).quota("c2", "nvidia.com/gpu", 4).preempts(lower, never, never).obj()
	s := makeSnapshot().cluster("c1", "c2").queue(q).workloads(
		makeWorkload("ns/c1-a", "q").gpus(2).admittedOn("c1").obj(),
		makeWorkload("ns/c1-b", "q").gpus(2).admittedOn("c1").obj(),
		makeWorkload("ns/c2", "q").gpus(4).admittedOn("c2").obj(),
		makeWorkload("ns/high", "q").gpus(4).priority(10).obj()).obj()
	want := []Preemption{{Victim: "ns/c2", Cluster: "c2", Preemptor: "ns/high", Reason: gantry.ReasonInQueuePriority}}
	if diff := cmp.Diff(want, Plan(s).Preemptions, cmpopts.IgnoreFields(Preemption{}, "Message")); diff != "" {
		t.Errorf("preemptions (-want +got):\n%s", diff)
	}

	many := makeSnapshot().cluster("c").queue(makeQueue("q").quota("c", "nvidia.com/gpu", 40).preempts(lower, never, never).obj())
	for i := range 40 {
		many.workloads(makeWorkload(fmt.Sprintf("ns/low-%02d", i), "q").gpus(1).admittedOn("c").obj(),
			makeWorkload(fmt.Sprintf("ns/high-%02d", i), "q").gpus(1).priority(10).createdAt(i).obj())
	}
	res := Plan(many.obj())
	if len(res.Preemptions) != MaxPreemptionsPerPass {
		t.Errorf("%d preemptions in one pass, want %d", len(res.Preemptions), MaxPreemptionsPerPass)
	}
	victims := map[string]bool{}
	for _, p := range res.Preemptions {
		if victims[p.Victim] {
			t.Errorf("%s preempted twice", p.Victim)
		}
		victims[p.Victim] = true
	}
}

// copyWaitingFor adds a copy on cluster whose agent cannot admit it now, but could without keys.
func (b *workloadBuilder) copyWaitingFor(cluster string, keys ...string) *workloadBuilder {
	b.w.Copies = append(b.w.Copies, Copy{Cluster: cluster, Waiting: true, Reason: gantry.ReasonInsufficientResources,
		Message: "no room", WouldFitWithout: keys})
	return b
}

// A nominated workload whose copies wait at their agents preempts the workloads an agent named, on the
// cluster where they are fewest, when every one of them is one its queue's rules allow.
func TestPlanPreemptsWhatAnAgentNames(t *testing.T) {
	q := func() *queueBuilder {
		return makeQueue("q").quota("c1", "nvidia.com/gpu", 16).quota("c2", "nvidia.com/gpu", 16)
	}
	low := func(key, cluster string, prio int32) *Workload {
		return makeWorkload(key, "q").gpus(4).priority(prio).admittedOn(cluster).obj()
	}
	waiting := func() *workloadBuilder {
		return makeWorkload("ns/high", "q").gpus(8).priority(10).createdAt(100).nominated(1, "c1", "c2")
	}
	cases := map[string]struct {
		snapshot *Snapshot
		want     []Preemption
	}{
		"the cluster where the fewest must go": {
			snapshot: makeSnapshot().cluster("c1", "c2").queue(q().preempts(lower, never, never).obj()).workloads(
				low("ns/a", "c1", 0), low("ns/b", "c1", 0), low("ns/c", "c2", 0),
				waiting().copyWaitingFor("c1", "ns/a", "ns/b").copyWaitingFor("c2", "ns/c").obj()).obj(),
			want: []Preemption{{Victim: "ns/c", Cluster: "c2", Preemptor: "ns/high", Reason: gantry.ReasonInQueuePriority}},
		},
		"not one the rules do not allow": {
			snapshot: makeSnapshot().cluster("c1", "c2").queue(q().preempts(lower, never, never).obj()).workloads(
				low("ns/a", "c1", 10), waiting().copyWaitingFor("c1", "ns/a").obj()).obj(),
		},
		"not one that does not run there": {
			snapshot: makeSnapshot().cluster("c1", "c2").queue(q().preempts(lower, never, never).obj()).workloads(
				low("ns/a", "c2", 0), waiting().copyWaitingFor("c1", "ns/a").obj()).obj(),
		},
		"not without a rule": {
			snapshot: makeSnapshot().cluster("c1", "c2").queue(q().obj()).workloads(
				low("ns/a", "c1", 0), waiting().copyWaitingFor("c1", "ns/a").obj()).obj(),
		},
		"nothing more while its victims leave": {
			snapshot: makeSnapshot().cluster("c1", "c2").queue(q().preempts(lower, never, never).obj()).workloads(
				makeWorkload("ns/leaving", "q").gpus(4).admittedOn("c2").preemptedFor("ns/high").obj(),
				low("ns/a", "c1", 0), waiting().copyWaitingFor("c1", "ns/a").obj()).obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res := Plan(tc.snapshot)
			if diff := cmp.Diff(tc.want, res.Preemptions, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(Preemption{}, "Message")); diff != "" {
				t.Errorf("preemptions (-want +got):\n%s", diff)
			}
			v := verdictOf(res, "ns/high")
			if preempting := len(tc.want) > 0 || name == "nothing more while its victims leave"; preempting != (v.Reason == gantry.ReasonPreempting) || v.Withdraw {
				t.Errorf("verdict %+v", v)
			}
		})
	}
}

// A workload that may preempt goes to a cluster whose last report shows no room, so that its agent can
// say what would make room; one that may not, or finds nothing of lower priority there, waits for
// capacity as before.
func TestAWorkloadThatMayPreemptAsksTheAgent(t *testing.T) {
	snapshot := func(rule gantry.PreemptionRule, running int32) *Snapshot {
		return makeSnapshot().cluster("c").gpuFree("c", "A100", 0, 0).
			queue(makeQueue("q").quota("c", "nvidia.com/gpu", 64).preempts(rule, never, never).obj()).workloads(
			makeWorkload("ns/running", "q").gpuPods(4, 8).priority(running).admittedOn("c").obj(),
			makeWorkload("ns/high", "q").gpuPods(1, 8).priority(10).obj()).obj()
	}
	cases := map[string]struct {
		snapshot *Snapshot
		want     string // the Pending reason, or "nominated"
	}{
		"may preempt a lower priority there":         {snapshot(lower, 0), "nominated"},
		"no rule":                                    {snapshot(never, 0), gantry.ReasonWaitingForCapacity},
		"nothing of lower priority runs there":       {snapshot(lower, 10), gantry.ReasonWaitingForCapacity},
		"equal priority, under a rule that takes it": {snapshot(lowerNewer, 10), "nominated"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res := Plan(tc.snapshot)
			got := verdictOf(res, "ns/high").Reason
			if len(res.Nominations) == 1 {
				got = "nominated"
			}
			if got != tc.want {
				t.Errorf("got %s, want %s (%+v)", got, tc.want, res)
			}
		})
	}
}

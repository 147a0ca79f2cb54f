package dispatch

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func TestPlan(t *testing.T) {
	twoClusters := func() *queueBuilder {
		return makeQueue("q").quota("a", "nvidia.com/gpu", 8).quota("b", "nvidia.com/gpu", 8)
	}
	cases := map[string]struct {
		snapshot *Snapshot
		want     Result
	}{
		"only the cluster with room is a candidate": {
			snapshot: makeSnapshot().cluster("a", "b").queue(twoClusters().obj()).workloads(
				makeWorkload("ns/running", "q").gpus(8).admittedOn("a").obj(),
				makeWorkload("ns/new", "q").gpus(4).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{{Key: "ns/new", Epoch: 1, GlobalQueue: "q", Clusters: []string{"b"}}}},
		},
		"several candidates, most headroom first": {
			snapshot: makeSnapshot().cluster("a", "b").queue(twoClusters().obj()).workloads(
				makeWorkload("ns/running", "q").gpus(2).admittedOn("a").obj(),
				makeWorkload("ns/new", "q").gpus(4).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{{Key: "ns/new", Epoch: 1, GlobalQueue: "q", Clusters: []string{"b", "a"}}}},
		},
		"nominations reserve quota": {
			snapshot: makeSnapshot().cluster("a").queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/first", "q").gpus(6).createdAt(1).obj(),
				makeWorkload("ns/second", "q").gpus(6).createdAt(2).obj(),
			).obj(),
			want: Result{
				Nominations: []Nomination{{Key: "ns/first", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}}},
				Verdicts: []Verdict{{Key: "ns/second", Reason: gantry.ReasonWaitingForQuota,
					Message: "waiting for quota of GlobalQueue q"}},
			},
		},
		"existing nominations hold their reservation": {
			snapshot: makeSnapshot().cluster("a").queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/first", "q").gpus(6).nominated(3, "a").obj(),
				makeWorkload("ns/second", "q").gpus(6).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{{Key: "ns/second", Reason: gantry.ReasonWaitingForQuota,
				Message: "waiting for quota of GlobalQueue q"}}},
		},
		"priority before age": {
			snapshot: makeSnapshot().cluster("a").queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/old", "q").gpus(8).createdAt(1).obj(),
				makeWorkload("ns/urgent", "q").gpus(8).createdAt(5).priority(10).obj(),
			).obj(),
			want: Result{
				Nominations: []Nomination{{Key: "ns/urgent", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}}},
				Verdicts: []Verdict{{Key: "ns/old", Reason: gantry.ReasonWaitingForQuota,
					Message: "waiting for quota of GlobalQueue q"}},
			},
		},
		"best effort lets a small workload pass": {
			snapshot: makeSnapshot().cluster("a").queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/running", "q").gpus(4).admittedOn("a").obj(),
				makeWorkload("ns/big", "q").gpus(8).createdAt(1).obj(),
				makeWorkload("ns/small", "q").gpus(2).createdAt(2).obj(),
			).obj(),
			want: Result{
				Nominations: []Nomination{{Key: "ns/small", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}}},
				Verdicts: []Verdict{{Key: "ns/big", Reason: gantry.ReasonWaitingForQuota,
					Message: "waiting for quota of GlobalQueue q"}},
			},
		},
		"strict FIFO blocks behind the head": {
			snapshot: makeSnapshot().cluster("a").queue(makeQueue("q").strict().quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/running", "q").gpus(4).admittedOn("a").obj(),
				makeWorkload("ns/big", "q").gpus(8).createdAt(1).obj(),
				makeWorkload("ns/small", "q").gpus(2).createdAt(2).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{
				{Key: "ns/big", Reason: gantry.ReasonWaitingForQuota, Message: "waiting for quota of GlobalQueue q"},
				{Key: "ns/small", Reason: gantry.ReasonWaitingForQuota, Message: "queued behind ns/big (StrictFIFO)"},
			}},
		},
		"strict FIFO does not block behind a workload no cluster can hold": {
			snapshot: makeSnapshot().cluster("a").queue(makeQueue("q").strict().quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/huge", "q").gpus(16).createdAt(1).obj(),
				makeWorkload("ns/small", "q").gpus(2).createdAt(2).obj(),
			).obj(),
			want: Result{
				Nominations: []Nomination{{Key: "ns/small", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}}},
				Verdicts: []Verdict{{Key: "ns/huge", Reason: gantry.ReasonNoClusterCanHold,
					Message: "no cluster of GlobalQueue q can ever hold this workload: a: needs 16 nvidia.com/gpu, quota is 8"}},
			},
		},
		"resources the queue does not limit are not counted": {
			snapshot: makeSnapshot().cluster("a").queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/cpu-heavy", "q").cpu(10000).gpus(1).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{{Key: "ns/cpu-heavy", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}}}},
		},
		"disconnected and cordoned clusters are skipped": {
			snapshot: makeSnapshot().cluster("a", "b").disconnected("a").cordoned("b").queue(twoClusters().obj()).workloads(
				makeWorkload("ns/new", "q").gpus(1).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{{Key: "ns/new", Reason: gantry.ReasonNoClusterAvailable,
				Message: "no cluster that could hold this workload is available: a is not connected, b is cordoned"}}},
		},
		"a cluster still being connected after the hub started leaves the verdict as it was": {
			snapshot: makeSnapshot().cluster("a", "b").connecting("a").cordoned("b").queue(twoClusters().obj()).workloads(
				makeWorkload("ns/new", "q").gpus(1).obj(),
			).obj(),
			want: Result{},
		},
		"a cluster still being connected that could never hold it does not hold the verdict back": {
			snapshot: makeSnapshot().cluster("a", "b").connecting("a").disconnected("b").
				queue(makeQueue("q").quota("a", "nvidia.com/gpu", 1).quota("b", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/new", "q").gpus(4).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{{Key: "ns/new", Reason: gantry.ReasonNoClusterAvailable,
				Message: "no cluster that could hold this workload is available: b is not connected"}}},
		},
		"unknown cluster in a queue can never hold": {
			snapshot: makeSnapshot().queue(makeQueue("q").quota("ghost", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/new", "q").gpus(1).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{{Key: "ns/new", Reason: gantry.ReasonNoClusterCanHold,
				Message: "no cluster of GlobalQueue q can ever hold this workload: ghost: no such WorkerCluster"}}},
		},
		"the earliest admitted copy wins and frees the other reservation": {
			snapshot: makeSnapshot().cluster("a", "b").queue(twoClusters().maxCandidates(1).obj()).workloads(
				makeWorkload("ns/racing", "q").gpus(8).createdAt(1).nominated(2, "a", "b").
					copyAdmitted("b", 10).copyAdmitted("a", 11).obj(),
				makeWorkload("ns/next", "q").gpus(8).createdAt(2).obj(),
			).obj(),
			want: Result{
				Winners:     []Winner{{Key: "ns/racing", Cluster: "b", GlobalQueue: "q"}},
				Nominations: []Nomination{{Key: "ns/next", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}}},
			},
		},
		"a winner stays within the confirmed quota": {
			snapshot: makeSnapshot().cluster("a", "b").queue(twoClusters().obj()).workloads(
				makeWorkload("ns/running", "q").gpus(6).admittedOn("a").obj(),
				makeWorkload("ns/racing", "q").gpus(4).nominated(1, "a", "b").
					copyAdmitted("a", 1).copyAdmitted("b", 2).obj(),
			).obj(),
			want: Result{Winners: []Winner{{Key: "ns/racing", Cluster: "b", GlobalQueue: "q"}}},
		},
		"an admitted copy on a cluster not nominated in this epoch is ignored": {
			snapshot: makeSnapshot().cluster("a", "b").queue(twoClusters().obj()).workloads(
				makeWorkload("ns/w", "q").gpus(4).nominated(2, "b").copyAdmitted("a", 1).obj(),
			).obj(),
			want: Result{},
		},
		"a rejection is recorded and the workload renominated": {
			snapshot: makeSnapshot().cluster("a", "b").queue(twoClusters().obj()).workloads(
				makeWorkload("ns/w", "q").gpus(4).nominated(1, "a").copyRejected("a", gantry.ReasonNeverFits).obj(),
			).obj(),
			want: Result{
				Rejections:  map[string][]Rejection{"ns/w": {{Cluster: "a", Reason: gantry.ReasonNeverFits, Message: "no"}}},
				Nominations: []Nomination{{Key: "ns/w", Epoch: 2, GlobalQueue: "q", Clusters: []string{"b"}}},
			},
		},
		"rejected everywhere": {
			snapshot: makeSnapshot().cluster("a", "b").queue(twoClusters().obj()).workloads(
				makeWorkload("ns/w", "q").gpus(4).nominated(1, "b").rejected("a").copyRejected("b", gantry.ReasonJobNameConflict).obj(),
			).obj(),
			want: Result{
				Rejections: map[string][]Rejection{"ns/w": {{Cluster: "b", Reason: gantry.ReasonJobNameConflict, Message: "no"}}},
				Verdicts: []Verdict{{Key: "ns/w", Reason: gantry.ReasonNoClusterCanHold,
					Message:  "no cluster of GlobalQueue q can ever hold this workload: a: rejected by its agent; b: rejected by its agent",
					Withdraw: true}},
			},
		},
		"a nomination to a lost cluster is replaced by a new epoch": {
			snapshot: makeSnapshot().cluster("a", "b").disconnected("a").queue(twoClusters().obj()).workloads(
				makeWorkload("ns/w", "q").gpus(4).nominated(5, "a").obj(),
			).obj(),
			want: Result{Nominations: []Nomination{{Key: "ns/w", Epoch: 6, GlobalQueue: "q", Clusters: []string{"b"}}}},
		},
		"finished workloads use no quota": {
			snapshot: makeSnapshot().cluster("a").queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/done", "q").gpus(8).admittedOn("a").finished().obj(),
				makeWorkload("ns/new", "q").gpus(8).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{{Key: "ns/new", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}}}},
		},
		"capacity: a cluster whose free GPUs are fragmented gets no copy": {
			snapshot: makeSnapshot().cluster("a", "b").
				gpuFree("a", "A100", 8, 4). // 8 free, but 4 + 4 on two nodes
				gpuFree("b", "A100", 8, 8).
				queue(twoClusters().obj()).workloads(makeWorkload("ns/w", "q").gpuPods(1, 8).obj()).obj(),
			want: Result{Nominations: []Nomination{{Key: "ns/w", Epoch: 1, GlobalQueue: "q", Clusters: []string{"b"}}}},
		},
		"capacity: a fallback product keeps the cluster with it": {
			snapshot: makeSnapshot().cluster("a", "b").
				gpuFree("a", "A100", 16, 8).
				gpuFree("b", "H100", 0, 0).
				queue(twoClusters().obj()).workloads(makeWorkload("ns/w", "q").gpuPods(1, 8, "H100", "A100").obj()).obj(),
			want: Result{Nominations: []Nomination{{Key: "ns/w", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}}}},
		},
		"capacity: with room for the preferred product somewhere, only clusters with it get copies": {
			snapshot: makeSnapshot().cluster("a", "b").
				gpuFree("a", "A100", 32, 8).
				gpuFree("b", "H100", 8, 8).
				queue(twoClusters().obj()).workloads(makeWorkload("ns/w", "q").gpuPods(1, 8, "H100", "A100").obj()).obj(),
			want: Result{Nominations: []Nomination{{Key: "ns/w", Epoch: 1, GlobalQueue: "q", Clusters: []string{"b"}}}},
		},
		"capacity: the gang's total must be free": {
			snapshot: makeSnapshot().cluster("a").gpuFree("a", "A100", 8, 8).
				queue(makeQueue("q").quota("a", "nvidia.com/gpu", 32).obj()).
				workloads(makeWorkload("ns/w", "q").gpuPods(2, 8).obj()).obj(),
			want: Result{Verdicts: []Verdict{{Key: "ns/w", Reason: gantry.ReasonWaitingForCapacity,
				Message: "waiting for GPUs: needs 16 nvidia.com/gpu, 8 on one node; none free on a (see WorkerCluster status.capacity)"}},
				ReadCapacity: map[string]bool{"q": true}},
		},
		"capacity: no room anywhere waits, naming the products": {
			snapshot: makeSnapshot().cluster("a", "b").
				gpuFree("a", "A100", 4, 2).
				gpuFree("b", "H100", 4, 4).
				queue(twoClusters().obj()).workloads(makeWorkload("ns/w", "q").gpuPods(1, 8, "H100", "A100").obj()).obj(),
			want: Result{Verdicts: []Verdict{{Key: "ns/w", Reason: gantry.ReasonWaitingForCapacity,
				Message: "waiting for GPUs: needs 8 nvidia.com/gpu (H100 or A100), 8 on one node; none free on a, b (see WorkerCluster status.capacity)"}},
				ReadCapacity: map[string]bool{"q": true}},
		},
		"capacity: a pod larger than any node goes to the agent, which says why it never fits": {
			snapshot: makeSnapshot().cluster("a").gpuFree("a", "A100", 0, 0).
				queue(makeQueue("q").quota("a", "nvidia.com/gpu", 64).obj()).
				workloads(makeWorkload("ns/w", "q").gpuPods(1, 16).obj()).obj(),
			want: Result{Nominations: []Nomination{{Key: "ns/w", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}}}},
		},
		"capacity: a cluster without an accepted product goes to the agent, which rejects it": {
			snapshot: makeSnapshot().cluster("a").gpuFree("a", "A100", 32, 8).
				queue(makeQueue("q").quota("a", "nvidia.com/gpu", 64).obj()).
				workloads(makeWorkload("ns/w", "q").gpuPods(1, 8, "H100").obj()).obj(),
			want: Result{Nominations: []Nomination{{Key: "ns/w", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}}}},
		},
		"capacity: a cluster that reports no GPU products is left to its agent": {
			snapshot: makeSnapshot().cluster("a").
				queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).
				workloads(makeWorkload("ns/w", "q").gpuPods(1, 8, "H100").obj()).obj(),
			want: Result{Nominations: []Nomination{{Key: "ns/w", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}}}},
		},
		"capacity: workloads without GPUs ignore GPU reports": {
			snapshot: makeSnapshot().cluster("a").gpuFree("a", "A100", 0, 0).
				queue(makeQueue("q").quota("a", "cpu", 8).obj()).
				workloads(makeWorkload("ns/w", "q").cpu(2).obj()).obj(),
			want: Result{Nominations: []Nomination{{Key: "ns/w", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}}}},
		},
		"a nominated workload repeats why its agents wait": {
			snapshot: makeSnapshot().cluster("a", "b").queue(twoClusters().obj()).workloads(
				makeWorkload("ns/w", "q").gpus(8).nominated(1, "a", "b").
					copyWaiting("b", gantry.ReasonInsufficientResources, "needs 1 pod x 8 nvidia.com/gpu; largest free on one node: 4 (n1)").obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{{Key: "ns/w", Reason: gantry.ReasonWaitingForAdmission,
				Message: "waiting for a, b to admit; b: InsufficientResources: needs 1 pod x 8 nvidia.com/gpu; largest free on one node: 4 (n1)"}},
				AgentNews: map[string]time.Time{"ns/w": {}}},
		},
		"a copy whose reservation expired is dispatched again in a new epoch": {
			snapshot: makeSnapshot().cluster("a").queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/w", "q").gpus(8).nominated(3, "a").copyExpired("a").obj(),
			).obj(),
			want: Result{Nominations: []Nomination{{Key: "ns/w", Epoch: 4, GlobalQueue: "q", Clusters: []string{"a"}}}},
		},
		"an agent's explanation already on record is not proposed again": {
			snapshot: makeSnapshot().cluster("a").queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/w", "q").gpus(8).nominated(1, "a").copyWaiting("a", gantry.ReasonInsufficientResources, "later").
					pendingMessage("waiting for a to admit; a: InsufficientResources: later").obj(),
			).obj(),
			want: Result{},
		},
		"a verdict a workload already shows is not proposed again; another one is": {
			snapshot: makeSnapshot().cluster("a").queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/running", "q").gpus(8).admittedOn("a").obj(),
				makeWorkload("ns/shown", "q").gpus(8).createdAt(1).pending(gantry.ReasonWaitingForQuota, "waiting for quota of GlobalQueue q").obj(),
				makeWorkload("ns/said-other", "q").gpus(8).createdAt(2).pending(gantry.ReasonNoClusterAvailable, "waiting for quota of GlobalQueue q").obj(),
				makeWorkload("ns/huge", "q").gpus(16).createdAt(3).pending(gantry.ReasonWaitingForQuota, "waiting for quota of GlobalQueue q").obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{
				{Key: "ns/said-other", Reason: gantry.ReasonWaitingForQuota, Message: "waiting for quota of GlobalQueue q"},
				{Key: "ns/huge", Reason: gantry.ReasonNoClusterCanHold, Message: "no cluster of GlobalQueue q can ever hold this workload: a: needs 16 nvidia.com/gpu, quota is 8"},
			}},
		},
		"a workload whose Queue cannot be resolved is told why, once, and its copies withdrawn": {
			snapshot: makeSnapshot().cluster("a").queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/fresh", "q").gpus(8).unqueued(gantry.ReasonQueueNotFound, `Queue "q" not found in namespace ns`).obj(),
				makeWorkload("ns/told", "q").gpus(8).unqueued(gantry.ReasonQueueNotFound, `Queue "q" not found in namespace ns`).
					pending(gantry.ReasonQueueNotFound, `Queue "q" not found in namespace ns`).obj(),
				makeWorkload("ns/nominated", "q").gpus(8).nominated(1, "a").
					unqueued(gantry.ReasonGlobalQueueNotFound, `GlobalQueue "gone" of Queue "q" not found`).
					pending(gantry.ReasonGlobalQueueNotFound, `GlobalQueue "gone" of Queue "q" not found`).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{
				{Key: "ns/fresh", Reason: gantry.ReasonQueueNotFound, Message: `Queue "q" not found in namespace ns`},
				{Key: "ns/nominated", Reason: gantry.ReasonGlobalQueueNotFound, Message: `GlobalQueue "gone" of Queue "q" not found`, Withdraw: true},
			}},
		},
		"a withdrawal is proposed though the workload shows the verdict": {
			snapshot: makeSnapshot().cluster("a").
				queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/running", "q").gpus(8).admittedOn("a").obj(),
				makeWorkload("ns/moved", "q").gpus(8).nominated(2, "a").nominatedUnder("old").
					pending(gantry.ReasonWaitingForQuota, "waiting for quota of GlobalQueue q").obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{{Key: "ns/moved", Reason: gantry.ReasonWaitingForQuota,
				Message: "waiting for quota of GlobalQueue q", Withdraw: true}}},
		},
		"a nomination made under another GlobalQueue does not win, and is replaced under the current one": {
			snapshot: makeSnapshot().cluster("a").
				queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).
				queue(makeQueue("old").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/moved", "q").gpus(8).nominated(2, "a").nominatedUnder("old").copyAdmitted("a", 1).obj(),
			).obj(),
			want: Result{Nominations: []Nomination{{Key: "ns/moved", Epoch: 3, GlobalQueue: "q", Clusters: []string{"a"}}}},
		},
		"a nomination made under another GlobalQueue reserves nothing in the current one": {
			snapshot: makeSnapshot().cluster("a").
				queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/moved", "q").gpus(8).createdAt(1).nominated(2, "a").nominatedUnder("old").obj(),
				makeWorkload("ns/urgent", "q").gpus(8).createdAt(2).priority(10).obj(),
			).obj(),
			want: Result{
				Nominations: []Nomination{{Key: "ns/urgent", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}}},
				Verdicts: []Verdict{{Key: "ns/moved", Reason: gantry.ReasonWaitingForQuota,
					Message: "waiting for quota of GlobalQueue q", Withdraw: true}},
			},
		},
		"a nomination recorded without its GlobalQueue counts as made under the current one": {
			snapshot: makeSnapshot().cluster("a").
				queue(makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj()).workloads(
				makeWorkload("ns/old", "q").gpus(8).nominated(2, "a").copyAdmitted("a", 1).obj(),
			).obj(),
			want: Result{Winners: []Winner{{Key: "ns/old", Cluster: "a", GlobalQueue: "q"}}},
		},
		"workloads of unknown queues are left to the snapshot builder": {
			snapshot: makeSnapshot().cluster("a").workloads(makeWorkload("ns/w", "missing").gpus(1).obj()).obj(),
			want:     Result{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Plan(tc.snapshot)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), ignoreReach); diff != "" {
				t.Errorf("Plan() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// ignoreReach leaves why a nomination went as far as it did to the tests of that (alone_test.go,
// TestIncrementalDispatch).
var ignoreReach = cmpopts.IgnoreFields(Nomination{}, "Reach")

func TestResourcesRoundTrip(t *testing.T) {
	in := Resources{"cpu": 1500, "nvidia.com/gpu": 8000}
	got := FromResourceList(in.ToResourceList())
	if diff := cmp.Diff(in, got); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
}

func TestFencedClusterGetsNothing(t *testing.T) {
	s := &Snapshot{
		Clusters:  map[string]Cluster{"w1": {Name: "w1", Connected: true, AgentReady: true, Fenced: true}},
		Queues:    map[string]*GlobalQueue{"gq": {Name: "gq", MaxCandidates: 2, Clusters: []string{"w1"}, Quota: map[string]Resources{"w1": {}}}},
		Workloads: []*Workload{{Key: "ns/a", GlobalQueue: "gq", Requests: Resources{"cpu": 1000}}},
	}
	res := Plan(s)
	if len(res.Nominations) != 0 || len(res.Verdicts) != 1 || res.Verdicts[0].Reason != gantry.ReasonNoClusterAvailable ||
		!strings.Contains(res.Verdicts[0].Message, "w1 is fenced") {
		t.Errorf("nominations %v, verdicts %+v", res.Nominations, res.Verdicts)
	}
}

// A JobSet goes only to the clusters where the hub can run JobSets; where none can, it says so.
func TestAKindGoesWhereItRuns(t *testing.T) {
	s := &Snapshot{
		Clusters: map[string]Cluster{
			"jobs-only": {Name: "jobs-only", Connected: true, AgentReady: true, Kinds: map[string]bool{"Job": true}},
			"jobsets":   {Name: "jobsets", Connected: true, AgentReady: true, Kinds: map[string]bool{"Job": true, "JobSet": true}},
		},
		Queues: map[string]*GlobalQueue{"gq": {Name: "gq", MaxCandidates: 2, Clusters: []string{"jobs-only", "jobsets"},
			Quota: map[string]Resources{"jobs-only": {}, "jobsets": {}}}},
		Workloads: []*Workload{
			{Key: "ns/js", GlobalQueue: "gq", Kind: "JobSet", Requests: Resources{"cpu": 1000}},
			{Key: "ns/job", GlobalQueue: "gq", Requests: Resources{"cpu": 1000}, Created: time.Unix(1, 0)},
		},
	}
	res := Plan(s)
	got := map[string][]string{}
	for _, n := range res.Nominations {
		got[n.Key] = n.Clusters
	}
	if diff := cmp.Diff(map[string][]string{"ns/js": {"jobsets"}, "ns/job": {"jobs-only", "jobsets"}}, got,
		cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("nominations (-want +got):\n%s", diff)
	}
	delete(s.Clusters, "jobsets")
	s.Queues["gq"].Clusters = []string{"jobs-only"}
	s.Workloads = s.Workloads[:1]
	res = Plan(s)
	if len(res.Verdicts) != 1 || res.Verdicts[0].Reason != gantry.ReasonNoClusterCanHold || !strings.Contains(res.Verdicts[0].Message, "jobs-only: does not run JobSets") {
		t.Errorf("verdicts %+v", res.Verdicts)
	}
}

package dispatch

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// A stopped workload is not dispatched: told so, its nomination withdrawn, reserving nothing, never
// winning with a copy admitted; one that runs keeps its quota until the Workload controller took it back.
// Resumed, it takes its place in the queue again.
func TestStoppedWorkloadsAreNotDispatched(t *testing.T) {
	queue := func() *GlobalQueue { return makeQueue("q").quota("a", "nvidia.com/gpu", 8).obj() }
	stoppedMsg := StoppedMessage("", "ns/job-first")
	cases := map[string]struct {
		snapshot *Snapshot
		want     Result
	}{
		"stopped while it waits: told so, and the next one takes the room": {
			snapshot: makeSnapshot().cluster("a").queue(queue()).workloads(
				makeWorkload("ns/job-first", "q").gpus(8).createdAt(1).stopped().obj(),
				makeWorkload("ns/job-second", "q").gpus(8).createdAt(2).obj(),
			).obj(),
			want: Result{
				Nominations: []Nomination{{Key: "ns/job-second", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}, Reach: ReachCandidates}},
				Verdicts:    []Verdict{{Key: "ns/job-first", Reason: gantry.ReasonStopped, Message: stoppedMsg}},
			},
		},
		"stopped while nominated, its copy admitted: no winner, the nomination withdrawn, its reservation given up": {
			snapshot: makeSnapshot().cluster("a").queue(queue()).workloads(
				makeWorkload("ns/job-first", "q").gpus(8).createdAt(1).nominated(1, "a").copyAdmitted("a", 5).stopped().obj(),
				makeWorkload("ns/job-second", "q").gpus(8).createdAt(2).obj(),
			).obj(),
			want: Result{
				Nominations: []Nomination{{Key: "ns/job-second", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}, Reach: ReachCandidates}},
				Verdicts:    []Verdict{{Key: "ns/job-first", Reason: gantry.ReasonStopped, Message: stoppedMsg, Withdraw: true}},
			},
		},
		"stopped and told so: nothing more to say": {
			snapshot: makeSnapshot().cluster("a").queue(queue()).workloads(
				makeWorkload("ns/job-first", "q").gpus(8).createdAt(1).stopped().pending(gantry.ReasonStopped, stoppedMsg).obj(),
			).obj(),
			want: Result{},
		},
		"stopped while it runs: it keeps its quota until it is taken back": {
			snapshot: makeSnapshot().cluster("a").queue(queue()).workloads(
				makeWorkload("ns/job-first", "q").gpus(8).createdAt(1).admittedOn("a").stopped().obj(),
				makeWorkload("ns/job-second", "q").gpus(8).createdAt(2).obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{{Key: "ns/job-second", Reason: gantry.ReasonWaitingForQuota,
				Message: "waiting for quota of GlobalQueue q"}}},
		},
		"resumed: dispatched in its place, before a younger one": {
			snapshot: makeSnapshot().cluster("a").queue(queue()).workloads(
				makeWorkload("ns/job-first", "q").gpus(8).createdAt(1).pending(gantry.ReasonStopped, stoppedMsg).obj(),
				makeWorkload("ns/job-second", "q").gpus(8).createdAt(2).obj(),
			).obj(),
			want: Result{
				Nominations: []Nomination{{Key: "ns/job-first", Epoch: 1, GlobalQueue: "q", Clusters: []string{"a"}, Reach: ReachCandidates}},
				Verdicts: []Verdict{{Key: "ns/job-second", Reason: gantry.ReasonWaitingForQuota,
					Message: "waiting for quota of GlobalQueue q"}},
			},
		},
		"stopped in a queue that is not there: told it is stopped": {
			snapshot: makeSnapshot().cluster("a").queue(queue()).workloads(
				makeWorkload("ns/job-first", "").gpus(8).unqueued(gantry.ReasonQueueNotFound, "no Queue").stopped().obj(),
			).obj(),
			want: Result{Verdicts: []Verdict{{Key: "ns/job-first", Reason: gantry.ReasonStopped, Message: stoppedMsg}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Plan(tc.snapshot)
			got.Proposed, got.AgentNews, got.HeldFor, got.Held = nil, nil, 0, nil
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// The message says how to resume the job, named as kubectl gantry names it.
func TestStoppedMessageSaysHowToResume(t *testing.T) {
	for _, tc := range []struct{ kind, key, want string }{
		{"", "team-a/job-train", "kubectl gantry resume job/train -n team-a"},
		{"JobSet", "team-b/jobset-big-run", "kubectl gantry resume jobset/big-run -n team-b"},
	} {
		if got := StoppedMessage(tc.kind, tc.key); !strings.HasSuffix(got, tc.want) {
			t.Errorf("StoppedMessage(%q, %q) = %q, want it to end with %q", tc.kind, tc.key, got, tc.want)
		}
	}
}

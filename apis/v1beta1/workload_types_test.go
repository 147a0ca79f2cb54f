package v1beta1

import (
	"slices"
	"testing"
)

// TestAWinnerTakenBackIsVoid: the Workload controller records an eviction of the winner, and the
// dispatcher clears the winner's fields with its next write; in between they read as cleared.
func TestAWinnerTakenBackIsVoid(t *testing.T) {
	preemption := &Preemption{Cluster: "w1", Epoch: 2, Preemptor: "ns/urgent"}
	admission := &Admission{TopologyDomain: "rack-1"}
	cases := []struct {
		name      string
		st        WorkloadStatus
		winner    string
		nominated []string
		preempted bool
	}{{
		name:   "pending",
		st:     WorkloadStatus{DispatchEpoch: 2, NominatedClusters: []string{"w1", "w2"}},
		winner: "", nominated: []string{"w1", "w2"},
	}, {
		name: "won",
		st: WorkloadStatus{DispatchEpoch: 2, NominatedClusters: []string{"w1", "w2"}, ClusterName: "w1", Admission: admission,
			Preemption: preemption, Evictions: []Eviction{{Cluster: "w2", Epoch: 1}}},
		winner: "w1", nominated: []string{"w1", "w2"}, preempted: true,
	}, {
		name: "taken back, not yet cleared",
		st: WorkloadStatus{DispatchEpoch: 2, NominatedClusters: []string{"w1", "w2"}, ClusterName: "w1", Admission: admission,
			Preemption: preemption, Evictions: []Eviction{{Cluster: "w2", Epoch: 1}, {Cluster: "w1", Epoch: 2}}},
		winner: "", nominated: nil,
	}, {
		name: "an eviction of the same cluster in an earlier epoch",
		st: WorkloadStatus{DispatchEpoch: 3, NominatedClusters: []string{"w1"}, ClusterName: "w1", Admission: admission,
			Evictions: []Eviction{{Cluster: "w1", Epoch: 2}}},
		winner: "w1", nominated: []string{"w1"},
	}, {
		name:   "a preemption of an earlier epoch",
		st:     WorkloadStatus{DispatchEpoch: 3, NominatedClusters: []string{"w1"}, ClusterName: "w1", Preemption: preemption},
		winner: "w1", nominated: []string{"w1"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			if got := st.Winner(); got != tc.winner {
				t.Errorf("Winner() = %q, want %q", got, tc.winner)
			}
			if got := st.TakenBack(); got != (st.ClusterName != "" && tc.winner == "") {
				t.Errorf("TakenBack() = %v", got)
			}
			if got := st.Nominated(); !slices.Equal(got, tc.nominated) {
				t.Errorf("Nominated() = %v, want %v", got, tc.nominated)
			}
			if got := st.CurrentPreemption() != nil; got != tc.preempted {
				t.Errorf("CurrentPreemption() set = %v, want %v", got, tc.preempted)
			}
			if got := st.WinnerAdmission(); (got != nil) != (tc.winner != "" && st.Admission != nil) {
				t.Errorf("WinnerAdmission() = %v", got)
			}
		})
	}
}

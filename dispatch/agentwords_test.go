package dispatch

import (
	"strings"
	"testing"
)

func TestAgentWordsInvertsWaitingMessage(t *testing.T) {
	for name, tc := range map[string]struct {
		nominated []string
		copies    []Copy
		rejected  map[string]string
		want      map[string]string
	}{
		"one agent": {
			nominated: []string{"w1"},
			copies:    []Copy{{Cluster: "w1", Waiting: true, Reason: "InsufficientResources", Message: "needs 8 nvidia.com/gpu on one node; largest free is 4"}},
			want:      map[string]string{"w1": "InsufficientResources: needs 8 nvidia.com/gpu on one node; largest free is 4"},
		},
		"two agents, one silent": {
			nominated: []string{"w1", "w2", "w3"},
			copies: []Copy{
				{Cluster: "w1", Waiting: true, Reason: "A", Message: "x: y"},
				{Cluster: "w3", Waiting: true, Reason: "B", Message: "z"}},
			want: map[string]string{"w1": "A: x: y", "w3": "B: z"},
		},
		"rejected clusters are left out": {
			nominated: []string{"w1", "w2"},
			copies:    []Copy{{Cluster: "w1", Waiting: true, Reason: "A", Message: "m"}, {Cluster: "w2", Waiting: true, Reason: "B", Message: "n"}},
			rejected:  map[string]string{"w1": RejectedByAgent},
			want:      map[string]string{"w2": "B: n"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			msg := waitingMessage(&Workload{Nominated: tc.nominated, Copies: tc.copies}, tc.rejected)
			got := AgentWords(msg, tc.nominated)
			if len(got) != len(tc.want) {
				t.Fatalf("AgentWords(%q) = %v, want %v", msg, got, tc.want)
			}
			for c, w := range tc.want {
				if got[c] != w {
					t.Errorf("cluster %s: got %q, want %q (message %q)", c, got[c], w, msg)
				}
			}
		})
	}
}

func TestAgentWordsOfOtherMessagesIsEmpty(t *testing.T) {
	for _, msg := range []string{"", "waiting for quota of GlobalQueue gpus", "waiting for w2 to admit; w1: A: m"} {
		if got := AgentWords(msg, []string{"w1"}); len(got) != 0 {
			t.Errorf("AgentWords(%q) = %v, want nothing", msg, got)
		}
	}
}

// Whatever two agents say, each one's words come back whole unless they quote the other cluster's name
// in the form the message separates parts with.
func FuzzAgentWords(f *testing.F) {
	f.Add("InsufficientResources", "needs 8 GPUs; 4 free", "NoEligibleNode", "0/4 nodes: taint")
	f.Fuzz(func(t *testing.T, r1, m1, r2, m2 string) {
		if len(m1) > maxAgentMessage || len(m2) > maxAgentMessage || strings.Contains(r1+": "+m1, "; w2: ") {
			return
		}
		w := &Workload{Nominated: []string{"w1", "w2"}, Copies: []Copy{
			{Cluster: "w1", Waiting: true, Reason: r1, Message: m1},
			{Cluster: "w2", Waiting: true, Reason: r2, Message: m2}}}
		got := AgentWords(waitingMessage(w, nil), w.Nominated)
		if got["w1"] != r1+": "+m1 || got["w2"] != r2+": "+m2 {
			t.Fatalf("got %q, want %q and %q", got, r1+": "+m1, r2+": "+m2)
		}
	})
}

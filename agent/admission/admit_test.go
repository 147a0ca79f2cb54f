package admission

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestAdmit(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	g := func(key string, prio int32, age time.Duration, sets ...PodSet) Gang {
		return Gang{Key: key, Priority: prio, CreationTime: t0.Add(-age), PodSets: sets}
	}
	two := []Node{gpuNode("a", 8, h100), gpuNode("b", 8, h100)}
	onlyReason := cmpopts.IgnoreFields(Unfit{}, "Message", "PodSet", "Resource")
	admitted := func(key string, p ...Assignment) Decision {
		return Decision{Key: key, Admitted: true, Placement: p}
	}
	short := func(key string) Decision {
		return Decision{Key: key, Unfit: &Unfit{Reason: InsufficientResources}}
	}
	cases := []struct {
		name     string
		nodes    []Node
		reserved map[string]Placement
		gangs    []Gang
		want     []Decision
	}{{
		name:  "priority, then age, then key",
		nodes: two,
		gangs: []Gang{
			g("low-old", 0, time.Hour, gpuPods("w", 2, 8)),
			g("high-new", 10, time.Minute, gpuPods("w", 1, 8)),
			g("high-old", 10, time.Hour, gpuPods("w", 1, 8)),
		},
		want: []Decision{
			admitted("high-old", at("w", "a", 1)),
			admitted("high-new", at("w", "b", 1)),
			short("low-old"),
		},
	}, {
		name:  "same priority and age: by key",
		nodes: two,
		gangs: []Gang{
			g("c", 0, time.Hour, gpuPods("w", 1, 8)),
			g("a", 0, time.Hour, gpuPods("w", 1, 8)),
			g("b", 0, time.Hour, gpuPods("w", 1, 8)),
		},
		want: []Decision{
			admitted("a", at("w", "a", 1)),
			admitted("b", at("w", "b", 1)),
			short("c"),
		},
	}, {
		name:  "best effort: a smaller later gang passes a larger one that does not fit",
		nodes: two,
		gangs: []Gang{
			g("small", 0, time.Minute, gpuPods("w", 1, 4)),
			g("big", 0, time.Hour, gpuPods("w", 3, 8)),
		},
		want: []Decision{
			{Key: "big", Unfit: &Unfit{Reason: NeverFits}},
			admitted("small", at("w", "a", 1)),
		},
	}, {
		name:     "reservations from earlier passes hold their room",
		nodes:    two,
		reserved: map[string]Placement{"old": {{PodSet: "w", Node: "a", Count: 1, Requests: rl("nvidia.com/gpu", "8")}}},
		gangs: []Gang{
			g("new1", 0, time.Hour, gpuPods("w", 1, 8)),
			g("new2", 0, time.Minute, gpuPods("w", 1, 8)),
		},
		want: []Decision{
			admitted("new1", at("w", "b", 1)),
			short("new2"),
		},
	}, {
		name:     "a gang already reserved keeps its placement and is not counted twice",
		nodes:    two,
		reserved: map[string]Placement{"old": {{PodSet: "w", Node: "b", Count: 1, Requests: rl("nvidia.com/gpu", "8")}}},
		gangs: []Gang{
			g("old", 0, time.Hour, gpuPods("w", 1, 8)),
			g("new", 0, time.Minute, gpuPods("w", 1, 8)),
		},
		want: []Decision{
			admitted("old", at("w", "b", 1)),
			admitted("new", at("w", "a", 1)),
		},
	}, {
		name:  "the same key twice is admitted once",
		nodes: two,
		gangs: []Gang{
			g("x", 0, time.Hour, gpuPods("w", 1, 8)),
			g("x", 0, time.Hour, gpuPods("w", 1, 8)),
			g("y", 0, time.Minute, gpuPods("w", 1, 8)),
		},
		want: []Decision{
			admitted("x", at("w", "a", 1)),
			admitted("x", at("w", "a", 1)),
			admitted("y", at("w", "b", 1)),
		},
	}, {
		name:  "each gang sees what the ones before it reserved",
		nodes: two,
		gangs: []Gang{
			g("g1", 0, 4*time.Hour, gpuPods("w", 3, 2)),
			g("g2", 0, 3*time.Hour, gpuPods("w", 1, 4)),
			g("g3", 0, 2*time.Hour, gpuPods("w", 1, 2)),
			g("g4", 0, time.Hour, gpuPods("w", 1, 4)),
		},
		want: []Decision{
			admitted("g1", at("w", "a", 3)),
			admitted("g2", at("w", "b", 1)),
			admitted("g3", at("w", "a", 1)),
			admitted("g4", at("w", "b", 1)),
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSnapshot(tc.nodes)
			for k, p := range tc.reserved {
				s.Reserve(k, p)
			}
			got := s.Admit(tc.gangs)
			if d := cmp.Diff(tc.want, got, ignoreRequests, onlyReason, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("decisions (-want +got):\n%s", d)
			}
			// Every admitted gang holds a reservation; no unfit one does.
			for _, d := range got {
				if _, ok := s.Reservation(d.Key); ok != d.Admitted {
					t.Errorf("gang %s: reserved %v, admitted %v", d.Key, ok, d.Admitted)
				}
			}
		})
	}
}

func TestAdmitReservesWhatItAdmits(t *testing.T) {
	s := NewSnapshot([]Node{gpuNode("a", 8, h100)})
	s.Admit([]Gang{gang("g", gpuPods("w", 3, 2))})
	if got := freeOf(t, s, "a", gpu); got != 2 {
		t.Errorf("free GPUs after admitting 3 x 2: %d, want 2", got)
	}
	s.Release("g")
	if got := freeOf(t, s, "a", gpu); got != 8 {
		t.Errorf("free GPUs after release: %d, want 8", got)
	}
}

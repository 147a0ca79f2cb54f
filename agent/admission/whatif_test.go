package admission

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// The what-if names the fewest admitted gangs of no higher priority whose going lets a waiting gang fit
// now, lowest priority and newest first, and leaves the snapshot as it was.
func TestWouldFitWithout(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gpus := func(n string) corev1.ResourceList { return rl("nvidia.com/gpu", n) }
	holder := func(key string, prio int32, sec int, node, n string) Holder {
		return Holder{Key: key, Priority: prio, CreationTime: t0.Add(time.Duration(sec) * time.Second),
			Pods: []BoundPod{{Node: node, Requests: gpus(n)}}}
	}
	wants := func(prio int32, pods int32) Gang {
		g := gang("ns/waiting", PodSet{Name: "main", Count: pods, Requests: gpus("8")})
		g.Priority = prio
		return g
	}
	nodes := []Node{gpuNode("n1", 8, ""), gpuNode("n2", 8, "")}
	cases := map[string]struct {
		holders []Holder
		other   map[string][]corev1.ResourceList // bound pods of no holder
		gang    Gang
		want    []string
	}{
		"the lowest priorities that make room": {
			holders: []Holder{holder("ns/a", 0, 1, "n1", "4"), holder("ns/b", 0, 2, "n1", "4"), holder("ns/c", 5, 0, "n2", "8")},
			gang:    wants(10, 1),
			want:    []string{"ns/a", "ns/b"},
		},
		"never a higher priority": {
			holders: []Holder{holder("ns/a", 0, 1, "n1", "4"), holder("ns/c", 5, 0, "n2", "8")},
			other:   map[string][]corev1.ResourceList{"n1": {gpus("4")}},
			gang:    wants(3, 1),
		},
		"equal priority may be named": {
			holders: []Holder{holder("ns/c", 5, 0, "n2", "8")},
			other:   map[string][]corev1.ResourceList{"n1": {gpus("8")}},
			gang:    wants(5, 1),
			want:    []string{"ns/c"},
		},
		"one taken on the way but not needed is given back": {
			holders: []Holder{holder("ns/small", 0, 9, "n1", "2"), holder("ns/big", 1, 0, "n2", "8")},
			other:   map[string][]corev1.ResourceList{"n1": {gpus("6")}},
			gang:    wants(10, 1),
			want:    []string{"ns/big"},
		},
		"what is leaving counts as free and is never named": {
			holders: []Holder{{Leaving: true, Pods: []BoundPod{{Node: "n1", Requests: gpus("8")}}}, holder("ns/a", 0, 1, "n2", "8")},
			gang:    wants(10, 2),
			want:    []string{"ns/a"},
		},
		"none need go once what is leaving has gone": {
			holders: []Holder{{Leaving: true, Pods: []BoundPod{{Node: "n1", Requests: gpus("8")}}}, holder("ns/a", 0, 1, "n2", "8")},
			gang:    wants(10, 1),
		},
		"a gang no going makes fit": {
			holders: []Holder{holder("ns/a", 0, 1, "n1", "8")},
			other:   map[string][]corev1.ResourceList{"n2": {gpus("8")}},
			gang:    wants(10, 2),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := snapshot(nodes, tc.other)
			for _, h := range tc.holders {
				for _, p := range h.Pods {
					s.AddUsage(p.Node, p.Requests)
				}
			}
			before := slices.Clone(s.free)
			if got := s.WouldFitWithout(tc.gang, tc.holders); !cmp.Equal(got, tc.want) {
				t.Errorf("WouldFitWithout = %v, want %v", got, tc.want)
			}
			if !slices.Equal(before, s.free) {
				t.Errorf("the snapshot changed: free %v, was %v", s.free, before)
			}
		})
	}
}

// A holder's reservation (pods not bound yet) counts as room it holds, and is reserved again after.
func TestWouldFitWithoutCountsReservations(t *testing.T) {
	s := NewSnapshot([]Node{gpuNode("n1", 8, "")})
	s.Reserve("ns/reserved", Placement{{PodSet: "main", Node: "n1", Count: 1, Requests: rl("nvidia.com/gpu", "8")}})
	g := gang("ns/waiting", PodSet{Name: "main", Count: 1, Requests: rl("nvidia.com/gpu", "8")})
	g.Priority = 1
	if got := s.WouldFitWithout(g, []Holder{{Key: "ns/reserved"}}); !cmp.Equal(got, []string{"ns/reserved"}) {
		t.Errorf("WouldFitWithout = %v", got)
	}
	if _, ok := s.Reservation("ns/reserved"); !ok || freeOf(t, s, "n1", gpu) != 0 {
		t.Errorf("reservation not given back: free %d", freeOf(t, s, "n1", gpu))
	}
}

// A gang being preempted for holds the nodes it could use from smaller gangs after it, at once and with
// starvation protection off; one that is not does not.
func TestAGangBeingPreemptedForHoldsItsNodes(t *testing.T) {
	for _, preempting := range []bool{false, true} {
		s := NewSnapshot([]Node{gpuNode("n1", 8, ""), gpuNode("n2", 8, "")})
		s.AddUsage("n1", rl("nvidia.com/gpu", "8")) // a victim still leaving
		big := gang("ns/big", PodSet{Name: "main", Count: 2, Requests: rl("nvidia.com/gpu", "8")})
		big.Priority, big.Preempting = 10, preempting
		small := gang("ns/small", PodSet{Name: "main", Count: 1, Requests: rl("nvidia.com/gpu", "8")})
		d := s.Admit([]Gang{big, small})
		if d[0].Admitted || d[1].Admitted == preempting {
			t.Errorf("preempting %v: big admitted %v, small admitted %v", preempting, d[0].Admitted, d[1].Admitted)
		}
		if preempting && (d[1].Unfit == nil || d[1].Unfit.Reason != HeldForStarvingGang || !strings.Contains(d[1].Unfit.Message, "being preempted")) {
			t.Errorf("small: %+v", d[1].Unfit)
		}
	}
}

package admission

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
)

func TestAdmitStarvation(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	const timeout = 10 * time.Minute
	g := func(key string, prio int32, age time.Duration, sets ...PodSet) Gang {
		return Gang{Key: key, Priority: prio, CreationTime: now.Add(-age), PodSets: sets}
	}
	h100s := func(name string, count int32, gpus int) PodSet { return preferring(gpuPods(name, count, gpus), h100) }
	a100s := func(name string, count int32, gpus int) PodSet { return preferring(gpuPods(name, count, gpus), a100) }
	cpuPods := func(name string, count int32) PodSet {
		return PodSet{Name: name, Count: count, Requests: rl("cpu", "4", "memory", "8Gi")}
	}
	cpuNode := readyNode("cpu1", rl("cpu", "16", "memory", "64Gi", "pods", "110"))
	tainted := gpuNode("t1", 8, h100)
	tainted.Taints = []corev1.Taint{{Key: "dedicated", Value: "team-a", Effect: corev1.TaintEffectNoSchedule}}
	tolerating := func(ps PodSet) PodSet {
		ps.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		return ps
	}
	// The usual cluster: h1 with 4 GPUs taken, h2 free, a1 free, and a CPU-only node.
	nodes := []Node{gpuNode("h1", 8, h100), gpuNode("h2", 8, h100), gpuNode("a1", 8, a100), cpuNode}
	half := func(names ...string) map[string][]corev1.ResourceList {
		u := map[string][]corev1.ResourceList{}
		for _, n := range names {
			u[n] = []corev1.ResourceList{rl("cpu", "4", "memory", "32Gi", "nvidia.com/gpu", "4")}
		}
		return u
	}
	admitted := func(key string, p ...Assignment) Decision {
		return Decision{Key: key, Admitted: true, Placement: p}
	}
	// unfit leaves the message, pod set and resource unchecked.
	unfit := func(key string, reason UnfitReason) Decision {
		return Decision{Key: key, Unfit: &Unfit{Reason: reason}}
	}
	held := func(key, podSet, message string) Decision {
		return Decision{Key: key, Unfit: &Unfit{Reason: HeldForStarvingGang, PodSet: podSet, Message: message}}
	}
	behind := func(key string, waited time.Duration) string {
		return fmt.Sprintf("waiting behind %q, which has waited %s for nodes this gang could use (starvation protection after 10m0s)", key, waited)
	}
	// The big gang: two whole H100 nodes, which it does not get while h1 is half used.
	big := func(age time.Duration) Gang { return g("ns/big", 0, age, h100s("w", 2, 8)) }

	cases := []struct {
		name     string
		nodes    []Node
		usage    map[string][]corev1.ResourceList
		reserved map[string]Placement
		opts     *AdmitOptions // nil: Now now, StarvationTimeout timeout
		gangs    []Gang
		want     []Decision
	}{{
		name:  "younger than the timeout, the big gang is passed by a small one on its nodes",
		nodes: nodes, usage: half("h1"),
		gangs: []Gang{big(9 * time.Minute), g("ns/small", 0, time.Minute, h100s("w", 1, 4))},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			admitted("ns/small", onProduct("w", "h1", 1, h100)),
		},
	}, {
		name:  "older than the timeout, a small gang that needs its nodes waits",
		nodes: nodes, usage: half("h1"),
		gangs: []Gang{big(12 * time.Minute), g("ns/small", 0, time.Minute, h100s("w", 1, 4))},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			held("ns/small", "w", behind("ns/big", 12*time.Minute)),
		},
	}, {
		name:  "having waited exactly the timeout is enough",
		nodes: nodes, usage: half("h1"),
		gangs: []Gang{big(timeout), g("ns/small", 0, time.Minute, h100s("w", 1, 4))},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			held("ns/small", "w", behind("ns/big", timeout)),
		},
	}, {
		name:  "older than the timeout, gangs on nodes it cannot use are still admitted",
		nodes: nodes, usage: half("h1"),
		gangs: []Gang{
			big(12 * time.Minute),
			// Best fit would put it on h1 (4 free), which is held: it goes to a1 instead.
			g("ns/any-gpu", 0, 3*time.Minute, gpuPods("w", 1, 4)),
			g("ns/cpu", 0, 2*time.Minute, cpuPods("w", 2)),
			g("ns/a100", 0, time.Minute, a100s("w", 1, 4)),
		},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			admitted("ns/any-gpu", at("w", "a1", 1)),
			admitted("ns/cpu", at("w", "cpu1", 2)),
			admitted("ns/a100", onProduct("w", "a1", 1, a100)),
		},
	}, {
		name:  "nodes too small for any of its pods are not held: CPU jobs backfill CPU nodes",
		nodes: nodes, usage: half("h1"),
		gangs: []Gang{
			// Any product: three whole GPU nodes, of which h2 and a1 are free.
			g("ns/big", 0, time.Hour, gpuPods("w", 3, 8)),
			g("ns/cpu", 0, 2*time.Minute, cpuPods("w", 2)),
			g("ns/a100", 0, time.Minute, a100s("w", 1, 4)),
		},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			admitted("ns/cpu", at("w", "cpu1", 2)),
			held("ns/a100", "w", behind("ns/big", time.Hour)),
		},
	}, {
		name:  "nodes with a taint it does not tolerate are not held",
		nodes: append([]Node{tainted}, nodes...), usage: half("h1"),
		gangs: []Gang{
			big(12 * time.Minute),
			// Best fit would put it on h1; t1 is free to it.
			g("ns/team-a", 0, time.Minute, tolerating(h100s("w", 1, 4))),
		},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			admitted("ns/team-a", onProduct("w", "t1", 1, h100)),
		},
	}, {
		name: "with a topology key, nodes without the label are not held",
		nodes: []Node{zoned("h1", "z1", h100), zoned("h2", "z1", h100), zoned("h3", "", h100),
			zoned("h4", "z2", h100), zoned("h5", "z2", h100)},
		usage: half("h1", "h4"),
		gangs: []Gang{
			inZone(big(12 * time.Minute)),
			g("ns/small", 0, 2*time.Minute, h100s("w", 1, 8)),
			inZone(g("ns/zoned", 0, time.Minute, h100s("w", 1, 4))),
		},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			admitted("ns/small", onProduct("w", "h3", 1, h100)),
			held("ns/zoned", "w", behind("ns/big", 12*time.Minute)),
		},
	}, {
		name:  "a starving gang that fits now is admitted, and its nodes are then used as usual",
		nodes: append([]Node{gpuNode("h3", 8, h100)}, nodes...), usage: half("h1"),
		gangs: []Gang{big(time.Hour), g("ns/small", 0, time.Minute, h100s("w", 1, 4))},
		want: []Decision{
			admitted("ns/big", onProduct("w", "h2", 1, h100), onProduct("w", "h3", 1, h100)),
			admitted("ns/small", onProduct("w", "h1", 1, h100)),
		},
	}, {
		name:  "a higher-priority gang comes first and is never held behind a lower-priority starving one",
		nodes: nodes, usage: half("h1"),
		gangs: []Gang{
			big(time.Hour),
			g("ns/low", -1, 2*time.Hour, h100s("w", 1, 4)),
			g("ns/urgent", 5, time.Minute, h100s("w", 1, 4)),
		},
		want: []Decision{
			admitted("ns/urgent", onProduct("w", "h1", 1, h100)),
			unfit("ns/big", InsufficientResources),
			held("ns/low", "w", behind("ns/big", time.Hour)),
		},
	}, {
		name:  "an older gang of the same priority comes first and is never held",
		nodes: nodes, usage: half("h1"),
		gangs: []Gang{big(time.Hour), g("ns/older", 0, 2*time.Hour, h100s("w", 1, 4))},
		want: []Decision{
			admitted("ns/older", onProduct("w", "h1", 1, h100)),
			unfit("ns/big", InsufficientResources),
		},
	}, {
		name:  "gangs that can never fit never hold anyone",
		nodes: nodes, usage: half("h1"),
		gangs: []Gang{
			g("ns/never", 0, 5*time.Hour, h100s("w", 1, 16)),
			// Its nodes could each take one of its pods, but there are too few.
			g("ns/never-enough", 0, 5*time.Hour-time.Minute, h100s("w", 3, 8)),
			g("ns/no-node", 0, 4*time.Hour, preferring(gpuPods("w", 1, 8), "NVIDIA-B200")),
			g("ns/invalid", 0, 3*time.Hour, h100s("w", -1, 8)),
			g("ns/unknown-resource", 0, 2*time.Hour, PodSet{Name: "w", Count: 1, Requests: rl("example.com/fpga", "1")}),
			// Each pod set fits the three GPU nodes alone, never both.
			g("ns/too-big", 0, 90*time.Minute, gpuPods("x", 2, 8), gpuPods("y", 2, 8)),
			// Only product combinations past MaxGPUProductCombinations could fit it: it is never tried.
			g("ns/past-cap", 0, time.Hour, absentThen("p0", 4, h100), absentThen("p1", 4, h100), absentThen("p2", 4, a100)),
			g("ns/past-cap-alone", 0, 59*time.Minute, absentThen("w", MaxGPUProductCombinations, h100)),
			g("ns/small", 0, time.Minute, h100s("w", 1, 4)),
		},
		want: []Decision{
			unfit("ns/never", NeverFits),
			unfit("ns/never-enough", NeverFits),
			unfit("ns/no-node", NoEligibleNode),
			unfit("ns/invalid", InvalidGang),
			unfit("ns/unknown-resource", NeverFits),
			unfit("ns/too-big", InsufficientResources),
			unfit("ns/past-cap", InsufficientResources),
			unfit("ns/past-cap-alone", InsufficientResources),
			admitted("ns/small", onProduct("w", "h1", 1, h100)),
		},
	}, {
		name:     "a gang with a reservation keeps it on held nodes",
		nodes:    nodes,
		usage:    half("h1"),
		reserved: map[string]Placement{"ns/running": {{PodSet: "w", Node: "h2", Count: 1, Requests: rl("nvidia.com/gpu", "8"), GPUProduct: h100}}},
		gangs:    []Gang{big(time.Hour), g("ns/running", 0, time.Minute, h100s("w", 1, 8))},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			admitted("ns/running", onProduct("w", "h2", 1, h100)),
		},
	}, {
		name:  "several starving gangs each hold their own nodes",
		nodes: append([]Node{gpuNode("a2", 8, a100)}, nodes...), usage: half("h1", "a1"),
		gangs: []Gang{
			g("ns/big-h100", 0, 12*time.Minute, h100s("w", 2, 8)),
			g("ns/big-a100", 0, 11*time.Minute, a100s("w", 2, 8)),
			g("ns/h100", 0, 4*time.Minute, h100s("w", 1, 4)),
			g("ns/a100", 0, 3*time.Minute, a100s("w", 1, 4)),
			g("ns/any", 0, 2*time.Minute, gpuPods("w", 2, 4)),
			g("ns/cpu", 0, time.Minute, cpuPods("w", 1)),
		},
		want: []Decision{
			unfit("ns/big-h100", InsufficientResources),
			unfit("ns/big-a100", InsufficientResources),
			held("ns/h100", "w", behind("ns/big-h100", 12*time.Minute)),
			held("ns/a100", "w", behind("ns/big-a100", 11*time.Minute)),
			held("ns/any", "w", `waiting behind "ns/big-h100" (and 1 more starving gang), which has waited 12m0s for nodes this gang could use (starvation protection after 10m0s)`),
			admitted("ns/cpu", at("w", "cpu1", 1)),
		},
	}, {
		name:  "a gang held past the timeout starves in turn",
		nodes: append([]Node{gpuNode("a2", 8, a100)}, nodes...),
		usage: map[string][]corev1.ResourceList{"h1": half("h1")["h1"], "a2": {rl("nvidia.com/gpu", "8")}},
		gangs: []Gang{
			big(20 * time.Minute),
			// It would fit h2 and a1, but h2 is held: it waits, and has waited long enough to hold a1.
			g("ns/mid", 0, 15*time.Minute, gpuPods("w", 2, 8)),
			g("ns/a100", 0, time.Minute, a100s("w", 1, 4)),
			// mid holds h1 too, but big held it first.
			g("ns/h100", 0, 30*time.Second, h100s("w", 1, 4)),
		},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			held("ns/mid", "w", behind("ns/big", 20*time.Minute)),
			held("ns/a100", "w", behind("ns/mid", 15*time.Minute)),
			held("ns/h100", "w", behind("ns/big", 20*time.Minute)),
		},
	}, {
		name:  "a gang held before the timeout holds nothing",
		nodes: append([]Node{gpuNode("a2", 8, a100)}, nodes...),
		usage: map[string][]corev1.ResourceList{"h1": half("h1")["h1"], "a2": {rl("nvidia.com/gpu", "8")}},
		gangs: []Gang{
			big(20 * time.Minute),
			g("ns/mid", 0, 5*time.Minute, gpuPods("w", 2, 8)),
			g("ns/a100", 0, time.Minute, a100s("w", 1, 4)),
		},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			held("ns/mid", "w", behind("ns/big", 20*time.Minute)),
			admitted("ns/a100", onProduct("w", "a1", 1, a100)),
		},
	}, {
		name:  "WaitingSince, when set, is the clock instead of CreationTime",
		nodes: nodes, usage: half("h1"),
		gangs: []Gang{
			func() Gang { b := big(time.Hour); b.WaitingSince = now.Add(-5 * time.Minute); return b }(),
			g("ns/small", 0, time.Minute, h100s("w", 1, 4)),
		},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			admitted("ns/small", onProduct("w", "h1", 1, h100)),
		},
	}, {
		name:  "WaitingSince can make a gang starve before the timeout since its creation",
		nodes: nodes, usage: half("h1"),
		gangs: []Gang{
			// Created 5 minutes ago, but waiting for 11 (e.g. requeued with its age kept).
			func() Gang { b := big(5 * time.Minute); b.WaitingSince = now.Add(-11 * time.Minute); return b }(),
			g("ns/small", 0, time.Minute, h100s("w", 1, 4)),
		},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			held("ns/small", "w", behind("ns/big", 11*time.Minute)),
		},
	}, {
		name:  "a gang with no time has not waited",
		nodes: nodes, usage: half("h1"),
		gangs: []Gang{{Key: "ns/big", PodSets: []PodSet{h100s("w", 2, 8)}}, g("ns/small", 0, time.Minute, h100s("w", 1, 4))},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			admitted("ns/small", onProduct("w", "h1", 1, h100)),
		},
	}, {
		name:  "a zero timeout turns protection off",
		nodes: nodes, usage: half("h1"),
		opts:  &AdmitOptions{Now: now},
		gangs: []Gang{big(time.Hour), g("ns/small", 0, time.Minute, h100s("w", 1, 4))},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			admitted("ns/small", onProduct("w", "h1", 1, h100)),
		},
	}, {
		name:  "a zero Now: nothing has waited",
		nodes: nodes, usage: half("h1"),
		opts:  &AdmitOptions{StarvationTimeout: timeout},
		gangs: []Gang{big(time.Hour), g("ns/small", 0, time.Minute, h100s("w", 1, 4))},
		want: []Decision{
			unfit("ns/big", InsufficientResources),
			admitted("ns/small", onProduct("w", "h1", 1, h100)),
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := snapshot(tc.nodes, tc.usage)
			for k, p := range tc.reserved {
				s.Reserve(k, p)
			}
			opts := AdmitOptions{Now: now, StarvationTimeout: timeout}
			if tc.opts != nil {
				opts = *tc.opts
			}
			got := s.AdmitWithOptions(tc.gangs, opts)
			// Check the message, pod set and resource of an unfit gang only where the case gives a message.
			want := make([]Decision, len(tc.want))
			copy(want, tc.want)
			for i := range want {
				if i < len(got) && want[i].Unfit != nil && want[i].Unfit.Message == "" && got[i].Unfit != nil {
					u := *got[i].Unfit
					u.Reason = want[i].Unfit.Reason
					want[i].Unfit = &u
				}
			}
			if d := cmp.Diff(want, got, ignoreRequests, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("decisions (-want +got):\n%s", d)
			}
			for _, d := range got {
				if _, ok := s.Reservation(d.Key); ok != d.Admitted {
					t.Errorf("gang %s: reserved %v, admitted %v", d.Key, ok, d.Admitted)
				}
				if u := d.Unfit; u != nil && (u.Message == "" || strings.ContainsAny(u.Message, "\n\r") || len(u.Message) > maxMessageLen) {
					t.Errorf("gang %s: message not one bounded line: %q", d.Key, u.Message)
				}
			}
		})
	}
}

// absentThen is a pod set of one 8-GPU pod listing n products no node has, then present.
func absentThen(name string, n int, present ...string) PodSet {
	var ps []string
	for i := range n {
		ps = append(ps, fmt.Sprintf("absent-%d", i))
	}
	return preferring(gpuPods(name, 1, 8), append(ps, present...)...)
}

// TestAdmitIsAdmitWithoutProtection checks that Admit, and AdmitWithOptions with protection off, still
// let a small gang pass a big one that has waited for hours.
func TestAdmitIsAdmitWithoutProtection(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	nodes := []Node{gpuNode("h1", 8, h100), gpuNode("h2", 8, h100)}
	usage := map[string][]corev1.ResourceList{"h1": {rl("nvidia.com/gpu", "4")}}
	gangs := []Gang{
		{Key: "ns/big", CreationTime: now.Add(-5 * time.Hour), PodSets: []PodSet{gpuPods("w", 2, 8)}},
		{Key: "ns/small", CreationTime: now.Add(-time.Minute), PodSets: []PodSet{gpuPods("w", 1, 4)}},
	}
	for name, admit := range map[string]func(s *Snapshot) []Decision{
		"Admit":        func(s *Snapshot) []Decision { return s.Admit(gangs) },
		"zero options": func(s *Snapshot) []Decision { return s.AdmitWithOptions(gangs, AdmitOptions{}) },
		"negative timeout": func(s *Snapshot) []Decision {
			return s.AdmitWithOptions(gangs, AdmitOptions{Now: now, StarvationTimeout: -time.Minute})
		},
		"timeout not reached yet": func(s *Snapshot) []Decision {
			return s.AdmitWithOptions(gangs, AdmitOptions{Now: now, StarvationTimeout: 6 * time.Hour})
		},
	} {
		got := admit(snapshot(nodes, usage))
		if len(got) != 2 || got[0].Admitted || got[0].Unfit.Reason != InsufficientResources || !got[1].Admitted {
			t.Errorf("%s: %+v, want ns/big InsufficientResources and ns/small admitted", name, got)
		}
	}
}

// FuzzAdmitStarvation runs a pass with starvation protection over the fuzzer's clusters (gangs created 0
// to 3 minutes before the pass, a timeout of 2 minutes) and holds it to the test's own reading of the
// rule: walking the decisions in order, a gang not admitted for lack of room that has waited the timeout
// holds its eligible nodes that could take one of its pods; no later gang is admitted onto a held node;
// a gang held back fits now but not on the nodes left; until the first gang starves, the pass decides as
// Admit does. Nothing is overcommitted, and every explanation still holds.
func FuzzAdmitStarvation(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("a cluster of GPU nodes and a few gangs asking for them"))
	// Found by the fuzzer against broken rules: a later gang on a held node; a gang held although it
	// fits the nodes not held; a NeverFits gang holding nodes; a gang whose pod sets never fit together
	// holding nodes.
	f.Add([]byte("200000000000111100101200000000100000001110000010002100111000000001"))
	f.Add([]byte("211010000100000000000001011010100120101011100110000001100111100020011110001000010"))
	f.Add([]byte("200000000000110101010000000000001000000100001110009100111000100001"))
	f.Add([]byte("211010100110010000001001010100110000001000000101100011100000011110010001000111111100011"))
	for i := range 16 {
		seed := make([]byte, 200)
		for j := range seed {
			seed[j] = byte((j*37 + i*89 + j*j*i) % 251)
		}
		f.Add(seed)
	}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	opts := AdmitOptions{Now: t0.Add(3 * time.Minute), StarvationTimeout: 2 * time.Minute}
	f.Fuzz(func(t *testing.T, in []byte) {
		nodes, usage, gangs := fuzzCluster(in)
		s := snapshot(nodes, usage)
		base := allFree(s)
		decisions := s.AdmitWithOptions(gangs, opts)
		plain := snapshot(nodes, usage).Admit(gangs)
		if len(decisions) != len(gangs) {
			t.Fatalf("%d decisions for %d gangs", len(decisions), len(gangs))
		}

		gangsByKey := map[string]Gang{}
		for _, g := range gangs {
			gangsByKey[g.Key] = g
		}
		used := map[string]map[corev1.ResourceName]int64{}
		for _, n := range nodes {
			used[n.Name] = map[corev1.ResourceName]int64{}
			for _, r := range usage[n.Name] {
				add(used[n.Name], r, 1)
			}
		}
		heldBy := map[string]string{} // node -> the first starving gang that holds it
		var starving []string
		for i, d := range decisions {
			g := gangsByKey[d.Key]
			if len(starving) == 0 {
				if diff := cmp.Diff(plain[i], d); diff != "" {
					t.Fatalf("gang %s decided unlike Admit before any gang starves (-Admit +with options):\n%s", g.Key, diff)
				}
			}
			if d.Admitted {
				for _, a := range d.Placement {
					ps := g.PodSets[slices.IndexFunc(g.PodSets, func(ps PodSet) bool { return ps.Name == a.PodSet })]
					n := nodes[slices.IndexFunc(nodes, func(n Node) bool { return n.Name == a.Node })]
					if k, ok := heldBy[n.Name]; ok {
						t.Fatalf("gang %s admitted onto %s, held for starving gang %s: %v", g.Key, n.Name, k, d.Placement)
					}
					if !(where{a.GPUProduct, g.TopologyKey, a.Domain}).in(n, ps) {
						t.Fatalf("gang %s pod set %s placed on ineligible node %s", g.Key, ps.Name, n.Name)
					}
					if !within(n, used[n.Name], ps.Requests, int64(a.Count)) {
						t.Fatalf("gang %s overcommits node %s", g.Key, n.Name)
					}
					add(used[n.Name], ps.Requests, int64(a.Count))
				}
				continue
			}
			u := d.Unfit
			if u != nil && u.Reason == HeldForStarvingGang {
				if len(starving) == 0 {
					t.Fatalf("gang %s held while no gang starves: %v", g.Key, u)
				}
				if !slices.ContainsFunc(starving, func(k string) bool { return strings.HasPrefix(u.Message, fmt.Sprintf("waiting behind %q", k)) }) {
					t.Fatalf("gang %s: %v does not name a starving gang of %q", g.Key, u, starving)
				}
				if strings.ContainsAny(u.Message, "\n\r") || !slices.ContainsFunc(g.PodSets, func(ps PodSet) bool { return ps.Name == u.PodSet }) {
					t.Fatalf("gang %s: bad explanation %+v", g.Key, u)
				}
				checkHeld(t, nodes, used, heldBy, g)
			} else {
				checkUnfit(t, nodes, used, g, u)
			}
			if u.Reason != InsufficientResources && u.Reason != HeldForStarvingGang || opts.Now.Sub(g.CreationTime) < opts.StarvationTimeout {
				continue
			}
			if _, u := NewSnapshot(nodes).Fit(g); u != nil {
				continue // its pod sets fit the empty nodes one by one, not together: it never fits
			}
			starving = append(starving, g.Key)
			for _, n := range nodes {
				if _, ok := heldBy[n.Name]; ok {
					continue
				}
				for _, ps := range g.PodSets {
					if ps.Count <= 0 || !within(n, nil, ps.Requests, 1) {
						continue
					}
					if slices.ContainsFunc(productsOf(ps), func(p string) bool {
						return (where{p, g.TopologyKey, n.Labels[g.TopologyKey]}).in(n, ps)
					}) {
						heldBy[n.Name] = g.Key
					}
				}
			}
		}
		for _, n := range nodes {
			free, _ := s.NodeFree(n.Name)
			for r, q := range free {
				if got, want := units(r, q), capacity(n, r)-used[n.Name][r]; got != want {
					t.Fatalf("node %s %s: snapshot free %d, replay %d", n.Name, r, got, want)
				}
			}
		}
		for _, d := range decisions {
			s.Release(d.Key)
		}
		diffFree(t, base, allFree(s))
	})
}

// checkHeld holds a gang held back for starving gangs to what that means: it is valid and could fit
// empty nodes; and, for a gang of one pod set (whose greedy fit is exact), it fits now under some product
// and domain, but under none on the nodes not held.
func checkHeld(t *testing.T, nodes []Node, used map[string]map[corev1.ResourceName]int64, heldBy map[string]string, g Gang) {
	t.Helper()
	if c := gangClass(nodes, g); c != fitsEmpty {
		t.Fatalf("gang %s held for a starving gang, but it could never fit (class %d)", g.Key, c)
	}
	var sets []PodSet
	for _, ps := range g.PodSets {
		if ps.Count > 0 {
			sets = append(sets, ps)
		}
	}
	if len(sets) != 1 {
		return
	}
	ps := sets[0]
	var free []Node
	for _, n := range nodes {
		if _, ok := heldBy[n.Name]; !ok {
			free = append(free, n)
		}
	}
	fitsNow := false
	for _, p := range productsOf(ps) {
		for _, d := range domains(nodes, g.TopologyKey) {
			w := where{p, g.TopologyKey, d}
			if room(nodes, used, ps, w) >= int64(ps.Count) {
				fitsNow = true
			}
			if r := room(free, used, ps, w); r >= int64(ps.Count) {
				t.Fatalf("gang %s held for a starving gang, but %d pods fit nodes not held on product %q in domain %q", g.Key, r, p, d)
			}
		}
	}
	if !fitsNow {
		t.Fatalf("gang %s held for a starving gang, but it does not fit now even on held nodes", g.Key)
	}
}

package admission

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// bytes hands out the fuzzer's input as small choices; past its end every choice is 0.
type bytes struct {
	b []byte
	i int
}

func (s *bytes) intn(n int) int {
	if s.i >= len(s.b) {
		return 0
	}
	v := s.b[s.i]
	s.i++
	return int(v) % n
}

func (s *bytes) pick(options ...string) string { return options[s.intn(len(options))] }

// fuzzResources are the resources the fuzzer plays with; a node declares each or not.
var fuzzResources = []corev1.ResourceName{"cpu", "memory", "pods", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "ephemeral-storage"}

func fuzzAmount(s *bytes, name corev1.ResourceName, forNode bool) string {
	switch name {
	case "cpu":
		if forNode {
			return fmt.Sprintf("%dm", s.intn(33)*500)
		}
		return fmt.Sprintf("%dm", s.intn(9)*250)
	case "memory", "ephemeral-storage":
		if forNode {
			return fmt.Sprintf("%dGi", s.intn(9)*8)
		}
		return fmt.Sprintf("%dGi", s.intn(5)*4)
	case "pods":
		return fmt.Sprint(s.intn(6))
	default:
		if forNode {
			return s.pick("0", "1", "2", "4", "7", "8")
		}
		return s.pick("0", "0", "1", "2", "4", "8")
	}
}

// fuzzCluster builds nodes, bound pods that fit them (node -> requests) and gangs from the input.
func fuzzCluster(in []byte) ([]Node, map[string][]corev1.ResourceList, []Gang) {
	s := &bytes{b: in}
	var nodes []Node
	for i := range s.intn(8) + 1 {
		n := Node{Name: fmt.Sprintf("n%d", i), Ready: s.intn(8) != 0, Unschedulable: s.intn(8) == 0,
			Labels: map[string]string{}, Allocatable: corev1.ResourceList{}}
		if p := s.pick("", "A", "B"); p != "" {
			n.Labels[GPUProductLabel] = p
		}
		if z := s.pick("", "z1", "z2"); z != "" {
			n.Labels["zone"] = z
		}
		switch s.intn(5) {
		case 1:
			n.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
		case 2:
			n.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}
		case 3:
			n.Taints = []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}
		}
		for _, r := range fuzzResources {
			if s.intn(4) != 0 {
				n.Allocatable[r] = mustQ(fuzzAmount(s, r, true))
			}
		}
		nodes = append(nodes, n)
	}
	usage := map[string][]corev1.ResourceList{}
	for _, n := range nodes {
		used := map[corev1.ResourceName]int64{}
		for range s.intn(4) {
			req := corev1.ResourceList{}
			for _, r := range fuzzResources[:5] {
				if r != "pods" && s.intn(2) == 0 {
					req[r] = mustQ(fuzzAmount(s, r, false))
				}
			}
			if within(n, used, req, 1) {
				add(used, req, 1)
				usage[n.Name] = append(usage[n.Name], req)
			}
		}
	}
	var gangs []Gang
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range s.intn(6) + 1 {
		g := Gang{Key: fmt.Sprintf("g%d", i), Priority: int32(s.intn(3)), CreationTime: t0.Add(time.Duration(s.intn(4)) * time.Minute)}
		for j := range s.intn(3) + 1 {
			ps := PodSet{Name: fmt.Sprintf("p%d", j), Count: int32(s.intn(6)), Requests: corev1.ResourceList{}}
			for _, r := range fuzzResources {
				if r != "pods" && s.intn(3) == 0 {
					ps.Requests[r] = mustQ(fuzzAmount(s, r, false))
				}
			}
			if p := s.pick("", "", "A", "B"); p != "" {
				ps.NodeSelector = map[string]string{GPUProductLabel: p}
			}
			switch s.intn(4) {
			case 1:
				ps.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
			case 2:
				ps.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			}
			if s.intn(4) == 0 {
				ps.RequiredAffinity = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}},
				}}}
			}
			g.PodSets = append(g.PodSets, ps)
		}
		gangs = append(gangs, g)
	}
	return nodes, usage, gangs
}

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }

// units converts like the snapshot does: cpu in millicores, the rest in plain units.
func units(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// capacity of node n in resource r: absent is 0, except pods, which is then unlimited.
func capacity(n Node, r corev1.ResourceName) int64 {
	q, ok := n.Allocatable[r]
	if !ok {
		if r == corev1.ResourcePods {
			return math.MaxInt64
		}
		return 0
	}
	return units(r, q)
}

// within tells whether count more pods of req fit node n on top of used.
func within(n Node, used map[corev1.ResourceName]int64, req corev1.ResourceList, count int64) bool {
	if used["pods"]+count > capacity(n, "pods") {
		return false
	}
	for r, q := range req {
		if r == "pods" {
			continue
		}
		if v := units(r, q); v > 0 && used[r]+v*count > capacity(n, r) {
			return false
		}
	}
	return true
}

func add(used map[corev1.ResourceName]int64, req corev1.ResourceList, count int64) {
	used["pods"] += count
	for r, q := range req {
		if r != "pods" {
			used[r] += units(r, q) * count
		}
	}
}

// eligible is the test's own reading of the placement rules, for the fuzzer's constraints.
func eligible(n Node, ps PodSet) bool {
	if !n.Ready || n.Unschedulable {
		return false
	}
	for k, v := range ps.NodeSelector {
		if lv, ok := n.Labels[k]; !ok || lv != v {
			return false
		}
	}
	if ps.RequiredAffinity != nil && n.Labels["zone"] != "z1" {
		return false
	}
	for _, t := range n.Taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for _, tol := range ps.Tolerations {
			if tol.Operator == corev1.TolerationOpExists && (tol.Key == "" || tol.Key == t.Key) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// room counts the pods of ps that fit the eligible nodes on top of used.
func room(nodes []Node, used map[string]map[corev1.ResourceName]int64, ps PodSet) int64 {
	total := int64(0)
	for _, n := range nodes {
		if !eligible(n, ps) {
			continue
		}
		lo, hi := int64(0), int64(ps.Count)
		for lo < hi { // largest k in [0, Count] that fits
			mid := (lo + hi + 1) / 2
			if within(n, used[n.Name], ps.Requests, mid) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		total += lo
	}
	return total
}

func FuzzFitNeverOvercommits(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("a cluster of GPU nodes and a few gangs asking for them"))
	f.Add([]byte{7, 1, 0, 1, 1, 0, 3, 8, 5, 5, 5, 5, 5, 1, 0, 2, 3, 5, 4, 0, 0, 0, 1, 2, 5, 5, 5, 5, 9, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4})
	for i := range 16 {
		seed := make([]byte, 200)
		for j := range seed {
			seed[j] = byte((j*31 + i*97 + j*j*i) % 251)
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		nodes, usage, gangs := fuzzCluster(in)
		byName := map[string]Node{}
		for _, n := range nodes {
			byName[n.Name] = n
		}
		s := snapshot(nodes, usage)
		base := allFree(s)
		decisions := s.Admit(gangs)

		gangsByKey := map[string]Gang{}
		for _, g := range gangs {
			gangsByKey[g.Key] = g
		}
		// used replays usage, then each admitted placement in decision order.
		used := map[string]map[corev1.ResourceName]int64{}
		for _, n := range nodes {
			used[n.Name] = map[corev1.ResourceName]int64{}
			for _, r := range usage[n.Name] {
				add(used[n.Name], r, 1)
			}
		}
		if len(decisions) != len(gangs) {
			t.Fatalf("%d decisions for %d gangs", len(decisions), len(gangs))
		}
		for _, d := range decisions {
			g := gangsByKey[d.Key]
			if !d.Admitted {
				checkUnfit(t, nodes, used, g, d.Unfit)
				continue
			}
			for _, ps := range g.PodSets {
				if got := d.Placement.Pods(ps.Name); got != ps.Count {
					t.Fatalf("gang %s pod set %s: %d pods placed, want %d: %v", g.Key, ps.Name, got, ps.Count, d.Placement)
				}
			}
			for _, a := range d.Placement {
				i := slices.IndexFunc(g.PodSets, func(ps PodSet) bool { return ps.Name == a.PodSet })
				if i < 0 || a.Count <= 0 {
					t.Fatalf("gang %s: bad assignment %+v", g.Key, a)
				}
				ps := g.PodSets[i]
				n, ok := byName[a.Node]
				if !ok || !eligible(n, ps) {
					t.Fatalf("gang %s pod set %s placed on ineligible node %s", g.Key, ps.Name, a.Node)
				}
				if d := cmp.Diff(ps.Requests, a.Requests); d != "" {
					t.Fatalf("gang %s pod set %s: assignment requests differ (-pod set +assignment):\n%s", g.Key, ps.Name, d)
				}
				if !within(n, used[n.Name], ps.Requests, int64(a.Count)) {
					t.Fatalf("gang %s overcommits node %s: %d x %v on top of %v, allocatable %v",
						g.Key, n.Name, a.Count, ps.Requests, used[n.Name], n.Allocatable)
				}
				add(used[n.Name], ps.Requests, int64(a.Count))
			}
		}
		// The snapshot's free capacity agrees with the replay.
		for _, n := range nodes {
			free, _ := s.NodeFree(n.Name)
			for r, q := range free {
				want := capacity(n, r) - used[n.Name][r]
				if got := units(r, q); got != want {
					t.Fatalf("node %s %s: snapshot free %d, replay %d", n.Name, r, got, want)
				}
			}
		}
		// Releasing every admitted gang gives back exactly the capacity.
		for _, d := range decisions {
			s.Release(d.Key)
		}
		diffFree(t, base, allFree(s))
	})
}

// checkUnfit holds the explanation of an unfit gang against the replayed capacity used when it was
// decided. For a gang of one pod set the greedy fit is exact, so its reason must be right.
func checkUnfit(t *testing.T, nodes []Node, used map[string]map[corev1.ResourceName]int64, g Gang, u *Unfit) {
	t.Helper()
	if u == nil || u.Message == "" {
		t.Fatalf("gang %s not admitted without explanation: %v", g.Key, u)
	}
	i := slices.IndexFunc(g.PodSets, func(ps PodSet) bool { return ps.Name == u.PodSet })
	if i < 0 {
		t.Fatalf("gang %s: unfit names pod set %q it does not have: %v", g.Key, u.PodSet, u)
	}
	ps := g.PodSets[i]
	empty := map[string]map[corev1.ResourceName]int64{}
	switch u.Reason {
	case NoEligibleNode:
		for _, n := range nodes {
			if eligible(n, ps) {
				t.Fatalf("gang %s: %v, but node %s is eligible", g.Key, u, n.Name)
			}
		}
	case NeverFits:
		if r := room(nodes, empty, ps); r >= int64(ps.Count) {
			t.Fatalf("gang %s: %v, but %d pods fit the empty eligible nodes", g.Key, u, r)
		}
	case InsufficientResources:
		if r := room(nodes, empty, ps); r < int64(ps.Count) {
			t.Fatalf("gang %s: %v, but only %d pods fit the empty eligible nodes", g.Key, u, r)
		}
		if slices.IndexFunc(g.PodSets, func(o PodSet) bool { return o.Count > 0 && o.Name != ps.Name }) < 0 {
			if r := room(nodes, used, ps); r >= int64(ps.Count) {
				t.Fatalf("gang %s: %v, but %d pods fit now", g.Key, u, r)
			}
		}
	default:
		t.Fatalf("gang %s: unexpected reason %v", g.Key, u)
	}
}

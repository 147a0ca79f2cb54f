package admission

import (
	"fmt"
	"math"
	"slices"
	"strings"
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
		// Kubernetes taints nodes that are not Ready or cordoned; the taints go when the node is back.
		if !n.Ready {
			n.Taints = append(n.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute})
		}
		if n.Unschedulable {
			n.Taints = append(n.Taints, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
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
			switch s.intn(5) {
			case 1:
				ps.GPUProducts = []string{"A"}
			case 2:
				ps.GPUProducts = []string{"A", "B"}
			case 3:
				ps.GPUProducts = []string{"B", "A"}
			}
			if len(nodes) > 0 && s.intn(5) == 0 {
				ps.NodeName = nodes[s.intn(len(nodes))].Name
			}
			if s.intn(4) == 0 {
				ps.MaxPerNode = int32(s.intn(3) + 1)
			}
			g.PodSets = append(g.PodSets, ps)
		}
		if s.intn(3) == 0 {
			g.TopologyKey = "zone"
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
	if !n.Ready || n.Unschedulable || ps.NodeName != "" && n.Name != ps.NodeName {
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

// where is a GPU product (or "" for any) and a domain of a topology key (or "" and "" for none).
type where struct{ product, key, domain string }

// in tells whether node n is eligible for ps under w.
func (w where) in(n Node, ps PodSet) bool {
	if !eligible(n, ps) {
		return false
	}
	if w.product != "" && n.Labels[GPUProductLabel] != w.product {
		return false
	}
	return w.key == "" || n.Labels[w.key] != "" && n.Labels[w.key] == w.domain
}

// domains lists the domains of a gang's topology key, one of "" without one.
func domains(nodes []Node, key string) []string {
	if key == "" {
		return []string{""}
	}
	var out []string
	for _, n := range nodes {
		if v := n.Labels[key]; v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// productsOf lists the products ps may use, one of "" for any.
func productsOf(ps PodSet) []string {
	if len(ps.GPUProducts) == 0 {
		return []string{""}
	}
	return ps.GPUProducts
}

// gangClass is the test's own reading of how close gang g comes to fitting the empty nodes: noNode if in
// every domain some pod set has no eligible node under any product, never if in every domain where all
// have some, one does not fit them empty alone, fitsEmpty otherwise.
func gangClass(nodes []Node, g Gang) fitClass {
	empty := map[string]map[corev1.ResourceName]int64{}
	best := noNode
	for _, d := range domains(nodes, g.TopologyKey) {
		worst := fitsEmpty
		for _, ps := range g.PodSets {
			if ps.Count == 0 {
				continue
			}
			c := noNode
			for _, p := range productsOf(ps) {
				w := where{p, g.TopologyKey, d}
				if !slices.ContainsFunc(nodes, func(n Node) bool { return w.in(n, ps) }) {
					continue
				}
				if room(nodes, empty, ps, w) >= int64(ps.Count) {
					c = fitsEmpty
				} else {
					c = max(c, never)
				}
			}
			worst = min(worst, c)
		}
		best = max(best, worst)
	}
	return best
}

// room counts the pods of ps that fit the nodes eligible under w on top of used.
func room(nodes []Node, used map[string]map[corev1.ResourceName]int64, ps PodSet, w where) int64 {
	total := int64(0)
	for _, n := range nodes {
		if !w.in(n, ps) {
			continue
		}
		lo, hi := int64(0), int64(ps.Count)
		if ps.MaxPerNode > 0 {
			hi = min(hi, int64(ps.MaxPerNode))
		}
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
			checkChoices(t, nodes, used, g, d.Placement)
			perNode := map[string]int32{}
			for _, a := range d.Placement {
				i := slices.IndexFunc(g.PodSets, func(ps PodSet) bool { return ps.Name == a.PodSet })
				if i < 0 || a.Count <= 0 {
					t.Fatalf("gang %s: bad assignment %+v", g.Key, a)
				}
				ps := g.PodSets[i]
				n, ok := byName[a.Node]
				if !ok || !(where{a.GPUProduct, g.TopologyKey, a.Domain}).in(n, ps) {
					t.Fatalf("gang %s pod set %s placed on ineligible node %s: %+v", g.Key, ps.Name, a.Node, a)
				}
				if d := cmp.Diff(ps.Requests, a.Requests); d != "" {
					t.Fatalf("gang %s pod set %s: assignment requests differ (-pod set +assignment):\n%s", g.Key, ps.Name, d)
				}
				if !within(n, used[n.Name], ps.Requests, int64(a.Count)) {
					t.Fatalf("gang %s overcommits node %s: %d x %v on top of %v, allocatable %v",
						g.Key, n.Name, a.Count, ps.Requests, used[n.Name], n.Allocatable)
				}
				add(used[n.Name], ps.Requests, int64(a.Count))
				if perNode[a.PodSet+"/"+a.Node] += a.Count; ps.MaxPerNode > 0 && perNode[a.PodSet+"/"+a.Node] > ps.MaxPerNode {
					t.Fatalf("gang %s pod set %s: %d pods on node %s, at most %d a node", g.Key, ps.Name, perNode[a.PodSet+"/"+a.Node], a.Node, ps.MaxPerNode)
				}
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

// checkChoices holds an admitted placement to the products and domain it records: one product per pod
// set, among those it lists; one domain for the gang, of its topology key. For a gang of one pod set it
// also checks the order of preference: no product preferred to the chosen one fit in any domain.
func checkChoices(t *testing.T, nodes []Node, used map[string]map[corev1.ResourceName]int64, g Gang, p Placement) {
	t.Helper()
	for _, a := range p {
		if a.Domain != p[0].Domain || (g.TopologyKey == "") != (a.Domain == "") {
			t.Fatalf("gang %s (topology key %q) placed over domains: %v", g.Key, g.TopologyKey, p)
		}
		ps := g.PodSets[slices.IndexFunc(g.PodSets, func(ps PodSet) bool { return ps.Name == a.PodSet })]
		if !slices.Contains(productsOf(ps), a.GPUProduct) {
			t.Fatalf("gang %s pod set %s: product %q not among %q", g.Key, ps.Name, a.GPUProduct, ps.GPUProducts)
		}
		for _, b := range p {
			if b.PodSet == a.PodSet && b.GPUProduct != a.GPUProduct {
				t.Fatalf("gang %s pod set %s on two products: %v", g.Key, ps.Name, p)
			}
		}
	}
	sets := podSetsWithPods(g)
	if len(sets) != 1 || len(p) == 0 {
		return
	}
	ps := sets[0]
	for _, pref := range productsOf(ps)[:slices.Index(productsOf(ps), p[0].GPUProduct)] {
		for _, d := range domains(nodes, g.TopologyKey) {
			if r := room(nodes, used, ps, where{pref, g.TopologyKey, d}); r >= int64(ps.Count) {
				t.Fatalf("gang %s placed on %s, but preferred %s fits domain %q: %v", g.Key, p[0].GPUProduct, pref, d, p)
			}
		}
	}
}

// checkUnfit holds the explanation of an unfit gang against the replayed capacity used when it was
// decided, and its reason against the test's own reading over every product and domain. For a gang of
// one pod set the greedy fit is exact, so it must not fit now under any product and domain.
func checkUnfit(t *testing.T, nodes []Node, used map[string]map[corev1.ResourceName]int64, g Gang, u *Unfit) {
	t.Helper()
	if u == nil || u.Message == "" {
		t.Fatalf("gang %s not admitted without explanation: %v", g.Key, u)
	}
	if strings.ContainsAny(u.Message, "\n\r") || len(u.Message) > maxMessageLen {
		t.Fatalf("gang %s: message not one bounded line: %q", g.Key, u.Message)
	}
	i := slices.IndexFunc(g.PodSets, func(ps PodSet) bool { return ps.Name == u.PodSet })
	if i < 0 {
		t.Fatalf("gang %s: unfit names pod set %q it does not have: %v", g.Key, u.PodSet, u)
	}
	want := map[fitClass]UnfitReason{noNode: NoEligibleNode, never: NeverFits, fitsEmpty: InsufficientResources}[gangClass(nodes, g)]
	if want != InsufficientResources {
		want = unlessNodesBack(t, nodes, g, u, want)
	}
	if u.Reason != want {
		t.Fatalf("gang %s: %v, want reason %s", g.Key, u, want)
	}
	if u.Reason != InsufficientResources {
		return
	}
	if ps := g.PodSets[i]; slices.IndexFunc(g.PodSets, func(o PodSet) bool { return o.Count > 0 && o.Name != ps.Name }) < 0 {
		for _, p := range productsOf(ps) {
			for _, d := range domains(nodes, g.TopologyKey) {
				if r := room(nodes, used, ps, where{p, g.TopologyKey, d}); r >= int64(ps.Count) {
					t.Fatalf("gang %s: %v, but %d pods fit now on product %q in domain %q", g.Key, u, r, p, d)
				}
			}
		}
	}
}

// nodesBack is the test's own reading of the cluster once every node is back: Ready, schedulable and
// without the taints Kubernetes lifts by itself.
func nodesBack(nodes []Node) []Node {
	out := make([]Node, len(nodes))
	for i, n := range nodes {
		n.Ready, n.Unschedulable = true, false
		n.Taints = slices.DeleteFunc(slices.Clone(n.Taints), func(t corev1.Taint) bool {
			return strings.HasPrefix(t.Key, "node.kubernetes.io/")
		})
		out[i] = n
	}
	return out
}

// unlessNodesBack is the reason of gang g, which the nodes as they are reject with reason want, given
// the nodes back: it waits if the whole gang fits them empty. For a gang of one pod set that is exact;
// for several, the test only knows that the gang does not fit if one pod set alone does not, so it
// accepts either answer otherwise, and holds a waiting one to the fit itself.
func unlessNodesBack(t *testing.T, nodes []Node, g Gang, u *Unfit, want UnfitReason) UnfitReason {
	t.Helper()
	back := nodesBack(nodes)
	switch {
	case gangClass(back, g) != fitsEmpty:
		return want
	case len(podSetsWithPods(g)) == 1:
		want = InsufficientResources
	case u.Reason == InsufficientResources:
		if _, bu := NewSnapshot(back).Fit(g); bu != nil {
			t.Fatalf("gang %s waits for nodes to come back (%v), but does not fit them: %v", g.Key, u, bu)
		}
		want = InsufficientResources
	}
	if want == InsufficientResources && u.Reason == want && !strings.HasPrefix(u.Message, "the gang would fit once these nodes are back: ") {
		t.Fatalf("gang %s waits for nodes to come back, but its message does not name them: %v", g.Key, u)
	}
	return want
}

func podSetsWithPods(g Gang) []PodSet {
	var sets []PodSet
	for _, ps := range g.PodSets {
		if ps.Count > 0 {
			sets = append(sets, ps)
		}
	}
	return sets
}

package admission

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxListed is how many items (GPU products, domains, pod sets) a message lists before it counts the
// rest; maxMessageLen bounds a whole message, in bytes.
const (
	maxListed     = 3
	maxMessageLen = 1024
)

// explain says why no combination of products fits in any domain (see Fit for the reasons).
func (sr *search) explain() *Unfit {
	nd := 1
	if sr.dom != nil {
		nd = len(sr.dom.values)
	}
	// best[d*P+i] is the best class of plan i in domain d over its products. A domain is as good as its
	// worst pod set, the gang as its best domain: choices are free per pod set, so this covers every
	// combination, those past the cap too.
	// room[d*P+i] is the most pods of plan i, up to its Count, that fit domain d empty under one product.
	P := len(sr.plans)
	best := make([]fitClass, nd*P)
	room := make([]int64, nd*P)
	for i := range sr.plans {
		pl := &sr.plans[i]
		for j := range pl.choices {
			c := &pl.choices[j]
			for g, id := range c.groups.ids {
				x := int(id)*P + i
				best[x] = max(best[x], sr.classOf(pl, c, g))
				room[x] = max(room[x], c.empty[g])
			}
		}
	}
	gang := noNode
	for d := range nd {
		gang = max(gang, slices.Min(best[d*P:(d+1)*P]))
	}
	switch gang {
	case fitsEmpty:
		return sr.explainShort()
	case never:
		return sr.explainNever(best, room)
	default:
		return sr.explainNoNode(best)
	}
}

// explainShort explains a gang that could fit empty nodes but does not fit now, where it came closest.
func (sr *search) explainShort() *Unfit {
	b := &sr.best
	if !b.set || b.class != fitsEmpty {
		// Every combination that could fit empty nodes lies past the cap.
		ps := sr.plans[sr.order[0]].ps
		return &Unfit{Reason: InsufficientResources, PodSet: ps.Name,
			Message: fmt.Sprintf("the gang could fit only with GPU product combinations past the first %d of %s, which are not tried",
				MaxGPUProductCombinations, sr.combosText())}
	}
	sr.use(b.cur, b.domain)
	var earlier []string
	for _, o := range sr.plans[:b.failed] {
		earlier = append(earlier, o.ps.Name)
	}
	pl := &sr.plans[b.failed]
	u := sr.s.diagnose(pl, b.placed, earlier)
	if sr.dom != nil {
		u.Message = fmt.Sprintf("no %s domain holds the whole gang now (%d tried); closest, %s: %s",
			display(sr.gang.TopologyKey), countTrue(sr.domainTried), display(sr.dom.values[b.domain]), u.Message)
	}
	u.Message += sr.otherProducts(pl, b.domain)
	if sr.tried == MaxGPUProductCombinations && sr.combos > MaxGPUProductCombinations {
		u.Message += fmt.Sprintf("; only the first %d of %s GPU product combinations were tried",
			MaxGPUProductCombinations, sr.combosText())
	}
	return u
}

// explainNever explains a gang that no domain could hold even with its nodes empty: in the domain that
// comes closest (the most pod sets that fit it, then the most pods, then the first by value), the first
// pod set that does not fit, under its product that holds the most pods.
func (sr *search) explainNever(best []fitClass, room []int64) *Unfit {
	P := len(sr.plans)
	domain, candidates := int32(-1), 0
	fitting, pods := -1, int64(-1)
	for d := 0; d*P < len(best); d++ {
		row := best[d*P : (d+1)*P]
		if slices.Min(row) == noNode {
			continue
		}
		candidates++
		n, m := count(row, fitsEmpty), int64(0)
		for _, r := range room[d*P : (d+1)*P] {
			m = satAdd(m, r)
		}
		if n > fitting || n == fitting && m > pods {
			domain, fitting, pods = int32(d), n, m
		}
	}
	i := slices.Index(best[int(domain)*P:(int(domain)+1)*P], never)
	pl := &sr.plans[i]
	cur, most := -1, int64(-1)
	for j := range pl.choices {
		c := &pl.choices[j]
		if g := c.groups.find(domain); g >= 0 && c.empty[g] > most {
			cur, most = j, c.empty[g]
		}
	}
	pl.cur = cur
	pl.eligible = pl.choices[cur].groups.nodes[pl.choices[cur].groups.find(domain)]
	u := sr.s.diagnose(pl, 0, nil)
	if sr.dom != nil {
		u.Message = fmt.Sprintf("no %s domain could hold the gang even with its nodes empty (%d with eligible nodes for every pod set); closest, %s: %s",
			display(sr.gang.TopologyKey), candidates, display(sr.dom.values[domain]), u.Message)
	}
	u.Message += sr.otherProducts(pl, domain)
	return u
}

// explainNoNode explains a gang with a pod set that has no eligible node under any of its products or,
// with a topology key, pod sets whose eligible nodes share no domain.
func (sr *search) explainNoNode(best []fitClass) *Unfit {
	for i := range sr.plans {
		pl := &sr.plans[i]
		if !slices.ContainsFunc(pl.choices, func(c choice) bool { return len(c.groups.ids) > 0 }) {
			return sr.s.noEligibleNode(pl.ps, sr.gang.TopologyKey)
		}
	}
	// Every pod set has eligible nodes, in domains that differ. Name the pod set with the fewest.
	P := len(sr.plans)
	var parts []string
	fewest, fewestDomains := 0, math.MaxInt
	for _, i := range sr.order {
		var domains []string
		for d := 0; d*P < len(best); d++ {
			if best[d*P+i] != noNode {
				domains = append(domains, sr.dom.values[d])
			}
		}
		if len(domains) < fewestDomains {
			fewest, fewestDomains = i, len(domains)
		}
		parts = append(parts, fmt.Sprintf("pod set %q in %s", sr.plans[i].ps.Name, listBounded(domains, maxListed, display)))
	}
	return &Unfit{Reason: NoEligibleNode, PodSet: sr.plans[fewest].ps.Name,
		Message: fmt.Sprintf("no %s domain has eligible nodes for every pod set: %s",
			display(sr.gang.TopologyKey), listBounded(parts, maxListed, nil))}
}

// otherProducts tells, for a pod set that lists several GPU products, how each product other than the
// current one fares alone in domain (id; 0 without a topology key).
func (sr *search) otherProducts(pl *plan, domain int32) string {
	if len(pl.choices) < 2 {
		return ""
	}
	var parts []string
	for j := range pl.choices {
		if j == pl.cur {
			continue
		}
		c := &pl.choices[j]
		g := c.groups.find(domain)
		var status string
		switch sr.classOf(pl, c, g) {
		case noNode:
			status = "no eligible node"
		case never:
			status = fmt.Sprintf("at most %d fit even if empty", c.empty[g])
		default:
			if now := sr.s.podsThatFit(pl, c.groups.nodes[g], sr.s.free); now < int64(pl.ps.Count) {
				status = fmt.Sprintf("%d fit now", now)
			} else {
				status = "fits alone, not beside the other pod sets"
			}
		}
		parts = append(parts, display(c.product)+": "+status)
	}
	where := ""
	if sr.dom != nil {
		where = " there"
	}
	return fmt.Sprintf("; other GPU products%s: %s", where, listBounded(parts, maxListed, nil))
}

// combosText renders the number of product combinations.
func (sr *search) combosText() string {
	if sr.combos >= unlimited {
		return "very many"
	}
	return strconv.FormatInt(sr.combos, 10)
}

func countTrue(b []bool) int { return count(b, true) }

func count[T comparable](s []T, v T) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// listBounded joins items with ", ", each through f if not nil, listing at most n and counting the rest.
func listBounded(items []string, n int, f func(string) string) string {
	var b strings.Builder
	for i, it := range items {
		if i == n {
			fmt.Fprintf(&b, " and %d more", len(items)-n)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		if f != nil {
			it = f(it)
		}
		b.WriteString(it)
	}
	return b.String()
}

// display renders a label key or value (a GPU product, a domain) for a message: as it is when it looks
// like one, quoted otherwise, so that a message stays on one line.
func display(v string) string {
	if v == "" {
		return `""`
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./", r)) {
			return strconv.Quote(v)
		}
	}
	return v
}

// clampMessage cuts a message longer than maxMessageLen, on a rune boundary.
func clampMessage(u *Unfit) *Unfit {
	if len(u.Message) <= maxMessageLen {
		return u
	}
	cut := maxMessageLen - len("...")
	for cut > 0 && !utf8.RuneStart(u.Message[cut]) {
		cut--
	}
	u.Message = u.Message[:cut] + "..."
	return u
}

// demandStats is what diagnose learns about one demand of a pod set over its eligible nodes.
type demandStats struct {
	tooSmall     int   // eligible nodes whose allocatable is below one pod's request
	largestAlloc int64 // the most allocatable on one eligible node, and which node
	largestNode  int32
	limitsEmpty  int   // feasible nodes on which this demand caps the pods that fit when empty
	limitsNow    int   // feasible nodes on which it caps the pods that fit now
	bestFree     int64 // the most free now on one feasible node (at least 0), and which node
	bestFreeNode int32
}

// diagnose explains why pod set pl could not be placed: only placed of its pods fit after the pod sets
// earlier were placed. The snapshot's free capacity is as before the fit.
//
// A node is feasible when it could hold one pod if it were empty. The reason is NeverFits when no
// eligible node is feasible or the feasible nodes, empty, cannot hold Count pods; else
// InsufficientResources. The resource to blame is the one that most often caps how many pods a node
// takes.
func (s *Snapshot) diagnose(pl *plan, placed int32, earlier []string) *Unfit {
	ps := pl.ps
	if len(pl.eligible) == 0 {
		return s.noEligibleNode(ps, "")
	}
	if pl.missing != "" {
		q := ps.Requests[pl.missing]
		return &Unfit{Reason: NeverFits, PodSet: ps.Name, Resource: pl.missing,
			Message: fmt.Sprintf("pod set %q needs %s %s per pod, but no node in the cluster offers %s",
				ps.Name, q.String(), pl.missing, pl.missing)}
	}
	var buf [8]demandStats
	st := buf[:0]
	if len(pl.demands) > len(buf) {
		st = make([]demandStats, 0, len(pl.demands))
	}
	for range pl.demands {
		st = append(st, demandStats{largestAlloc: -1, largestNode: -1, bestFree: -1, bestFreeNode: -1})
	}
	feasible, emptyRoom, roomNow := s.scanEligible(pl, st)
	if feasible == 0 {
		return s.neverFitsOnePod(pl, st)
	}
	count := int64(ps.Count)
	if emptyRoom < count {
		d := pl.demands[mostOften(pl, st, func(x *demandStats) int { return x.limitsEmpty })]
		limit := ""
		if ps.MaxPerNode > 0 {
			limit = fmt.Sprintf(" (at most %d a node, as its pod template states)", ps.MaxPerNode)
		}
		return &Unfit{Reason: NeverFits, PodSet: ps.Name, Resource: s.resNames[d.k],
			Message: fmt.Sprintf("pod set %q needs %s; even with all %d eligible nodes empty only %d fit%s",
				ps.Name, s.perPod(pl, d), len(pl.eligible), emptyRoom, limit)}
	}

	// It fits the empty nodes: name what is short now.
	return s.shortNow(pl, st, placed, earlier, roomNow >= count)
}

// shortNow explains a pod set that fits the empty eligible nodes but not the room left now: the demand
// that most often caps a node, and the most free of it on one node. alone says it would fit without the
// gang's earlier pod sets.
func (s *Snapshot) shortNow(pl *plan, st []demandStats, placed int32, earlier []string, alone bool) *Unfit {
	ps := pl.ps
	j := mostOften(pl, st, func(x *demandStats) int { return x.limitsNow })
	d := pl.demands[j]
	name := s.resNames[d.k]
	u := &Unfit{Reason: InsufficientResources, PodSet: ps.Name, Resource: name}
	var b strings.Builder
	fmt.Fprintf(&b, "pod set %q needs %s; %d fit now", ps.Name, s.perPod(pl, d), placed)
	if len(earlier) > 0 && alone {
		fmt.Fprintf(&b, " (it fits alone, but not beside pod set(s) %s of the same gang)", listBounded(quoteAll(earlier), maxListed, nil))
	}
	best, bestNode := st[j].bestFree, s.nodes[st[j].bestFreeNode].Name
	if d.k == podsIndex {
		fmt.Fprintf(&b, "; most free pod slots on one eligible node: %d (%s)", best, bestNode)
	} else {
		fmt.Fprintf(&b, "; largest free on one eligible node: %s (%s)", formatAmount(name, best), bestNode)
	}
	u.Message = b.String()
	return u
}

// scanEligible fills st, one entry per demand of pl, from the eligible nodes, and counts the feasible
// nodes (each could hold one pod when empty) and how many pods they hold when empty and now.
func (s *Snapshot) scanEligible(pl *plan, st []demandStats) (feasible int, emptyRoom, roomNow int64) {
	w := s.width
	for _, n := range pl.eligible {
		base := int(n) * w
		ok := true
		kEmpty, jEmpty := int64(math.MaxInt64), 0
		kNow, jNow := int64(math.MaxInt64), 0
		for j, d := range pl.demands {
			a, f := s.alloc[base+d.k], max(0, s.free[base+d.k])
			if a > st[j].largestAlloc {
				st[j].largestAlloc, st[j].largestNode = a, n
			}
			if a < d.r {
				st[j].tooSmall++
				ok = false
				continue
			}
			if q := a / d.r; q < kEmpty {
				kEmpty, jEmpty = q, j
			}
			if q := f / d.r; q < kNow {
				kNow, jNow = q, j
			}
		}
		if !ok {
			continue
		}
		if m := int64(pl.ps.MaxPerNode); m > 0 {
			kEmpty, kNow = min(kEmpty, m), min(kNow, m)
		}
		feasible++
		emptyRoom = satAdd(emptyRoom, kEmpty)
		roomNow = satAdd(roomNow, kNow)
		st[jEmpty].limitsEmpty++
		st[jNow].limitsNow++
		for j, d := range pl.demands {
			if f := max(0, s.free[base+d.k]); f > st[j].bestFree {
				st[j].bestFree, st[j].bestFreeNode = f, n
			}
		}
	}
	return feasible, emptyRoom, roomNow
}

// mostOften returns the index of the demand with the highest count, the scarcest on ties; pods only if
// no other resource counts as much, since pods are rarely the point.
func mostOften(pl *plan, st []demandStats, count func(*demandStats) int) int {
	j := -1
	for i := range st {
		if pl.demands[i].k == podsIndex {
			continue
		}
		if j < 0 || count(&st[i]) > count(&st[j]) {
			j = i
		}
	}
	for i := range st {
		if pl.demands[i].k == podsIndex && (j < 0 || count(&st[i]) > count(&st[j])) {
			j = i
		}
	}
	return j
}

// neverFitsOnePod explains that no eligible node, even empty, holds one pod of pl.
func (s *Snapshot) neverFitsOnePod(pl *plan, st []demandStats) *Unfit {
	ps := pl.ps
	j := mostOften(pl, st, func(x *demandStats) int { return x.tooSmall })
	d := pl.demands[j]
	name := s.resNames[d.k]
	u := &Unfit{Reason: NeverFits, PodSet: ps.Name, Resource: name}
	if st[j].tooSmall == len(pl.eligible) {
		if d.k == podsIndex {
			u.Message = fmt.Sprintf("pod set %q: no eligible node allows any pod (pods allocatable 0 on all %d)",
				ps.Name, len(pl.eligible))
			return u
		}
		u.Message = fmt.Sprintf("pod set %q needs %s; no eligible node has that much allocatable; largest on one eligible node: %s (%s)",
			ps.Name, s.perPod(pl, d), formatAmount(name, st[j].largestAlloc), s.nodes[st[j].largestNode].Name)
		return u
	}
	var parts, req []string
	for i, d := range pl.demands {
		if c := st[i].tooSmall; c > 0 {
			parts = append(parts, fmt.Sprintf("%s on %d", s.resNames[d.k], c))
		}
		if d.k != podsIndex {
			req = append(req, formatAmount(s.resNames[d.k], d.r)+" "+string(s.resNames[d.k]))
		}
	}
	u.Message = fmt.Sprintf("pod set %q: no eligible node could hold one pod (%s) even if empty; of %d eligible nodes too small: %s",
		ps.Name, strings.Join(req, ", "), len(pl.eligible), strings.Join(parts, ", "))
	return u
}

// perPod renders "3 pods x 8 nvidia.com/gpu on one node each" for demand d of pl, with the GPU product
// being tried if the pod set lists products: "3 pods x 8 nvidia.com/gpu (NVIDIA-H100-80GB-HBM3) on ...".
func (s *Snapshot) perPod(pl *plan, d demand) string {
	count := pl.ps.Count
	product := ""
	if p := pl.product(); p != "" {
		product = " (" + display(p) + ")"
	}
	pods := "pods"
	if count == 1 {
		pods = "pod"
	}
	if d.k == podsIndex {
		return fmt.Sprintf("%d %s%s", count, pods, product)
	}
	name := s.resNames[d.k]
	if count == 1 {
		return fmt.Sprintf("1 pod x %s %s%s on one node", formatAmount(name, d.r), name, product)
	}
	return fmt.Sprintf("%d %s x %s %s%s on one node each", count, pods, formatAmount(name, d.r), name, product)
}

func quoteAll(names []string) []string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return q
}

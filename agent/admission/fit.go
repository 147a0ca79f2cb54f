package admission

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// demand is one resource a pod requests: slot k of the resource vector, r per pod (r > 0).
type demand struct {
	k int
	r int64
}

// plan is a pod set being placed.
type plan struct {
	idx      int // in the gang
	ps       *PodSet
	demands  []demand // scarcest first; always holds pods
	share    float64  // largest per-pod request relative to the cluster's total of that resource
	missing  corev1.ResourceName
	choices  []choice // the GPU products it may use, most preferred first; one, of any product, if it lists none
	cur      int      // the choice being tried
	eligible []int32  // eligible nodes of the current choice in the domain being tried
}

// choice is one GPU product a pod set may use ("" for any), with its eligible nodes by domain.
type choice struct {
	product string
	groups  *domainGroups
	empty   []int64 // per group: pods that fit its nodes were they empty, up to Count; nil until a fit fails
}

// product is the GPU product being tried for the pod set, "" for any.
func (pl *plan) product() string { return pl.choices[pl.cur].product }

// candidate is an eligible node able to take k (>= 1) more pods of the pod set being placed.
type candidate struct {
	score int64 // free of the scarcest demanded resource after one more pod
	node  int32
	k     int32
}

// step is pods of one plan put on one node during a fit, to undo it.
type step struct {
	node  int32
	plan  int32
	count int32
}

// Fit tells whether gang g fits now: every pod of every pod set placed at once on eligible nodes, within
// their free capacity. It returns the placement, or why there is none. Fit changes nothing in the
// snapshot; Reserve the placement to hold it.
//
// Pod sets that list GPUProducts are tried with one product each, in order of preference: the
// combinations of the pod sets' products are tried in the gang's order of pod sets, the first pod set's
// product changing slowest, and the first combination under which the gang fits wins. At most
// MaxGPUProductCombinations combinations are tried.
//
// With a TopologyKey, each combination is tried domain by domain (a domain being the nodes that share one
// value of the label), tightest first: the domain with the least free of the gang's scarcest resource (on
// its nodes eligible for the pod set that needs most of it), so that the gang, once placed, leaves it the
// least free and keeps larger domains whole; ties go by domain value. The first domain that holds the
// whole gang wins. Assignments record the chosen products and domain.
//
// Within one combination and domain, pod sets are placed largest per-pod request first (relative to the
// cluster's totals), so that big pods are not starved by small ones. Each pod goes to the eligible node
// that it leaves with the least of the pod set's scarcest resource (then of the next scarcest, and so on;
// then the first node by name): best fit, which keeps large holes for large pods. The result is
// deterministic.
//
// When nothing fits, the reason is judged over every product and domain the gang allows, past the cap
// too: NoEligibleNode when no domain has eligible nodes for every pod set under some product, NeverFits
// when none could hold each pod set even with its nodes empty, else InsufficientResources, explained
// where the gang came closest (most pods placed). A NoEligibleNode or NeverFits is then kept only if
// the whole gang would not fit either with every node back (see the package doc); if it would, the
// reason is InsufficientResources, and the message names the nodes that are away.
func (s *Snapshot) Fit(g Gang) (Placement, *Unfit) {
	p, u, _ := s.fit(&g)
	return p, u
}

// fit is Fit. When g does not fit, waits tells whether it could fit once enough capacity is freed: its
// reason is InsufficientResources and a product combination that Fit tries would fit the empty nodes
// (not only combinations past MaxGPUProductCombinations, which Fit never tries).
func (s *Snapshot) fit(g *Gang) (p Placement, u *Unfit, waits bool) {
	plans, u := s.plans(g)
	if u != nil {
		return nil, u, false
	}
	if len(plans) == 0 {
		return nil, nil, false
	}
	sr := s.newSearch(g, plans)
	s.journal = s.journal[:0]
	defer s.undo(plans)
	if p := sr.run(); p != nil {
		return p, nil, false
	}
	u = clampMessage(sr.explain())
	waits = u.Reason == InsufficientResources && sr.best.set && sr.best.class == fitsEmpty
	if u.Reason == NeverFits || u.Reason == NoEligibleNode {
		// Not waits, even if it now waits for nodes to come back: holding the nodes that are here
		// cannot make it fit.
		u = s.unlessNodesBack(g, u)
	}
	return nil, u, waits
}

// fitAvoiding fits g like Fit, but leaves alone the nodes n with avoid[n] >= 0 (nil: none): they take
// none of its pods. It does not explain a failure.
func (s *Snapshot) fitAvoiding(g *Gang, avoid []int32) (Placement, bool) {
	plans, u := s.plans(g)
	if u != nil {
		return nil, false
	}
	if len(plans) == 0 {
		return nil, true
	}
	s.avoid = avoid
	defer func() { s.avoid = nil }()
	sr := s.newSearch(g, plans)
	s.journal = s.journal[:0]
	defer s.undo(plans)
	p := sr.run()
	return p, p != nil
}

// fitsEmpty tells whether Fit would place g were every node empty: nothing bound, nothing reserved. The
// snapshot is left as it was.
func (s *Snapshot) fitsEmpty(g *Gang) bool {
	free := s.free
	s.empty = append(s.empty[:0], s.alloc...)
	s.free = s.empty
	defer func() { s.free = free }()
	_, ok := s.fitAvoiding(g, nil)
	return ok
}

// plans validates g and prepares its pod sets, largest first. Pod sets of no pods are left out.
func (s *Snapshot) plans(g *Gang) ([]plan, *Unfit) {
	plans := make([]plan, 0, len(g.PodSets))
	nc := 0
	for i := range g.PodSets {
		nc += max(1, len(g.PodSets[i].GPUProducts))
	}
	choices := make([]choice, 0, nc) // one backing array for the choices of every plan
	for i := range g.PodSets {
		ps := &g.PodSets[i]
		for j := range i {
			if g.PodSets[j].Name == ps.Name {
				return nil, &Unfit{Reason: InvalidGang, PodSet: ps.Name,
					Message: fmt.Sprintf("gang %q has two pod sets named %q", g.Key, ps.Name)}
			}
		}
		if ps.Count < 0 {
			return nil, &Unfit{Reason: InvalidGang, PodSet: ps.Name,
				Message: fmt.Sprintf("pod set %q has a negative count %d", ps.Name, ps.Count)}
		}
		for j, p := range ps.GPUProducts {
			if p == "" {
				return nil, &Unfit{Reason: InvalidGang, PodSet: ps.Name,
					Message: fmt.Sprintf("pod set %q lists an empty GPU product", ps.Name)}
			}
			if slices.Contains(ps.GPUProducts[:j], p) {
				return nil, &Unfit{Reason: InvalidGang, PodSet: ps.Name,
					Message: fmt.Sprintf("pod set %q lists GPU product %s twice", ps.Name, display(p))}
			}
		}
		pl := plan{idx: i, ps: ps, demands: make([]demand, 1, len(ps.Requests)+1)}
		pl.demands[0] = demand{k: podsIndex, r: 1}
		for name, q := range ps.Requests {
			if name == corev1.ResourcePods {
				continue
			}
			v := amount(name, q)
			if v < 0 {
				return nil, &Unfit{Reason: InvalidGang, PodSet: ps.Name, Resource: name,
					Message: fmt.Sprintf("pod set %q requests a negative amount of %s: %s", ps.Name, name, q.String())}
			}
			if v == 0 {
				continue
			}
			k, ok := s.resIndex[name]
			if !ok {
				if pl.missing == "" || name < pl.missing {
					pl.missing = name
				}
				continue
			}
			pl.demands = append(pl.demands, demand{k: k, r: v})
		}
		if ps.Count == 0 {
			continue
		}
		slices.SortFunc(pl.demands, func(a, b demand) int {
			if c := cmp.Compare(s.share(b), s.share(a)); c != 0 {
				return c
			}
			return cmp.Compare(s.resNames[a.k], s.resNames[b.k])
		})
		pl.share = s.share(pl.demands[0])
		if pl.missing != "" {
			pl.share = math.Inf(1)
		}
		ck := constraintKey(ps)
		first := len(choices)
		if len(ps.GPUProducts) == 0 {
			choices = append(choices, choice{groups: s.groupsOf(ck, ps, "", g.TopologyKey)})
		}
		for _, p := range ps.GPUProducts {
			choices = append(choices, choice{product: p, groups: s.groupsOf(ck, ps, p, g.TopologyKey)})
		}
		pl.choices = choices[first:len(choices):len(choices)]
		plans = append(plans, pl)
	}
	slices.SortStableFunc(plans, func(a, b plan) int { return cmp.Compare(b.share, a.share) })
	return plans, nil
}

// share is how much of the cluster's total of a resource one pod takes.
func (s *Snapshot) share(d demand) float64 {
	t := s.totals[d.k]
	if t <= 0 {
		return math.Inf(1)
	}
	return float64(d.r) / float64(t)
}

// place puts as many pods of plans[pi] as it can, up to Count, on the free capacity, and journals them.
//
// Placing pods one by one on the best-fit node is the same as filling the best-fit node before moving
// to the next: a pod placed on the best node lowers that node's score and no other, so it stays the
// best while it has room. So one scan of the eligible nodes ranks them all.
func (s *Snapshot) place(plans []plan, pi int) int32 {
	pl := &plans[pi]
	w := s.width
	need := int64(pl.ps.Count)
	first := pl.demands[0]
	cands := s.cands[:0]
	var room int64
	for _, n := range pl.eligible {
		if s.avoid != nil && s.avoid[n] >= 0 {
			continue // held for a starving gang
		}
		base := int(n) * w
		k := perNode(pl.ps, need)
		for _, d := range pl.demands {
			f := s.free[base+d.k]
			if f < d.r {
				k = 0
				break
			}
			if q := f / d.r; q < k {
				k = q
			}
		}
		if k > 0 {
			cands = append(cands, candidate{score: s.free[base+first.k] - first.r, node: n, k: int32(k)})
			room += k
		}
	}
	s.cands = cands
	if room < need {
		return int32(room) // cannot fit; the caller undoes nothing of this pod set
	}
	rk := ranker{free: s.free, w: w, rest: pl.demands[1:]}
	if m := int(need); m < len(cands) {
		// At most need nodes take pods: keep the need best, then order them.
		cands = rk.best(cands, m)
	}
	slices.SortFunc(cands, rk.compare)
	placed := int64(0)
	for _, c := range cands {
		if placed == need {
			break
		}
		t := min(int64(c.k), need-placed)
		base := int(c.node) * w
		for _, d := range pl.demands {
			s.free[base+d.k] -= d.r * t
		}
		s.journal = append(s.journal, step{node: c.node, plan: int32(pi), count: int32(t)})
		placed += t
	}
	return int32(placed)
}

// perNode is the most of need pods of ps one node may take.
func perNode(ps *PodSet, need int64) int64 {
	if ps.MaxPerNode > 0 {
		return min(need, int64(ps.MaxPerNode))
	}
	return need
}

// ranker orders candidates: least left of the scarcest resource, then of the next ones, then by name.
type ranker struct {
	free []int64
	w    int
	rest []demand // the demands after the scarcest
}

func (r ranker) compare(a, b candidate) int {
	if a.score != b.score {
		return cmp.Compare(a.score, b.score)
	}
	ab, bb := int(a.node)*r.w, int(b.node)*r.w
	for _, d := range r.rest {
		if c := cmp.Compare(r.free[ab+d.k], r.free[bb+d.k]); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.node, b.node)
}

// best moves the m best candidates to the front of cands, in no order, and returns them: a heap of the
// m best so far, worst on top, which each better candidate replaces.
func (r ranker) best(cands []candidate, m int) []candidate {
	h := cands[:m]
	for i := m/2 - 1; i >= 0; i-- {
		r.down(h, i)
	}
	for _, c := range cands[m:] {
		if r.compare(c, h[0]) < 0 {
			h[0] = c
			r.down(h, 0)
		}
	}
	return h
}

// down restores the heap (worst on top) below i.
func (r ranker) down(h []candidate, i int) {
	for {
		worst, l := i, 2*i+1
		if l < len(h) && r.compare(h[l], h[worst]) > 0 {
			worst = l
		}
		if l+1 < len(h) && r.compare(h[l+1], h[worst]) > 0 {
			worst = l + 1
		}
		if worst == i {
			return
		}
		h[i], h[worst] = h[worst], h[i]
		i = worst
	}
}

// undo gives back everything the journal took.
func (s *Snapshot) undo(plans []plan) {
	w := s.width
	for _, st := range s.journal {
		base := int(st.node) * w
		for _, d := range plans[st.plan].demands {
			s.free[base+d.k] += d.r * int64(st.count)
		}
	}
	s.journal = s.journal[:0]
}

// placement turns the journal into a Placement in domain (the value of the topology label, or "").
func (s *Snapshot) placement(plans []plan, domain string) Placement {
	if len(s.journal) == 0 {
		return nil
	}
	p := make(Placement, 0, len(s.journal))
	requests := make(map[int32]corev1.ResourceList, len(plans))
	for _, st := range s.journal {
		pl := &plans[st.plan]
		req, ok := requests[st.plan]
		if !ok {
			req = pl.ps.Requests.DeepCopy()
			requests[st.plan] = req
		}
		p = append(p, Assignment{PodSet: pl.ps.Name, Node: s.nodes[st.node].Name, Count: st.count, Requests: req,
			GPUProduct: pl.product(), Domain: domain})
	}
	idx := make(map[string]int, len(plans))
	for _, pl := range plans {
		idx[pl.ps.Name] = pl.idx
	}
	slices.SortFunc(p, func(a, b Assignment) int {
		if c := cmp.Compare(idx[a.PodSet], idx[b.PodSet]); c != 0 {
			return c
		}
		return cmp.Compare(a.Node, b.Node)
	})
	return p
}

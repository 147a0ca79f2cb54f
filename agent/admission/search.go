package admission

import (
	"cmp"
	"slices"
)

// fitClass is how close one pod set, or a whole gang, comes to fitting under some products and domain,
// from worst to best.
type fitClass int8

const (
	noNode    fitClass = iota // a pod set has no eligible node
	never                     // a pod set does not fit even if its eligible nodes were empty
	fitsEmpty                 // each pod set alone fits the empty eligible nodes
)

// search tries the product combinations and domains of one gang in order, and remembers the attempt
// that came closest, to explain a failure.
type search struct {
	s     *Snapshot
	gang  *Gang
	plans []plan       // in placement order
	order []int        // indexes into plans, in the gang's order of pod sets: the odometer of combinations
	dom   *domainIndex // nil without a topology key
	// combos counts the product combinations (saturated at unlimited); tried those tried so far.
	combos int64
	tried  int
	// domainTried marks the domains in which a fit was attempted.
	domainTried []bool
	best        attempt
}

// attempt is a failed fit under one combination of products and one domain.
type attempt struct {
	set    bool
	class  fitClass
	pods   int64 // pods of the gang placed before it failed, those of the failing pod set included
	failed int   // index in plans of the pod set that could not be placed
	placed int32 // its pods that fit
	cur    []int // choice per plan
	domain int32 // domain id; 0 without a topology key
}

func (s *Snapshot) newSearch(g *Gang, plans []plan) search {
	sr := search{s: s, gang: g, plans: plans, combos: 1, order: make([]int, len(plans))}
	for i := range plans {
		sr.order[i] = i
		sr.combos = satMul(sr.combos, int64(len(plans[i].choices)))
	}
	slices.SortFunc(sr.order, func(a, b int) int { return cmp.Compare(plans[a].idx, plans[b].idx) })
	if g.TopologyKey != "" {
		sr.dom = s.domainsOf(g.TopologyKey)
		sr.domainTried = make([]bool, len(sr.dom.values))
	}
	return sr
}

// run tries the combinations in order of preference, up to the cap, and returns the first placement
// found, or nil.
func (sr *search) run() Placement {
	for sr.tried < MaxGPUProductCombinations {
		sr.tried++
		if p := sr.tryCombination(); p != nil {
			return p
		}
		if !sr.next() {
			break
		}
	}
	return nil
}

// next moves to the next combination, the last pod set of the gang changing fastest. It returns false
// after the last one.
func (sr *search) next() bool {
	for j := len(sr.order) - 1; j >= 0; j-- {
		pl := &sr.plans[sr.order[j]]
		if pl.cur++; pl.cur < len(pl.choices) {
			return true
		}
		pl.cur = 0
	}
	return false
}

// tryCombination fits the gang under the current choices, in every domain that has eligible nodes for
// every pod set, tightest first.
func (sr *search) tryCombination() Placement {
	for i := range sr.plans {
		if pl := &sr.plans[i]; len(pl.choices[pl.cur].groups.ids) == 0 {
			return nil // a pod set has no node of its product: nothing to try
		}
	}
	if sr.dom == nil {
		for i := range sr.plans {
			pl := &sr.plans[i]
			pl.eligible = pl.choices[pl.cur].groups.nodes[0]
		}
		return sr.attempt(0)
	}
	for _, c := range sr.domainCandidates() {
		for i := range sr.plans {
			pl := &sr.plans[i]
			pl.eligible = pl.choices[pl.cur].groups.nodes[sr.s.domPos[int(c.pos)+i]]
		}
		if p := sr.attempt(c.id); p != nil {
			return p
		}
	}
	return nil
}

// domainCandidate is a domain with eligible nodes for every pod set under the current choices.
type domainCandidate struct {
	id    int32
	score int64 // free of the gang's scarcest resource on the domain's nodes eligible for its pod set
	pos   int32 // offset in Snapshot.domPos of the domain's group position, one per plan
}

// domainCandidates returns the domains to try under the current choices, tightest first.
//
// The gang's scarcest resource is the first demand of the first plan (plans are sorted by their largest
// share). Every domain would lose the same amount of it to the gang, so the least free before placing is
// the least free after.
func (sr *search) domainCandidates() []domainCandidate {
	s := sr.s
	first := &sr.plans[0]
	g0 := first.choices[first.cur].groups
	k := first.demands[0].k
	cands, pos := s.domCands[:0], s.domPos[:0]
	for j0, id := range g0.ids {
		off := len(pos)
		pos = append(pos, int32(j0))
		for i := 1; i < len(sr.plans); i++ {
			pl := &sr.plans[i]
			j := pl.choices[pl.cur].groups.find(id)
			if j < 0 {
				break
			}
			pos = append(pos, int32(j))
		}
		if len(pos)-off < len(sr.plans) {
			pos = pos[:off]
			continue
		}
		score := int64(0)
		for _, n := range g0.nodes[j0] {
			if s.avoid == nil || s.avoid[n] < 0 {
				score = satAdd(score, max(0, s.free[int(n)*s.width+k]))
			}
		}
		cands = append(cands, domainCandidate{id: id, score: score, pos: int32(off)})
	}
	slices.SortFunc(cands, func(a, b domainCandidate) int {
		if c := cmp.Compare(a.score, b.score); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	s.domCands, s.domPos = cands, pos
	return cands
}

// attempt places the pod sets on their current eligible nodes. On success the journal holds the
// placement, which it returns; on failure it undoes what it placed and remembers the attempt.
func (sr *search) attempt(domain int32) Placement {
	s := sr.s
	value := ""
	if sr.dom != nil {
		sr.domainTried[domain] = true
		value = sr.dom.values[domain]
	}
	for pi := range sr.plans {
		pl := &sr.plans[pi]
		placed := int32(0)
		if pl.missing == "" {
			placed = s.place(sr.plans, pi)
		}
		if placed < pl.ps.Count {
			s.undo(sr.plans)
			sr.failed(domain, pi, placed)
			return nil
		}
	}
	return s.placement(sr.plans, value)
}

// failed remembers the failed attempt if it came closer than the best so far: a better class first
// (an attempt that could fit empty nodes says more than one that never could), then more pods placed,
// then the earlier attempt.
func (sr *search) failed(domain int32, pi int, placed int32) {
	pods := int64(placed)
	for _, o := range sr.plans[:pi] {
		pods += int64(o.ps.Count)
	}
	class := fitsEmpty
	for i := range sr.plans {
		pl := &sr.plans[i]
		c := &pl.choices[pl.cur]
		class = min(class, sr.classOf(pl, c, c.groups.find(domain)))
	}
	b := &sr.best
	if b.set && (class < b.class || class == b.class && pods <= b.pods) {
		return
	}
	b.set, b.class, b.pods, b.failed, b.placed, b.domain = true, class, pods, pi, placed, domain
	b.cur = b.cur[:0]
	for i := range sr.plans {
		b.cur = append(b.cur, sr.plans[i].cur)
	}
}

// classOf tells how close pod set pl comes to fitting group g (a position, -1 for none) of choice c.
func (sr *search) classOf(pl *plan, c *choice, g int) fitClass {
	if g < 0 {
		return noNode
	}
	if c.empty == nil {
		c.empty = make([]int64, len(c.groups.ids))
		for j, nodes := range c.groups.nodes {
			c.empty[j] = sr.s.podsThatFit(pl, nodes, sr.s.alloc)
		}
	}
	if pl.missing != "" || c.empty[g] < int64(pl.ps.Count) {
		return never
	}
	return fitsEmpty
}

// podsThatFit counts the pods of pl, up to its Count, that nodes hold alone on capacity vec: alloc for
// empty nodes, free for now. It ignores a missing resource.
func (s *Snapshot) podsThatFit(pl *plan, nodes []int32, vec []int64) int64 {
	need := int64(pl.ps.Count)
	total := int64(0)
	for _, n := range nodes {
		base := int(n) * s.width
		k := perNode(pl.ps, need)
		for _, d := range pl.demands {
			k = min(k, max(0, vec[base+d.k])/d.r)
		}
		if total += k; total >= need {
			return need
		}
	}
	return total
}

// use sets the plans to the choices and domain of attempt b, as far as they have nodes there.
func (sr *search) use(cur []int, domain int32) {
	for i := range sr.plans {
		pl := &sr.plans[i]
		pl.cur = cur[i]
		pl.eligible = nil
		g := pl.choices[pl.cur].groups
		if j := g.find(domain); j >= 0 {
			pl.eligible = g.nodes[j]
		}
	}
}

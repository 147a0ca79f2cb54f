package admission

import (
	"fmt"
	"slices"
	"time"
)

// holds are the nodes held for starving gangs during one pass of AdmitWithOptions. A nil *holds is
// starvation protection turned off: it holds nothing and no gang starves.
type holds struct {
	now     time.Time
	timeout time.Duration
	// by is, per node, the index in gangs of the first starving gang (in the order of the pass) that
	// holds it, or -1; nil until a gang starves.
	by    []int32
	gangs []starving
}

// starving is a gang that holds nodes.
type starving struct {
	key        string
	waited     time.Duration
	preempting bool
}

// any tells whether some gang starves, so that a fit must check what it takes.
func (h *holds) any() bool { return h != nil && len(h.gangs) > 0 }

// waited returns how long g has waited at h.now, from its WaitingSince or else its CreationTime, and
// whether that is long enough to starve. A gang with neither time has not waited. A gang being
// preempted for starves at once.
func (h *holds) waited(g *Gang) (time.Duration, bool) {
	since := g.WaitingSince
	if since.IsZero() {
		since = g.CreationTime
	}
	if since.IsZero() {
		return 0, g.Preempting
	}
	w := h.now.Sub(since)
	return w, g.Preempting || w >= h.timeout
}

// consider takes g, which is not admitted but might fit once capacity frees, as starving if it has
// waited long enough and would fit the empty nodes: it then holds, from the gangs after it, each node
// eligible for one of its pod sets under one of the pod set's GPU products (and carrying its topology
// label) on which one pod of that pod set fits when the node is empty. Nodes too small for any of its
// pods are of no use to it and stay free for others.
func (h *holds) consider(s *Snapshot, g *Gang) {
	if h == nil {
		return
	}
	waited, ok := h.waited(g)
	if !ok {
		return
	}
	plans, u := s.plans(g)
	if u != nil {
		return
	}
	// With one pod set, InsufficientResources already says that it fits the empty nodes of some product
	// and domain. Several pod sets may each fit the empty nodes alone but never together: such a gang
	// would hold its nodes for ever.
	if len(plans) > 1 && !s.fitsEmpty(g) {
		return
	}
	if h.by == nil {
		h.by = make([]int32, len(s.nodes))
		for i := range h.by {
			h.by[i] = -1
		}
	}
	id := int32(len(h.gangs))
	h.gangs = append(h.gangs, starving{key: g.Key, waited: waited, preempting: g.Preempting})
	w := s.width
	for i := range plans {
		pl := &plans[i]
		if pl.missing != "" {
			continue // no node offers one of its resources: it uses none (and the gang never fits)
		}
		for _, c := range pl.choices {
			for _, nodes := range c.groups.nodes {
			next:
				for _, n := range nodes {
					if h.by[n] >= 0 {
						continue
					}
					base := int(n) * w
					for _, d := range pl.demands {
						if s.alloc[base+d.k] < d.r {
							continue next
						}
					}
					h.by[n] = id
				}
			}
		}
	}
}

// blocking tells whether placement p uses nodes held for starving gangs: it returns the first of those
// gangs in the order of the pass (-1 if none), the first pod set of p on a held node, and how many
// starving gangs hold nodes of p (counting for each node only the first gang that holds it).
func (h *holds) blocking(s *Snapshot, p Placement) (first int32, podSet string, holders int) {
	first = -1
	var ids []int32
	for _, a := range p {
		n, ok := s.byName[a.Node]
		if !ok {
			continue
		}
		id := h.by[n]
		if id < 0 {
			continue
		}
		if first < 0 || id < first {
			if first < 0 {
				podSet = a.PodSet
			}
			first = id
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return first, podSet, len(ids)
}

// heldUnfit explains a gang that fits now only on nodes held for starving gangs, as blocking found them
// in its placement: first is the first of those gangs, podSet the gang's first pod set on a held node,
// holders how many starving gangs hold nodes of the placement.
func (h *holds) heldUnfit(first int32, podSet string, holders int) *Unfit {
	st := h.gangs[first]
	behind := fmt.Sprintf("%q", st.key)
	if holders > 1 {
		more := "gangs"
		if holders == 2 {
			more = "gang"
		}
		behind += fmt.Sprintf(" (and %d more starving %s)", holders-1, more)
	}
	msg := fmt.Sprintf("waiting behind %s, which has waited %s for nodes this gang could use (starvation protection after %s)",
		behind, st.waited.Round(time.Second), h.timeout)
	if st.preempting {
		msg = fmt.Sprintf("waiting behind %s, for which workloads on nodes this gang could use are being preempted", behind)
	}
	return clampMessage(&Unfit{Reason: HeldForStarvingGang, PodSet: podSet, Message: msg})
}

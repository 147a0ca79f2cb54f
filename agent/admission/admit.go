package admission

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// AdmitOptions are the options of an admission pass (AdmitWithOptions). The zero value is Admit's: best
// effort, no starvation protection.
type AdmitOptions struct {
	// Now is the time of the pass, against which a gang's wait is measured (see Gang.WaitingSince). The
	// package reads no clock: the caller passes it, so that a pass is a pure function of its inputs.
	// With a zero Now, no gang has waited.
	Now time.Time
	// StarvationTimeout, when positive, turns starvation protection on: a gang that does not fit may be
	// passed by gangs after it in the order only until it has waited this long; from then on, while it
	// still does not fit, it is starving and holds its nodes (see AdmitWithOptions). Zero or negative
	// turns it off. For a strict order, where nothing ever passes a gang that does not fit, use a tiny
	// timeout such as time.Nanosecond.
	StarvationTimeout time.Duration
}

// Admit runs one admission pass over gangs without starvation protection: AdmitWithOptions with zero
// AdmitOptions. Admission is best effort: a smaller gang later in the order may be admitted while a
// larger one before it does not fit, however long that one has waited.
func (s *Snapshot) Admit(gangs []Gang) []Decision {
	return s.AdmitWithOptions(gangs, AdmitOptions{})
}

// AdmitWithOptions runs one admission pass over gangs: by priority (higher first), then creation time
// (older first), then key, each gang is fitted against what is free, and reserved if it fits. It returns
// one decision per gang in that order.
//
// A gang whose key already holds a reservation is admitted again with its reserved placement, without a
// new fit, whatever else happens in the pass.
//
// With opts.StarvationTimeout > 0, a gang that does not fit and has waited at least StarvationTimeout
// (opts.Now minus its WaitingSince, or its CreationTime if WaitingSince is zero; a gang with neither never
// starves) is starving: for the rest of the pass it holds every node that is eligible for one of its pod
// sets (as Fit judges eligibility: Ready and schedulable, nodeSelector, required affinity, taints, one of
// its GPU products, its topology label) and could hold at least one pod of that pod set if empty. A gang
// after it in the order is admitted only on nodes no starving gang holds: its placement is kept if it
// uses none, else it is fitted again on the nodes not held, and if it does not fit there it is not
// admitted, with reason HeldForStarvingGang naming the first starving gang whose nodes it would have
// used. Gangs earlier in the order, and so every gang of higher priority, are never held back. Only a
// gang that could fit once capacity frees starves: one with reason HeldForStarvingGang, or with reason
// InsufficientResources that Fit would place were every node empty (so not one whose pod sets fit the
// empty nodes only one by one, nor one that only GPU product combinations past
// MaxGPUProductCombinations could fit, nor one that waits for nodes that are away to come back). One
// with reason NoEligibleNode, NeverFits or InvalidGang never holds anything. A starving gang that fits
// is admitted like any other and holds nothing.
//
// So the nodes a starving gang needs drain as their pods finish, and nothing new takes them, until the
// gang fits; meanwhile smaller gangs still backfill nodes it cannot use.
func (s *Snapshot) AdmitWithOptions(gangs []Gang, opts AdmitOptions) []Decision {
	order := make([]int, len(gangs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ga, gb := &gangs[a], &gangs[b]
		if c := cmp.Compare(gb.Priority, ga.Priority); c != 0 {
			return c
		}
		if c := ga.CreationTime.Compare(gb.CreationTime); c != 0 {
			return c
		}
		return cmp.Compare(ga.Key, gb.Key)
	})
	var h *holds
	switch {
	case opts.StarvationTimeout > 0:
		h = &holds{now: opts.Now, timeout: opts.StarvationTimeout}
	case slices.ContainsFunc(gangs, func(g Gang) bool { return g.Preempting }):
		h = &holds{now: opts.Now, timeout: math.MaxInt64} // only gangs being preempted for hold nodes
	}
	out := make([]Decision, 0, len(gangs))
	for _, i := range order {
		g := &gangs[i]
		if r, ok := s.reservations[g.Key]; ok {
			out = append(out, Decision{Key: g.Key, Admitted: true, Placement: slices.Clone(r.placement)})
			continue
		}
		p, u, waits := s.fit(g)
		if u == nil && h.any() {
			if first, podSet, holders := h.blocking(s, p); first >= 0 {
				var ok bool
				if p, ok = s.fitAvoiding(g, h.by); !ok {
					u, waits = h.heldUnfit(first, podSet, holders), true
				}
			}
		}
		if u != nil {
			if waits {
				h.consider(s, g)
			}
			out = append(out, Decision{Key: g.Key, Unfit: u})
			continue
		}
		s.Reserve(g.Key, p)
		out = append(out, Decision{Key: g.Key, Admitted: true, Placement: p})
	}
	return out
}

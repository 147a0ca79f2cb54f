package admission

import (
	"cmp"
	"slices"
)

// Admit runs one admission pass over gangs: by priority (higher first), then creation time (older
// first), then key, each gang is fitted against what is free, and reserved if it fits. It returns one
// decision per gang in that order.
//
// A gang whose key already holds a reservation is admitted again with its reserved placement, without a
// new fit. Admission is best effort: a smaller gang later in the order may be admitted while a larger one
// before it does not fit.
func (s *Snapshot) Admit(gangs []Gang) []Decision {
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
	out := make([]Decision, 0, len(gangs))
	for _, i := range order {
		g := &gangs[i]
		if r, ok := s.reservations[g.Key]; ok {
			out = append(out, Decision{Key: g.Key, Admitted: true, Placement: slices.Clone(r.placement)})
			continue
		}
		p, u := s.Fit(*g)
		if u != nil {
			out = append(out, Decision{Key: g.Key, Unfit: u})
			continue
		}
		s.Reserve(g.Key, p)
		out = append(out, Decision{Key: g.Key, Admitted: true, Placement: p})
	}
	return out
}

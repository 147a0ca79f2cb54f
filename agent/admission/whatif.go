package admission

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Holder is an admitted gang that holds room on the cluster: its bound pods (counted with AddUsage) and
// what is reserved for the rest under its Key (Reserve).
type Holder struct {
	Key          string
	Priority     int32
	CreationTime time.Time
	Pods         []BoundPod
	// Leaving: it is going already (its pods are terminating): the what-if counts its room free and
	// never names it.
	Leaving bool
}

// BoundPod is a pod bound to a node, with what it requests.
type BoundPod struct {
	Node     string
	Requests corev1.ResourceList
}

// MaxHoldersTried bounds how many holders one what-if takes away before it gives up.
const MaxHoldersTried = 32

// WouldFitWithout answers a what-if for a gang that does not fit now: the fewest holders of a priority
// not above its own whose going would let it fit, counting what is leaving already as free, or nil
// when none would (or none need go). It takes holders away lowest
// priority first, newest first, until the gang fits, then puts back each it turns out not to need,
// latest taken first. The hub decides whether its rules let it preempt them. The snapshot is left as it
// was.
func (s *Snapshot) WouldFitWithout(g Gang, holders []Holder) []string {
	var cands, leaving []*Holder
	for i := range holders {
		switch h := &holders[i]; {
		case h.Leaving:
			leaving = append(leaving, h)
		case h.Priority <= g.Priority:
			cands = append(cands, h)
		}
	}
	left := make([]Placement, len(leaving))
	for i, h := range leaving {
		left[i] = s.takeAway(h)
	}
	defer func() {
		for i, h := range leaving {
			s.putBack(h, left[i])
		}
	}()
	if _, fits := s.fitAvoiding(&g, nil); fits {
		return nil // it fits once what is leaving has gone
	}
	slices.SortStableFunc(cands, func(a, b *Holder) int {
		if a.Priority != b.Priority {
			return cmp.Compare(a.Priority, b.Priority)
		}
		return cmp.Or(b.CreationTime.Compare(a.CreationTime), cmp.Compare(a.Key, b.Key))
	})
	cands = cands[:min(len(cands), MaxHoldersTried)]
	var gone []*Holder
	var back []Placement // the reservations of the holders in gone, to give back
	fits := false
	for _, h := range cands {
		back = append(back, s.takeAway(h))
		gone = append(gone, h)
		if _, fits = s.fitAvoiding(&g, nil); fits {
			break
		}
	}
	if fits {
		for i := len(gone) - 2; i >= 0; i-- {
			s.putBack(gone[i], back[i])
			if _, still := s.fitAvoiding(&g, nil); still {
				gone, back = slices.Delete(gone, i, i+1), slices.Delete(back, i, i+1)
			} else {
				s.takeAway(gone[i])
			}
		}
	}
	for i, h := range gone {
		s.putBack(h, back[i])
	}
	if !fits {
		return nil
	}
	keys := make([]string, len(gone))
	for i, h := range gone {
		keys[i] = h.Key
	}
	slices.Sort(keys)
	return keys
}

// takeAway frees what the holder's pods use and its reservation holds, and returns the reservation.
func (s *Snapshot) takeAway(h *Holder) Placement {
	for _, p := range h.Pods {
		s.addUsage(p.Node, p.Requests, -1)
	}
	r, _ := s.Reservation(h.Key)
	s.Release(h.Key)
	return r
}

// putBack undoes takeAway.
func (s *Snapshot) putBack(h *Holder, reserved Placement) {
	for _, p := range h.Pods {
		s.addUsage(p.Node, p.Requests, 1)
	}
	if reserved != nil {
		s.Reserve(h.Key, reserved)
	}
}

package admission

import (
	"fmt"
	"math"
	"strings"
)

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
		return s.noEligibleNode(ps)
	}
	if pl.missing != "" {
		q := ps.Requests[pl.missing]
		return &Unfit{Reason: NeverFits, PodSet: ps.Name, Resource: pl.missing,
			Message: fmt.Sprintf("pod set %q needs %s %s per pod, but no node in the cluster offers %s",
				ps.Name, q.String(), pl.missing, pl.missing)}
	}

	w := s.width
	var buf [8]demandStats
	st := buf[:0]
	if len(pl.demands) > len(buf) {
		st = make([]demandStats, 0, len(pl.demands))
	}
	for range pl.demands {
		st = append(st, demandStats{largestAlloc: -1, largestNode: -1, bestFree: -1, bestFreeNode: -1})
	}
	feasible := 0
	emptyRoom, roomNow := int64(0), int64(0)
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
	if feasible == 0 {
		return s.neverFitsOnePod(pl, st)
	}
	count := int64(ps.Count)
	if emptyRoom < count {
		d := pl.demands[mostOften(pl, st, func(x *demandStats) int { return x.limitsEmpty })]
		return &Unfit{Reason: NeverFits, PodSet: ps.Name, Resource: s.resNames[d.k],
			Message: fmt.Sprintf("pod set %q needs %s; even with all %d eligible nodes empty only %d fit",
				ps.Name, s.perPod(ps.Count, d), len(pl.eligible), emptyRoom)}
	}

	// It fits the empty nodes: name what is short now.
	j := mostOften(pl, st, func(x *demandStats) int { return x.limitsNow })
	d := pl.demands[j]
	name := s.resNames[d.k]
	u := &Unfit{Reason: InsufficientResources, PodSet: ps.Name, Resource: name}
	var b strings.Builder
	fmt.Fprintf(&b, "pod set %q needs %s; %d fit now", ps.Name, s.perPod(ps.Count, d), placed)
	if len(earlier) > 0 && roomNow >= count {
		fmt.Fprintf(&b, " (it fits alone, but not beside pod set(s) %s of the same gang)", quoteAll(earlier))
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
			ps.Name, s.perPod(ps.Count, d), formatAmount(name, st[j].largestAlloc), s.nodes[st[j].largestNode].Name)
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

// perPod renders "3 pods x 8 nvidia.com/gpu on one node each".
func (s *Snapshot) perPod(count int32, d demand) string {
	pods := "pods"
	if count == 1 {
		pods = "pod"
	}
	if d.k == podsIndex {
		return fmt.Sprintf("%d %s", count, pods)
	}
	name := s.resNames[d.k]
	if count == 1 {
		return fmt.Sprintf("1 pod x %s %s on one node", formatAmount(name, d.r), name)
	}
	return fmt.Sprintf("%d %s x %s %s on one node each", count, pods, formatAmount(name, d.r), name)
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

package queues

import (
	"maps"
	"slices"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// A queue that drains is walked every pass (a workload of it finished, so it is not quiet), and a deep
// one is mostly workloads that wait for quota and will again: a pass walks its first waiting ones and
// cuts the tail of those settled (dispatch.Cut). An entry is settled when the last pass that walked it
// found it waiting for quota as it shows, and decided nothing for it. Unchanged since (a change makes
// a new entry), and with the specs and clusters as they were (a change of those makes the pass walk
// and settle every workload anew; more quota for its queue alone does not: seenSpecs.changes), it
// would be told what it shows again if the quota left at its turn holds none of it; the pass checks
// that for the tail's least requests where the tail starts. A pass walks the first cutAfter settled
// entries of each queue it cuts, so that the quota a finished workload gives back goes to the waiting
// ones that take it without planning again; where that was too few, it plans again walking eight
// times as many, and the next pass starts from half of those.

// CutGrowth is how many times as many settled entries a pass walks when it plans again.
const CutGrowth = 8

// WalksBeforeCut is how many settled entries of the GlobalQueue the next pass walks before it cuts the
// rest, should it cut them.
func (m *Manager) WalksBeforeCut(queue string) int { return max(m.rest.walks[queue], m.rest.cutAfter) }

// tail is what a pass cuts of one GlobalQueue's settled entries.
type tail struct {
	walks, kept int // settled entries to walk, and walked
	cut         dispatch.Cut
	// shapes are the shapes of requests (the book's shared ones) already in cut.Least: a deep queue
	// has few, and each is folded in once.
	shapes []shapeID
}

// add cuts the entry, whose meta m is.
func (t *tail) add(m *parkingMeta, e *entry) {
	if t.cut.First == nil {
		t.cut.First, t.cut.Least = &e.w, maps.Clone(m.requests)
		t.remember(m.shape)
		return
	}
	if m.shape != 0 && slices.Contains(t.shapes, m.shape) {
		return
	}
	dispatch.LeastOf(t.cut.Least, m.requests)
	t.remember(m.shape)
}

func (t *tail) remember(s shapeID) {
	if s != 0 && len(t.shapes) < 8 {
		t.shapes = append(t.shapes, s)
	}
}

// cuttable says whether the Queue's entries may settle: its GlobalQueue can take a cut
// (dispatch.CanCut). tailOf is the tail this pass cuts of its GlobalQueue; nil when none.
func (b *snapshotBuilder) cuttable(q *queueRef) bool {
	b.lookUpTail(q)
	return q.cuttable
}

func (b *snapshotBuilder) tailOf(q *queueRef) *tail {
	b.lookUpTail(q)
	return q.tail
}

func (b *snapshotBuilder) lookUpTail(q *queueRef) {
	if q.cutBy == b.r {
		return
	}
	gq, problem := b.r.resolve(q)
	q.cutBy, q.tail = b.r, nil
	q.cuttable = problem == nil && dispatch.CanCut(b.out.snap, gq)
	if _, cuts := b.rest.cuts[gq]; cuts && q.cuttable {
		if b.cutting == nil {
			b.cutting = map[string]*tail{}
		}
		if b.cutting[gq] == nil {
			b.cutting[gq] = &tail{walks: b.rest.cuts[gq]}
		}
		q.tail = b.cutting[gq]
	}
}

// cuts says whether the pass cuts the parkable entry e, whose meta m is, and counts it in its tail if so.
func (b *snapshotBuilder) cuts(m *parkingMeta, e *entry) bool {
	if !m.settled {
		return false
	}
	t := b.tailOf(m.queue)
	switch {
	case t == nil:
		return false
	case t.kept < t.walks:
		t.kept++
		return false
	}
	t.add(m, e)
	return true
}

// markSettled marks the book's entry e, whose meta m is, settled if the pass decides nothing for it
// (rest.end unsettles those it decides for): it may wait, shows that it waits for quota, is not
// stopped (a pass tells a stopped one Stopped, whatever the quota) and its GlobalQueue can take a cut.
// Rejections that lapse since only give it more clusters to wait on.
func (b *snapshotBuilder) markSettled(e *entry, m *parkingMeta) {
	settled := m.parkable && !e.w.Stopped && e.w.PendingReason == gantry.ReasonWaitingForQuota && b.cuttable(m.queue)
	if e.settled != settled { // written only when it changes, as include does
		e.settled, m.settled = settled, settled
	}
}

// recordCuts hands the tails cut to the snapshot.
func (b *snapshotBuilder) recordCuts() {
	for gq, t := range b.cutting {
		if t.cut.First != nil {
			if b.out.snap.Cuts == nil {
				b.out.snap.Cuts = map[string]dispatch.Cut{}
			}
			b.out.snap.Cuts[gq] = t.cut
		}
	}
}

// markUnsettled marks the book's entry of the key as not settled: a pass decided for it.
func markUnsettled(b *book, key string) {
	e := b.entries[key]
	if e == nil || !e.settled {
		return
	}
	e.settled = false
	if !e.tallied && e.at < len(b.parking) && b.order[e.at] == e {
		b.parking[e.at].settled = false
	}
}

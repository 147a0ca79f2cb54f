package queues

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// book is the dispatcher's standing view of the hub's unfinished Workloads. The Workload informer's
// events tell it which ones changed; a pass then derives what the dispatcher knows of those alone, and
// finds the rest as the last pass left them: the waiting ones already in queue order, the admitted ones
// summed up in tallies. So a pass costs the changes since the last one plus one walk over the queue,
// whatever the depth of the queue or the number of Workloads that run or finished.
type book struct {
	mu      sync.Mutex
	changed map[string]*gantry.Workload // since the last pass, by key: nil when deleted or finished

	// Used by passes only, one at a time.
	entries map[string]*entry
	order   []*entry // CompareInQueue's order over the entries not tallied
	spare   []*entry // the order before the last merge, reused by the next
	// parking is, for each entry of the order at the same place, what a pass reads to park it, laid
	// out apart from the entries: a pass over quiet queues reads these in a row and goes to none of
	// their entries. spareParking is the one before the last merge.
	parking      []parkingMeta
	spareParking []parkingMeta
	tallies      *tallies
	uids         map[types.UID]struct{}
	shared       *shared
	// touched are the entries taken in since a pass last read them (takeChanges), left the GlobalQueues
	// of the entries they replaced or that left the book, as the last pass saw them; watched are the
	// waiting entries that keep their queue walked (nominated) or whose rejections lapse (see rest).
	touched []*entry
	left    []string
	watched map[*entry]struct{}
}

// entry is one Workload as the cache shows it (never modified) and what the dispatcher knows of it from
// the object alone, laid out for a pass that reads it without going to the object. A pass sets the
// rest of w (its queue, copies and lapsing rejections) in place.
type entry struct {
	wl    *gantry.Workload
	w     dispatch.Workload
	queue *queueRef // the Queue it names
	// recordedQueue is the GlobalQueue its status records its nomination under.
	recordedQueue string
	deleting      bool
	// timed: some of its rejections lapse with time, so a pass works them out again.
	timed bool
	// gone: it left the book, or a new entry took its place in another place of the order.
	gone bool
	// tallied: it is counted in the book's tallies, at talliedAt in their list, and not in the order.
	tallied   bool
	talliedAt int
	// at is its place in the order, while it is in it.
	at int
	// shape names its requests among the book's shared ones; 0 when they are its own.
	shape shapeID
	// settled: the last pass that walked it found it waiting for quota as it shows, and decided nothing
	// for it (see cut).
	settled bool
}

// parkingMeta is what a pass reads of an entry of the order to park it or cut it (see rest and cut).
type parkingMeta struct {
	queue    *queueRef
	requests dispatch.Resources
	shape    shapeID
	settled  bool
	parkable bool
}

func (e *entry) parkingMeta() parkingMeta {
	return parkingMeta{queue: e.queue, requests: e.w.Requests, shape: e.shape, settled: e.settled, parkable: e.parkable()}
}

func newBook() *book {
	return &book{changed: map[string]*gantry.Workload{}, entries: map[string]*entry{}, uids: map[types.UID]struct{}{},
		tallies: newTallies(), shared: &shared{shapes: &shapes{held: map[string]sharedShape{}}, words: words{}, queues: queueRefs{}}, watched: map[*entry]struct{}{}}
}

// note records the Workload as the cache shows it now; nil or finished: it is gone from the book.
func (b *book) note(key string, wl *gantry.Workload) {
	if wl != nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadFinished) {
		wl = nil
	}
	b.mu.Lock()
	b.changed[key] = wl
	b.mu.Unlock()
}

// replace makes the book hold exactly the given Workloads, for a dispatcher whose cache sends no events.
func (b *book) replace(workloads []*gantry.Workload) {
	seen := make(map[string]bool, len(workloads))
	for _, wl := range workloads {
		key := keyOf(wl)
		seen[key] = true
		if e := b.entries[key]; e == nil || e.wl.UID != wl.UID || e.wl.ResourceVersion != wl.ResourceVersion {
			b.note(key, wl)
		}
	}
	for key := range b.entries {
		if !seen[key] {
			b.note(key, nil)
		}
	}
}

// sync takes in the changes noted since the last pass.
func (b *book) sync() {
	b.mu.Lock()
	changed := b.changed
	b.changed = make(map[string]*gantry.Workload, len(changed))
	b.mu.Unlock()
	var added []*entry
	dropped := false
	for key, wl := range changed {
		old := b.entries[key]
		if old != nil && wl != nil && old.wl.UID == wl.UID && old.wl.ResourceVersion == wl.ResourceVersion {
			continue // a resync: nothing changed
		}
		var e *entry
		if wl != nil {
			e = newEntry(wl, b.shared)
		}
		ordered := old != nil && !old.tallied
		if old != nil {
			b.left = append(b.left, old.w.GlobalQueue)
			b.forget(old)
		}
		switch {
		case e == nil:
		case e.w.Talliable():
			b.tallies.add(e)
		case ordered && dispatch.CompareInQueue(&old.w, &e.w) == 0:
			at := old.at
			*old = *e // it keeps its place in the order
			e, old.at = old, at
			b.parking[at] = old.parkingMeta()
		default:
			added = append(added, e)
		}
		if ordered && e != old {
			old.gone, dropped = true, true
		}
		if e != nil {
			b.entries[key] = e
			b.uids[wl.UID] = struct{}{}
			b.touched = append(b.touched, e)
			if e.watched() {
				b.watched[e] = struct{}{}
			}
		}
	}
	if len(added) > 0 || dropped {
		b.merge(added)
	}
}

// forget takes the entry out of the book, but for its place in the order, which the caller settles.
func (b *book) forget(e *entry) {
	delete(b.entries, e.w.Key)
	delete(b.uids, e.wl.UID)
	delete(b.watched, e)
	b.shared.queues.release(e.queue)
	if e.tallied {
		b.tallies.remove(e)
	}
}

// merge lays the added entries into the order, sorted among themselves first, and leaves out the
// entries no longer in the book.
func (b *book) merge(added []*entry) {
	slices.SortFunc(added, func(x, y *entry) int { return dispatch.CompareInQueue(&x.w, &y.w) })
	out, meta := b.spare[:0], b.spareParking[:0]
	place := func(e *entry) {
		e.at = len(out)
		out, meta = append(out, e), append(meta, e.parkingMeta())
	}
	for _, e := range b.order {
		if e.gone {
			continue
		}
		for len(added) > 0 && dispatch.CompareInQueue(&added[0].w, &e.w) < 0 {
			place(added[0])
			added = added[1:]
		}
		place(e)
	}
	for _, e := range added {
		place(e)
	}
	clear(b.order) // so that the spares hold no entry gone
	clear(b.parking)
	b.order, b.spare = out, b.order[:0]
	b.parking, b.spareParking = meta, b.parking[:0]
}

// takeChanges hands over the entries taken in since it was last called, and the GlobalQueues of those
// they replaced or that left.
func (b *book) takeChanges() (touched []*entry, left []string) {
	touched, left = b.touched, b.left
	b.touched, b.left = nil, nil
	return touched, left
}

// parkable says whether a pass may leave the entry out when its queue is parked: it waits and holds
// no reservation.
func (e *entry) parkable() bool {
	return e.w.Phase == dispatch.Pending && len(e.w.Nominated) == 0 && !e.deleting && !e.tallied
}

// watched says whether a pass reads the entry's copies or lapsing rejections: it waits, nominated or
// with a rejection that lapses.
func (e *entry) watched() bool {
	return e.w.Phase == dispatch.Pending && !e.deleting && !e.tallied && (len(e.w.Nominated) > 0 || e.timed)
}

// hasUID says whether a Workload of that UID is in the book.
func (b *book) hasUID(uid types.UID) bool {
	_, ok := b.uids[uid]
	return ok
}

// newEntry derives what the dispatcher knows of a Workload apart from its queue and copies, sharing
// with other entries what sh holds (nil: nothing).
func newEntry(wl *gantry.Workload, sh *shared) *entry {
	e := &entry{wl: wl, queue: sh.queueRefs().ref(wl.Namespace, wl.Spec.QueueName), recordedQueue: wl.Status.GlobalQueue,
		deleting: wl.DeletionTimestamp != nil, timed: len(wl.Status.RejectedClusters) > 0}
	e.w = dispatch.Workload{
		Key:                keyOf(wl),
		Priority:           wl.Spec.Priority,
		Created:            wl.CreationTimestamp.Time,
		GPU:                dispatch.GPUDemandOf(&wl.Spec),
		DataLocation:       wl.Spec.DataLocation,
		Epoch:              wl.Status.DispatchEpoch,
		Nominated:          wl.Status.Nominated(),
		Winner:             wl.Status.Winner(),
		Kind:               string(wl.Spec.JobKind),
		Stopped:            wl.Spec.Stopped,
		CheckpointInterval: wl.Spec.CheckpointInterval,
	}
	e.w.Requests, e.shape = sh.requests(dispatch.RequestsOf(&wl.Spec))
	if n := len(wl.Status.Runs); n > 0 {
		run := wl.Status.Runs[n-1]
		switch {
		case run.Ended == nil:
			e.w.Run = &run
		case run.TakenBack && run.Saved(run.Ended.Time, wl.Spec.CheckpointInterval).After(run.Started.Time):
			e.w.CheckpointedOn = run.Cluster
		}
	}
	e.w.Refused = refusalsOf(wl)
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending); c != nil &&
		c.Status == metav1.ConditionTrue && c.ObservedGeneration == wl.Generation {
		e.w.PendingReason, e.w.PendingMessage = sh.word(c.Reason), sh.word(c.Message)
	}
	switch {
	case apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadFinished):
		e.w.Phase = dispatch.Finished
	case wl.Status.Winner() != "":
		e.w.Phase = dispatch.Admitted
		// It uses the quota it was admitted under until it finishes, whatever its Queue names now.
		e.w.GlobalQueue = e.recordedQueue
		if p := wl.Status.CurrentPreemption(); p != nil {
			e.w.PreemptedFor = p.Preemptor
		}
	}
	return e
}

func keyOf(wl *gantry.Workload) string { return wl.Namespace + "/" + wl.Name }

// shared is what the book's entries share, held once for all of them: in a deep queue many Workloads
// have the same requests, Pending words and Queue, and sharing them keeps the book small and a pass's
// walk over it in few places of memory.
type shared struct {
	shapes *shapes
	words  words
	queues queueRefs
}

func (sh *shared) requests(r dispatch.Resources) (dispatch.Resources, shapeID) {
	if sh == nil {
		return r, 0
	}
	return sh.shapes.intern(r)
}

func (sh *shared) word(s string) string {
	if sh == nil {
		return s
	}
	return sh.words.intern(s)
}

func (sh *shared) queueRefs() queueRefs {
	if sh == nil {
		return nil
	}
	return sh.queues
}

// maxShared bounds the strings and shapes of requests held for sharing: past it they start anew, so
// that those of Workloads long gone are not held for ever (the entries keep their own).
const maxShared = 10_000

// words holds one copy of each string entries share.
type words map[string]string

func (w words) intern(s string) string {
	if held, ok := w[s]; ok {
		return held
	}
	if len(w) >= maxShared {
		clear(w)
	}
	w[s] = s
	return s
}

// shapes holds one map of each set of total requests the book's workloads have: a deep queue has few
// shapes of job, and one map each keeps the book small. The maps are shared, so nothing may change them.
// Each has a shapeID, never given to another, so that a pass tells shapes apart without reading them.
type shapes struct {
	held map[string]sharedShape
	last shapeID
}

// shapeID names one shape of requests the book shares; 0 names none.
type shapeID uint32

type sharedShape struct {
	requests dispatch.Resources
	id       shapeID
}

// intern returns the held map equal to r and its ID, holding r if there is none.
func (s *shapes) intern(r dispatch.Resources) (dispatch.Resources, shapeID) {
	names := make([]string, 0, len(r))
	for name := range r {
		names = append(names, string(name))
	}
	slices.Sort(names)
	var key strings.Builder
	for _, name := range names {
		key.WriteString(name)
		key.WriteByte('=')
		key.WriteString(strconv.FormatInt(r[corev1.ResourceName(name)], 10))
		key.WriteByte(';')
	}
	if held, ok := s.held[key.String()]; ok {
		return held.requests, held.id
	}
	if len(s.held) >= maxShared {
		clear(s.held)
	}
	s.last++
	s.held[key.String()] = sharedShape{requests: r, id: s.last}
	return r, s.last
}

// queueRefs holds one queueRef per Queue the book's entries name, while some do.
type queueRefs map[queueKey]*queueRef

// ref is the Queue of that namespace and name, counted as named once more; a nil queueRefs holds none.
func (qs queueRefs) ref(namespace, name string) *queueRef {
	k := queueKey{namespace, name}
	q := qs[k]
	if q == nil {
		q = &queueRef{queueKey: k}
		if qs != nil {
			qs[k] = q
		}
	}
	q.users++
	return q
}

// release counts the Queue as named once less, and forgets it when none names it.
func (qs queueRefs) release(q *queueRef) {
	if q.users--; q.users == 0 {
		delete(qs, q.queueKey)
	}
}

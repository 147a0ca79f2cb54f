// Package visibility serves what waits on the hub, with its positions in the dispatcher's order
// (apis/visibility/v1beta1), to users allowed to list the Workloads of a namespace or of all of them.
// An Index follows the hub's cache of Workloads and Queues, event by event, and orders what waits at
// most once per MaxStaleness, when asked: a page of a deep queue costs its own length, not the queue's.
package visibility

import (
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/dispatch"
)

// entry is one pending Workload as the index keeps it: what its order and its answer need.
type entry struct {
	key types.NamespacedName
	// id is the key as the dispatcher orders by it: namespace/name.
	id       string
	queue    string
	priority int32
	created  time.Time
	reason   string
	message  string
}

// placed is an entry where it stands: its GlobalQueue (empty when its Queue names none that exists)
// and its positions, from 1, in that GlobalQueue and in its Queue.
type placed struct {
	*entry
	globalQueue       string
	inGlobal, inQueue int
}

// queueRef names a namespace's Queue.
type queueRef struct{ namespace, name string }

// positions are the pending Workloads placed, in position order by GlobalQueue name. A GlobalQueue's
// are a part of all; a namespace's and a Queue's are indexes into all, in the same order.
type positions struct {
	all []placed
	// byKey indexes all by Workload, made when first asked for: the visibility API never asks.
	byKey         map[types.NamespacedName]int32
	indexKeys     sync.Once
	byGlobalQueue map[string][]placed
	byNamespace   map[string][]int32
	byQueue       map[queueRef][]int32
}

// order places the entries: each under the GlobalQueue its Queue names now (queues), in the
// dispatcher's order within it (dispatch.CompareQueueOrder). A Workload whose Queue names no
// GlobalQueue has none and no positions. A namespace's list holds its Workloads by GlobalQueue name,
// each GlobalQueue's in position order.
func order(entries map[types.NamespacedName]*entry, queues map[queueRef]string) *positions {
	all := make([]placed, 0, len(entries))
	for _, e := range entries {
		all = append(all, placed{entry: e, globalQueue: queues[queueRef{e.key.Namespace, e.queue}]})
	}
	slices.SortFunc(all, comparePlaced)
	return place(all)
}

// reorder is order after the touched Workloads changed (or came, or went), the Queues unchanged:
// the others keep their order in prev, and the touched ones still pending (in entries, which need
// hold no others) are merged in. It costs the length of the queue, not its sorting.
func reorder(prev *positions, entries map[types.NamespacedName]*entry, queues map[queueRef]string,
	touched map[types.NamespacedName]bool) *positions {
	fresh := make([]placed, 0, len(touched))
	for key := range touched {
		if e := entries[key]; e != nil {
			fresh = append(fresh, placed{entry: e, globalQueue: queues[queueRef{e.key.Namespace, e.queue}]})
		}
	}
	slices.SortFunc(fresh, comparePlaced)
	all := make([]placed, 0, len(prev.all)+len(fresh))
	for _, pl := range prev.all {
		if touched[pl.key] {
			continue
		}
		for len(fresh) > 0 && comparePlaced(fresh[0], pl) < 0 {
			all, fresh = append(all, fresh[0]), fresh[1:]
		}
		all = append(all, placed{entry: pl.entry, globalQueue: pl.globalQueue})
	}
	return place(append(all, fresh...))
}

func comparePlaced(a, b placed) int {
	if c := strings.Compare(a.globalQueue, b.globalQueue); c != 0 {
		return c
	}
	return dispatch.CompareQueueOrder(a.priority, a.created, a.id, b.priority, b.created, b.id)
}

// place counts the positions of the ordered Workloads and indexes them.
func place(all []placed) *positions {
	p := &positions{all: all, byGlobalQueue: map[string][]placed{}, byNamespace: map[string][]int32{}, byQueue: map[queueRef][]int32{}}
	start := 0
	for i := range all {
		pl := &all[i]
		if pl.globalQueue != all[start].globalQueue {
			start = i
		}
		q := queueRef{pl.key.Namespace, pl.queue}
		if pl.globalQueue != "" {
			pl.inGlobal = i - start + 1
			pl.inQueue = len(p.byQueue[q]) + 1
		}
		p.byQueue[q] = append(p.byQueue[q], int32(i))
		p.byNamespace[pl.key.Namespace] = append(p.byNamespace[pl.key.Namespace], int32(i))
		if (i+1 == len(all) || all[i+1].globalQueue != pl.globalQueue) && pl.globalQueue != "" {
			p.byGlobalQueue[pl.globalQueue] = all[start : i+1 : i+1]
		}
	}
	return p
}

// pick is the placed Workloads at the indexes, in their order.
func (p *positions) pick(indexes []int32) []placed {
	out := make([]placed, len(indexes))
	for i, j := range indexes {
		out[i] = p.all[j]
	}
	return out
}

// page is list[offset:offset+limit] and how many come after it.
func page[T any](list []T, offset, limit int) ([]T, int) {
	if offset >= len(list) {
		return nil, 0
	}
	end := min(offset+limit, len(list))
	return list[offset:end], len(list) - end
}

// Placement is where a waiting Workload stands: its GlobalQueue (empty when its Queue names none that
// exists), its positions from 1 in that GlobalQueue and in its Queue, and how many wait in the
// GlobalQueue (all 0 without one).
type Placement struct {
	GlobalQueue                string
	InGlobalQueue, InQueue, Of int
}

// Order is what waits, in position order by GlobalQueue name, as an Index ordered it once.
type Order struct{ p *positions }

// Len is how many wait.
func (o Order) Len() int { return len(o.p.all) }

// At is the i-th that waits, from 0, and where it stands.
func (o Order) At(i int) (types.NamespacedName, Placement) {
	pl := o.p.all[i]
	return pl.key, o.placement(pl)
}

// Of is where the Workload stands, and false when it does not wait.
func (o Order) Of(key types.NamespacedName) (Placement, bool) {
	i, ok := o.p.keys()[key]
	if !ok {
		return Placement{}, false
	}
	return o.placement(o.p.all[i]), true
}

// Has says whether the Workload waits.
func (o Order) Has(key types.NamespacedName) bool {
	_, ok := o.p.keys()[key]
	return ok
}

func (p *positions) keys() map[types.NamespacedName]int32 {
	p.indexKeys.Do(func() {
		p.byKey = make(map[types.NamespacedName]int32, len(p.all))
		for i := range p.all {
			p.byKey[p.all[i].key] = int32(i)
		}
	})
	return p.byKey
}

func (o Order) placement(pl placed) Placement {
	return Placement{GlobalQueue: pl.globalQueue, InGlobalQueue: pl.inGlobal, InQueue: pl.inQueue, Of: len(o.p.byGlobalQueue[pl.globalQueue])}
}

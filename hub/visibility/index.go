package visibility

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// MaxStaleness bounds how old the order a page shows may be: what changed since is ordered anew, at
// most this often, when a page is asked for.
const MaxStaleness = time.Second

// Index follows the hub's Workloads and Queues and orders what waits when asked. Create it with
// NewIndex; its zero value is not usable.
type Index struct {
	now func() time.Time

	// ordering serialises the making of orders; mu guards what the cache's events change.
	ordering sync.Mutex
	mu       sync.Mutex
	entries  map[types.NamespacedName]*entry
	queues   map[queueRef]string
	// touched are the Workloads that changed since the last order; queuesChanged says a Queue did,
	// which may move all of its Workloads.
	touched       map[types.NamespacedName]bool
	queuesChanged bool
	ordered       *positions
	at            time.Time
}

// NewIndex returns an empty index; now stamps its orderings.
func NewIndex(now func() time.Time) *Index {
	return &Index{now: now, entries: map[types.NamespacedName]*entry{}, queues: map[queueRef]string{},
		touched: map[types.NamespacedName]bool{}}
}

// Follow feeds the index from the cache's informers of Workloads and Queues.
func (x *Index) Follow(ctx context.Context, c cache.Cache) error { return Follow(ctx, c, x) }

// Follower takes in Workloads and Queues as the cache's informers see them, and their deletions.
type Follower interface {
	SetWorkload(o any, deleted bool)
	SetQueue(o any, deleted bool)
}

// Follow feeds f from the cache's informers of Workloads and Queues.
func Follow(ctx context.Context, c cache.Cache, f Follower) error {
	wls, err := c.GetInformer(ctx, &gantry.Workload{})
	if err != nil {
		return fmt.Errorf("following Workloads: %w", err)
	}
	if _, err := wls.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { f.SetWorkload(o, false) },
		UpdateFunc: func(_, o any) { f.SetWorkload(o, false) },
		DeleteFunc: func(o any) { f.SetWorkload(o, true) },
	}); err != nil {
		return err
	}
	qs, err := c.GetInformer(ctx, &gantry.Queue{})
	if err != nil {
		return fmt.Errorf("following Queues: %w", err)
	}
	_, err = qs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { f.SetQueue(o, false) },
		UpdateFunc: func(_, o any) { f.SetQueue(o, false) },
		DeleteFunc: func(o any) { f.SetQueue(o, true) },
	})
	return err
}

// SetWorkload takes in a Workload as it is now, or its deletion: one without a winner that has not
// finished and is not being deleted waits; any other leaves the index.
func (x *Index) SetWorkload(o any, deleted bool) {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o, deleted = t.Obj, true
	}
	wl, ok := o.(*gantry.Workload)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}
	var e *entry
	if !deleted && waits(wl) {
		e = &entry{key: key, id: key.Namespace + "/" + key.Name, queue: wl.Spec.QueueName, priority: wl.Spec.Priority,
			created: wl.CreationTimestamp.Time}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending); c != nil {
			e.reason, e.message = c.Reason, c.Message
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if e == nil {
		if _, had := x.entries[key]; had {
			delete(x.entries, key)
			x.touched[key] = true
		}
		return
	}
	x.entries[key] = e
	x.touched[key] = true
}

// waits says whether a Workload is pending: no winner, not finished, not being deleted.
func waits(wl *gantry.Workload) bool {
	return wl.DeletionTimestamp == nil && wl.Status.Winner() == "" &&
		!apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadFinished)
}

// SetQueue takes in a Queue as it is now, or its deletion.
func (x *Index) SetQueue(o any, deleted bool) {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o, deleted = t.Obj, true
	}
	q, ok := o.(*gantry.Queue)
	if !ok {
		return
	}
	ref := queueRef{q.Namespace, q.Name}
	x.mu.Lock()
	defer x.mu.Unlock()
	if deleted {
		delete(x.queues, ref)
	} else {
		x.queues[ref] = q.Spec.GlobalQueue
	}
	x.queuesChanged = true
}

// OrderNow is the order of what waits with every change the index has taken in: ordered anew when
// anything changed. A caller that asks often bounds how often itself (the page asks once a second).
func (x *Index) OrderNow() Order { return Order{x.positionsWithin(0)} }

// positions orders what waits anew when it changed and the last order is MaxStaleness old.
func (x *Index) positions() *positions { return x.positionsWithin(MaxStaleness) }

// positionsWithin orders what waits anew when it changed and the last order is maxAge old: from
// scratch when a Queue changed, else merging what changed into the last order. It sorts outside the
// lock the cache's events take, from copies of what changed: events are not held up by a deep order.
func (x *Index) positionsWithin(maxAge time.Duration) *positions {
	x.ordering.Lock()
	defer x.ordering.Unlock()
	x.mu.Lock()
	now := x.now()
	changed := x.queuesChanged || len(x.touched) > 0
	if x.ordered != nil && (!changed || now.Sub(x.at) < maxAge) {
		defer x.mu.Unlock()
		return x.ordered
	}
	prev, queues := x.ordered, maps.Clone(x.queues)
	var entries map[types.NamespacedName]*entry
	if fresh := prev == nil || x.queuesChanged; fresh {
		entries, prev = maps.Clone(x.entries), nil
	} else {
		entries = make(map[types.NamespacedName]*entry, len(x.touched))
		for key := range x.touched {
			if e := x.entries[key]; e != nil {
				entries[key] = e
			}
		}
	}
	touched := maps.Clone(x.touched)
	x.queuesChanged = false
	clear(x.touched)
	x.mu.Unlock()

	var p *positions
	if prev == nil {
		p = order(entries, queues)
	} else {
		p = reorder(prev, entries, queues, touched)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.ordered, x.at = p, now
	return p
}

package web

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/visibility"
	"github.com/gantry-dev/gantry/internal/view"
)

// RefreshInterval bounds how often the table is made anew while Workloads change: a page shows the
// fleet at most this old, and a deep queue costs one ordering per interval, however many read it.
const RefreshInterval = time.Second

// Row is one job on the page. Rows are made once per change of their Workload and never changed after.
type Row struct {
	view.WorkloadRow
	// Finished is when the job finished; zero while it has not.
	Finished time.Time
}

// Table follows the hub's Workloads as rows, and makes them into a snapshot the page selects from,
// at most once per RefreshInterval. Create it with NewTable.
type Table struct {
	positions *visibility.Index
	now       func() time.Time

	mu   sync.Mutex
	rows map[types.NamespacedName]*Row
	// ran are the Workloads that ran (status.runs), by namespace and name: the cache's own objects, which
	// the informers replace and nobody changes, for the GPU time their runs add to the Usages.
	ran   map[string]map[string]*gantry.Workload
	dirty bool

	// building serialises the making of snapshots; snap is the last one made.
	building sync.Mutex
	snap     *snapshot
}

// NewTable returns an empty table whose waiting rows stand where positions places them.
func NewTable(positions *visibility.Index, now func() time.Time) *Table {
	return &Table{positions: positions, now: now, rows: map[types.NamespacedName]*Row{}, ran: map[string]map[string]*gantry.Workload{},
		dirty: true}
}

// Follow feeds the table from the cache's informers: Workloads make its rows, and a change of a Queue
// may move what waits.
func (t *Table) Follow(ctx context.Context, c cache.Cache) error { return visibility.Follow(ctx, c, t) }

// SetWorkload takes in a Workload as it is now, or its deletion.
func (t *Table) SetWorkload(o any, deleted bool) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o, deleted = d.Obj, true
	}
	wl, ok := o.(*gantry.Workload)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: wl.Namespace, Name: wl.Name}
	var row *Row
	var ran *gantry.Workload
	if !deleted {
		row = rowOf(wl)
		if len(wl.Status.Runs) > 0 {
			ran = wl
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if row == nil {
		delete(t.rows, key)
	} else {
		t.rows[key] = row
	}
	t.setRan(key, ran)
	t.dirty = true
}

// setRan keeps wl as the Workload of key that ran, or forgets key's when wl is nil. t.mu is held.
func (t *Table) setRan(key types.NamespacedName, wl *gantry.Workload) {
	in := t.ran[key.Namespace]
	if wl == nil {
		delete(in, key.Name)
		if len(in) == 0 {
			delete(t.ran, key.Namespace)
		}
		return
	}
	if in == nil {
		in = map[string]*gantry.Workload{}
		t.ran[key.Namespace] = in
	}
	in[key.Name] = wl
}

// ranNamespaces are the namespaces with Workloads that ran, as the cache has them now.
func (t *Table) ranNamespaces() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Collect(maps.Keys(t.ran))
}

// ranIn are the Workloads of ns that ran, as the cache has them now (not as of the last snapshot: read
// with a Usage read now, an older Workload could have its runs counted twice). Only to be read.
func (t *Table) ranIn(ns string) []*gantry.Workload {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Collect(maps.Values(t.ran[ns]))
}

// SetQueue takes in a change of a Queue: what waits may stand elsewhere now.
func (t *Table) SetQueue(any, bool) { t.touch() }

func (t *Table) touch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dirty = true
}

// rowOf is a Workload's row: as kubectl gantry jobs shows it, but for its place in the queue, which
// the snapshot adds.
func rowOf(wl *gantry.Workload) *Row {
	row := &Row{WorkloadRow: view.RowOf(wl)}
	if row.State == view.StatePending {
		row.GlobalQueue = "" // the one it waits in is its placement's
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadFinished); c != nil && c.Status == "True" {
		row.Finished = c.LastTransitionTime.Time
	}
	return row
}

// current is the table's latest snapshot, made anew first when Workloads changed and the latest is
// RefreshInterval old.
func (t *Table) current() *snapshot {
	t.building.Lock()
	defer t.building.Unlock()
	t.mu.Lock()
	stale := t.snap == nil || (t.dirty && t.now().Sub(t.snap.at) >= RefreshInterval)
	t.mu.Unlock()
	if stale {
		t.snap = t.build()
	}
	return t.snap
}

// Run makes a snapshot of what changed once per RefreshInterval while pages listen, and tells them:
// a page is told of the last change too, not only of those before a snapshot.
func (t *Table) Run(ctx context.Context, changes *Changes) error {
	tick := time.NewTicker(RefreshInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		t.mu.Lock()
		dirty := t.dirty
		t.mu.Unlock()
		if dirty && changes.Listening() {
			t.current()
			changes.Notify()
		}
	}
}

// build makes a snapshot of the rows as they are, placing those that wait as positions orders them now.
// It works on a copy of the rows, outside the lock the cache's events take.
func (t *Table) build() *snapshot {
	order := t.positions.OrderNow()
	t.mu.Lock()
	rows := maps.Clone(t.rows)
	t.dirty = false
	t.mu.Unlock()
	waiting := make([]placedRow, 0, order.Len())
	for i := range order.Len() {
		key, at := order.At(i)
		if row := rows[key]; row != nil && row.State == view.StatePending {
			waiting = append(waiting, placedRow{Row: row, At: at})
		}
	}
	runningOn := map[string]int{}
	pending := 0
	for _, row := range rows {
		if row.State == view.StatePending {
			pending++
		}
	}
	// Pending rows the order has not placed (yet, or taken back while their winner stands) come after
	// those it placed; only then is each asked for.
	unplaced := pending > len(waiting)
	others := make([]placedRow, 0, len(rows)-len(waiting))
	for key, row := range rows {
		if row.Cluster != "" && row.State != view.StateFinished {
			runningOn[row.Cluster]++
		}
		if row.State != view.StatePending || (unplaced && !order.Has(key)) {
			others = append(others, placedRow{Row: row})
		}
	}
	return newSnapshot(t.now(), waiting, others, runningOn)
}

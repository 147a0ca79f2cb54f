// Package expectations is Gantry's one home for "our own write is not in the cache yet". Every
// controller that writes and then reads its own informer cache uses it, instead of growing an overlay
// of its own:
//   - Created remembers creations until the cache shows them (the hub's copies and worker Jobs, the
//     removal of a Workload's finalizer), so a reconcile in the gap does not repeat them.
//   - Written remembers an object's state as this process last wrote it, with the resourceVersion the
//     write replaced: while the cache still shows that version, it is behind the write and readers go by
//     what was written (the agent's copy conditions and capacity report, the hub's Job status mirrors).
//   - Writes follows each write of a writer from its start to the cache showing it: in flight, of
//     unknown outcome until a live read tells, applied (Written) while the cache is behind; the
//     dispatcher's Workload statuses.
package expectations

import "sync"

// Written remembers, per key, a value this process wrote and the resourceVersion its write replaced.
// Reads never change it; the caller forgets what it no longer needs.
type Written[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]written[V]
}

type written[V any] struct {
	stale string
	value V
}

// NewWritten returns an empty memory.
func NewWritten[K comparable, V any]() *Written[K, V] {
	return &Written[K, V]{m: map[K]written[V]{}}
}

// Record remembers that the write of value replaced the object's staleVersion.
func (w *Written[K, V]) Record(key K, staleVersion string, value V) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m[key] = written[V]{stale: staleVersion, value: value}
}

// Behind returns what was written for key while cachedVersion, the version the cache shows, is the one
// the write replaced: the cache is behind the write. ok is false when nothing is remembered or the cache
// has moved on.
func (w *Written[K, V]) Behind(key K, cachedVersion string) (value V, ok bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	e, found := w.m[key]
	if !found || e.stale != cachedVersion {
		return value, false
	}
	return e.value, true
}

// Get returns what was written for key and the version the write replaced, whether or not the cache
// caught up.
func (w *Written[K, V]) Get(key K) (value V, staleVersion string, ok bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	e, found := w.m[key]
	return e.value, e.stale, found
}

// Forget drops what was written for key.
func (w *Written[K, V]) Forget(key K) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}

// Keep drops every entry for which keep says false.
func (w *Written[K, V]) Keep(keep func(key K, staleVersion string) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, e := range w.m {
		if !keep(k, e.stale) {
			delete(w.m, k)
		}
	}
}

// Keys lists the keys of what is remembered.
func (w *Written[K, V]) Keys() []K {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]K, 0, len(w.m))
	for k := range w.m {
		out = append(out, k)
	}
	return out
}

// Len is how many entries are remembered.
func (w *Written[K, V]) Len() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.m)
}

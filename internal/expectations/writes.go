package expectations

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Versioned is what a write leaves: the object's identity and resourceVersion.
type Versioned interface {
	GetUID() types.UID
	GetResourceVersion() string
}

// Writes remembers the writes one writer makes of objects it also reads from a cache, per key, from
// their start until the cache shows them: in flight; of unknown outcome (the write failed without the
// API server saying it was not applied, so it may be, or may still be) until the cache or a live read
// tells; applied while the cache is behind it (Written). A key with a write in flight or of unknown
// outcome takes no other write, and Overlay gives the writer its own view of every key it wrote. A
// write moves from one state to the next under one lock: no reader sees it in none.
type Writes[K comparable, V Versioned] struct {
	mu       sync.Mutex
	inflight map[K]V
	unknown  map[K]*UnknownWrite[K, V]
	backoff  map[K]time.Duration
	applied  *Written[K, V]
}

// UnknownWrite is a write of unknown outcome: Value is what it would leave; its resourceVersion is the
// one the write was based on.
type UnknownWrite[K comparable, V Versioned] struct {
	Key     K
	Value   V
	due     time.Time
	reading bool
}

// NewWrites returns an empty memory.
func NewWrites[K comparable, V Versioned]() *Writes[K, V] {
	return &Writes[K, V]{inflight: map[K]V{}, unknown: map[K]*UnknownWrite[K, V]{}, backoff: map[K]time.Duration{},
		applied: NewWritten[K, V]()}
}

// Start records that a write of v for key begins. It records nothing and says false while a write of
// key is in flight or of unknown outcome: that one's end asks for what follows.
func (w *Writes[K, V]) Start(key K, v V) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, busy := w.inflight[key]; busy || w.unknown[key] != nil {
		return false
	}
	w.inflight[key] = v
	return true
}

// Applied records that the write of key, based on based, was applied and left left.
func (w *Writes[K, V]) Applied(key K, based, left V) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.inflight, key)
	delete(w.backoff, key)
	w.applied.Record(key, w.replacedVersion(key, based), left)
}

// NotApplied records that the API server did not apply the write of key. A conflict or a missing
// object waits for the cache to catch up (0); any other refusal backs off, and the wait is returned.
func (w *Writes[K, V]) NotApplied(key K, backOff bool) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.inflight, key)
	if !backOff {
		return 0
	}
	return w.nextBackoff(key)
}

// Unknown records that the write of v for key failed without the API server saying whether it was
// applied: it stands until the cache or a live read tells. It returns when to read the object.
func (w *Writes[K, V]) Unknown(key K, v V, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.inflight, key)
	retry := w.nextBackoff(key)
	w.unknown[key] = &UnknownWrite[K, V]{Key: key, Value: v, due: now.Add(retry)}
	return retry
}

// DueForReadBack returns the writes of unknown outcome whose live read is due, and marks them read.
func (w *Writes[K, V]) DueForReadBack(now time.Time) []*UnknownWrite[K, V] {
	w.mu.Lock()
	defer w.mu.Unlock()
	var due []*UnknownWrite[K, V]
	for _, u := range w.unknown {
		if !u.reading && !now.Before(u.due) {
			u.reading = true
			due = append(due, u)
		}
	}
	return due
}

// ReadBackOutcome is what a live read of an object tells of a write of unknown outcome.
type ReadBackOutcome int

const (
	// Moot: the cache told meanwhile, or the object is gone.
	Moot ReadBackOutcome = iota
	// ReadFailed: read again after the returned wait.
	ReadFailed
	// Superseded: the object changed since the write was based on it, by the write or another; it is
	// recorded as what was applied.
	Superseded
	// NotWritten: the object is as the write was based on: the write was not applied.
	NotWritten
)

// ReadBack records what a live read of u's object found: live and whether it exists, or err.
func (w *Writes[K, V]) ReadBack(u *UnknownWrite[K, V], live V, exists bool, err error, now time.Time) (ReadBackOutcome, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	u.reading = false
	if w.unknown[u.Key] != u {
		return Moot, 0
	}
	switch {
	case err == nil && (!exists || live.GetUID() != u.Value.GetUID()):
		delete(w.unknown, u.Key)
		return Moot, 0
	case err != nil:
		retry := w.nextBackoff(u.Key)
		u.due = now.Add(retry)
		return ReadFailed, retry
	case live.GetResourceVersion() != u.Value.GetResourceVersion():
		delete(w.unknown, u.Key)
		delete(w.backoff, u.Key)
		w.applied.Record(u.Key, w.replacedVersion(u.Key, u.Value), live)
		return Superseded, 0
	}
	delete(w.unknown, u.Key) // its backoff has passed
	return NotWritten, 0
}

// Overlay lays the writes over what the cache shows (cached: the object by key, if the cache has it):
// for each key whose cached object is the one written, what stands in for it: the write in flight;
// the write of unknown outcome while the cache shows the version it was based on; the applied write
// while the cache is behind it. Its cost is that of the writes remembered, not of the cache. It forgets
// what no longer matters, and returns the writes of unknown outcome that the cache shows superseded,
// each with the cached object: whether by the write itself, the caller tells.
func (w *Writes[K, V]) Overlay(cached func(K) (V, bool)) (map[K]V, []SupersededWrite[K, V]) {
	w.mu.Lock()
	defer w.mu.Unlock()
	over := map[K]V{}
	for key, v := range w.inflight {
		if c, ok := cached(key); ok && c.GetUID() == v.GetUID() {
			over[key] = v
		}
	}
	var superseded []SupersededWrite[K, V]
	for key, u := range w.unknown {
		c, ok := cached(key)
		switch _, inflight := over[key]; {
		case inflight:
		case !ok:
			delete(w.unknown, key)
		case c.GetUID() == u.Value.GetUID() && c.GetResourceVersion() == u.Value.GetResourceVersion():
			over[key] = u.Value // it may have been applied
		default:
			// The object changed since the write was based on it, so the write can no longer apply
			// later: what the cache shows is what became of it.
			delete(w.unknown, key)
			if c.GetUID() == u.Value.GetUID() {
				superseded = append(superseded, SupersededWrite[K, V]{Written: u.Value, Cached: c})
			}
		}
	}
	for _, key := range w.applied.Keys() {
		c, ok := cached(key)
		if _, stands := over[key]; stands && ok {
			continue
		}
		var version string
		if ok {
			version = c.GetResourceVersion()
		}
		if a, behind := w.applied.Behind(key, version); behind && ok && a.GetUID() == c.GetUID() {
			over[key] = a // the cache has not caught up with the write yet
			continue
		}
		w.applied.Forget(key)
	}
	return over, superseded
}

// SupersededWrite is a write of unknown outcome and the object the cache shows since, changed.
type SupersededWrite[K comparable, V Versioned] struct {
	Written, Cached V
}

// nextBackoff doubles the key's backoff, from 100 ms up to a minute. w.mu must be held.
func (w *Writes[K, V]) nextBackoff(key K) time.Duration {
	retry := min(max(2*w.backoff[key], 100*time.Millisecond), time.Minute)
	w.backoff[key] = retry
	return retry
}

// replacedVersion is the version the cache shows while it is behind a write based on based: based's
// own, or, when based was itself an earlier write the cache did not show yet, the version that one
// replaced. w.mu must be held.
func (w *Writes[K, V]) replacedVersion(key K, based V) string {
	if prev, stale, ok := w.applied.Get(key); ok && prev.GetResourceVersion() == based.GetResourceVersion() {
		return stale
	}
	return based.GetResourceVersion()
}

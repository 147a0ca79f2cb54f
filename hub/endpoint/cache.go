package endpoint

import (
	"sync"
	"time"
)

const (
	// reviewTTL is how long an answer of the hub's API server about a token or an access is reused. A
	// page open on a busy fleet refreshes several times a second, each time asking who the user is and
	// what they may see; a revoked token or right then stops working within this time.
	reviewTTL = 10 * time.Second
	// maxReviews bounds the answers kept; when full, all are forgotten and asked again.
	maxReviews = 4096
)

// reviewCache keeps answers for reviewTTL.
type reviewCache[K comparable, V any] struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[K]cached[V]
}

type cached[V any] struct {
	value   V
	expires time.Time
}

func newReviewCache[K comparable, V any](now func() time.Time) *reviewCache[K, V] {
	return &reviewCache[K, V]{now: now, entries: map[K]cached[V]{}}
}

func (c *reviewCache[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || !c.now().Before(e.expires) {
		delete(c.entries, k)
		var zero V
		return zero, false
	}
	return e.value, true
}

func (c *reviewCache[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxReviews {
		c.entries = map[K]cached[V]{}
	}
	c.entries[k] = cached[V]{value: v, expires: c.now().Add(reviewTTL)}
}

package workload

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ExpectationTimeout bounds how long a write is trusted to show up in a cache. Past it, the write is
// repeated; the API server then answers AlreadyExists or NotFound, which is harmless.
const ExpectationTimeout = 15 * time.Second

// expectations remembers writes to workers that their caches have not shown yet. Under load a watch
// event can trail its write by a second or more, and every reconcile in that gap would otherwise repeat
// the write only to have it rejected (409 on a create). Correctness never depends on it: an expectation
// only saves a request, and it lapses after ExpectationTimeout.
type expectations struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	until map[string]time.Time
}

func newExpectations(c clock.PassiveClock) *expectations {
	return &expectations{clock: c, until: map[string]time.Time{}}
}

// expect records that the write named key was made and should soon be visible.
func (e *expectations) expect(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	if len(e.until) >= sweepAbove {
		// Writes whose objects went away before any cache saw them are never observed.
		for k, until := range e.until {
			if !now.Before(until) {
				delete(e.until, k)
			}
		}
	}
	e.until[key] = now.Add(ExpectationTimeout)
}

// sweepAbove is the number of expectations above which expect drops the lapsed ones.
const sweepAbove = 1024

// observe forgets key: the cache shows the write, or the write no longer matters.
func (e *expectations) observe(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.until, key)
}

// pending tells how much longer the write named key is trusted to show up; ok is false when it is not
// expected (never made, observed, or lapsed).
func (e *expectations) pending(key string) (wait time.Duration, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	until, found := e.until[key]
	if !found {
		return 0, false
	}
	wait = until.Sub(e.clock.Now())
	if wait <= 0 {
		delete(e.until, key)
		return 0, false
	}
	return wait, true
}

// deadline is when the write named key stops being trusted to show up; the zero time when it is not
// expected.
func (e *expectations) deadline(key string) time.Time {
	if wait, ok := e.pending(key); ok {
		return e.clock.Now().Add(wait)
	}
	return time.Time{}
}

// isPending tells whether the write named key is expected to show up.
func (e *expectations) isPending(key string) bool {
	_, ok := e.pending(key)
	return ok
}

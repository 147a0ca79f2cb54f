package expectations

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ExpectationTimeout bounds how long a write is trusted to show up in a cache. Past it, the write is
// repeated; the API server then answers AlreadyExists or NotFound, which is harmless.
const ExpectationTimeout = 15 * time.Second

// Created remembers objects this process created that a cache has not shown yet. Under load a watch
// event can trail its write by a second or more, and every reconcile in that gap would otherwise repeat
// the create only to have it refused (409). An expectation lapses after ExpectationTimeout; a create
// repeated then is answered AlreadyExists, which callers treat as done.
type Created struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	until map[string]time.Time
}

func NewCreated(c clock.PassiveClock) *Created {
	return &Created{clock: c, until: map[string]time.Time{}}
}

// Expect records that the write named key was made and should soon be visible.
func (e *Created) Expect(key string) {
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

// sweepAbove is the number of expectations above which Expect drops the lapsed ones.
const sweepAbove = 1024

// Observe forgets key: the cache shows the write, or the write no longer matters.
func (e *Created) Observe(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.until, key)
}

// Pending tells how much longer the write named key is trusted to show up; ok is false when it is not
// expected (never made, observed, or lapsed).
func (e *Created) Pending(key string) (wait time.Duration, ok bool) {
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

// Deadline is when the write named key stops being trusted to show up; the zero time when it is not
// expected.
func (e *Created) Deadline(key string) time.Time {
	if wait, ok := e.Pending(key); ok {
		return e.clock.Now().Add(wait)
	}
	return time.Time{}
}

// IsPending tells whether the write named key is expected to show up.
func (e *Created) IsPending(key string) bool {
	_, ok := e.Pending(key)
	return ok
}

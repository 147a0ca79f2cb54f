// Package pace spaces a controller's passes, each of which reads a whole cache and decides over it: a
// pass asked for runs at once unless passes took more than their duty of the time (beyond a burst) or
// the last one began less than a gap ago. A single change finds its pass unpaced; a stream of changes
// is taken in passes that each act on many of them.
package pace

import "time"

// Budget is the time passes may still take before the next one has to wait, and when the last began.
// Its zero value never waits; make one with New.
type Budget struct {
	duty  float64
	burst time.Duration
	gap   time.Duration

	left      time.Duration // fills at duty of the time passing, up to burst; each pass takes what it took
	at        time.Time     // when left was last brought up to date
	lastStart time.Time
}

// New returns a full budget at now: passes may take duty of the time (0 < duty <= 1) over bursts of up
// to burst, and one begins at least gap after the one before it (0 for no gap).
func New(duty float64, burst, gap time.Duration, now time.Time) *Budget {
	return &Budget{duty: duty, burst: burst, gap: gap, left: burst, at: now}
}

func (b *Budget) refill(now time.Time) {
	if now.After(b.at) {
		b.left = min(b.burst, b.left+time.Duration(b.duty*float64(now.Sub(b.at))))
		b.at = now
	}
}

// Wait is how long a pass asked for at now has to wait.
func (b *Budget) Wait(now time.Time) time.Duration {
	if b.duty == 0 {
		return 0
	}
	b.refill(now)
	var wait time.Duration
	if b.left < 0 {
		wait = time.Duration(float64(-b.left) / b.duty)
	}
	if !b.lastStart.IsZero() {
		wait = max(wait, b.lastStart.Add(b.gap).Sub(now))
	}
	return wait
}

// Spend takes a pass that ran from start to end from the budget.
func (b *Budget) Spend(start, end time.Time) {
	if b.duty == 0 {
		return
	}
	b.refill(end)
	b.left -= end.Sub(start)
	b.lastStart = start
}

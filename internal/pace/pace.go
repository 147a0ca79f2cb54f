// Package pace spaces a controller's passes, each of which reads a whole cache and decides over it: a
// pass asked for runs at once unless passes took more than their duty of the time (beyond a burst) or
// came faster than a rate (beyond a few in a row). A single change finds its pass unpaced; a stream of
// changes is taken in passes that each act on many of them.
package pace

import (
	"time"

	"golang.org/x/time/rate"
)

// Options say how passes are spaced.
type Options struct {
	// Duty is the share of the time passes may take (0 < Duty <= 1), over bursts of up to Burst.
	Duty  float64
	Burst time.Duration
	// Gap, when not zero, is the least time between passes beyond InARow of them at once.
	Gap    time.Duration
	InARow int
}

// Budget is the time passes may still take before the next one has to wait, and how many may still
// come at once. Its zero value never waits; make one with New.
type Budget struct {
	opts Options
	left time.Duration // fills at Duty of the time passing, up to Burst; each pass takes what it took
	at   time.Time     // when left was last brought up to date
	rate *rate.Limiter // nil without a Gap
}

// New returns a full budget at now.
func New(opts Options, now time.Time) *Budget {
	b := &Budget{opts: opts, left: opts.Burst, at: now}
	if opts.Gap > 0 {
		b.rate = rate.NewLimiter(rate.Every(opts.Gap), max(opts.InARow, 1))
	}
	return b
}

func (b *Budget) refill(now time.Time) {
	if now.After(b.at) {
		b.left = min(b.opts.Burst, b.left+time.Duration(b.opts.Duty*float64(now.Sub(b.at))))
		b.at = now
	}
}

// Wait is how long a pass asked for at now has to wait.
func (b *Budget) Wait(now time.Time) time.Duration {
	if b.opts.Duty == 0 {
		return 0
	}
	b.refill(now)
	var wait time.Duration
	if b.left < 0 {
		wait = time.Duration(float64(-b.left) / b.opts.Duty)
	}
	if b.rate != nil {
		if short := 1 - b.rate.TokensAt(now); short > 0 {
			wait = max(wait, time.Duration(short*float64(b.opts.Gap)))
		}
	}
	return wait
}

// Spend takes a pass that ran from start to end from the budget.
func (b *Budget) Spend(start, end time.Time) {
	if b.opts.Duty == 0 {
		return
	}
	b.refill(end)
	b.left -= end.Sub(start)
	if b.rate != nil {
		b.rate.AllowN(start, 1)
	}
}

package pace

import (
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	duty := Options{Duty: 0.25, Burst: 500 * time.Millisecond}
	gap := duty
	gap.Gap, gap.InARow = 100*time.Millisecond, 2
	type pass struct{ at, took, wantWait time.Duration }
	for name, tc := range map[string]struct {
		opts   Options
		passes []pass
	}{
		"short passes never wait": {duty, []pass{{0, time.Millisecond, 0}, {time.Millisecond, time.Millisecond, 0}, {2 * time.Millisecond, time.Millisecond, 0}}},
		"a burst, then the duty": {duty, []pass{
			{0, 400 * time.Millisecond, 0},                      // 500 (full, nothing added) - 400 = 100
			{400 * time.Millisecond, 400 * time.Millisecond, 0}, // 100 + 100 - 400 = -200: 800 ms to make up
			{800 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond},
		}},
		"idle refills up to the burst": {duty, []pass{
			{0, 600 * time.Millisecond, 0},         // 500 (full, nothing added) - 600 = -100
			{time.Hour, 600 * time.Millisecond, 0}, // full again
		}},
		"passes in a row, then one a gap": {gap, []pass{
			{0, time.Millisecond, 0},
			{10 * time.Millisecond, time.Millisecond, 0},                     // the second in a row
			{20 * time.Millisecond, time.Millisecond, 80 * time.Millisecond}, // one due a gap after the first
			{110 * time.Millisecond, time.Millisecond, 90 * time.Millisecond},
			{time.Second, time.Millisecond, 0}, // two in a row again after a quiet while
			{time.Second, time.Millisecond, 0},
			{time.Second, time.Millisecond, 100 * time.Millisecond},
		}},
		"the duty's wait counts where it is longer than the gap's": {gap, []pass{
			{0, 900 * time.Millisecond, 0}, // 500 - 900 = -400: 1.6 s to make up
			{900 * time.Millisecond, time.Millisecond, 1600 * time.Millisecond},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			b := New(tc.opts, start)
			for i, p := range tc.passes {
				// The rate's tokens are floating point: within a microsecond is exact enough.
				if got := b.Wait(start.Add(p.at)); (got - p.wantWait).Abs() > time.Microsecond {
					t.Fatalf("pass %d at %v: wait %v, want %v", i, p.at, got, p.wantWait)
				}
				began := start.Add(p.at + p.wantWait)
				b.Spend(began, began.Add(p.took))
			}
		})
	}
}

func TestZeroBudgetNeverWaits(t *testing.T) {
	var b Budget
	now := time.Now()
	b.Spend(now, now.Add(time.Hour))
	if got := b.Wait(now.Add(time.Hour)); got != 0 {
		t.Fatalf("zero Budget waits %v", got)
	}
}

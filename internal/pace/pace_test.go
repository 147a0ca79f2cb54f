package pace

import (
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	type pass struct{ at, took, wantWait time.Duration }
	for name, tc := range map[string]struct {
		gap    time.Duration
		passes []pass
	}{
		"short passes never wait": {passes: []pass{{0, time.Millisecond, 0}, {time.Millisecond, time.Millisecond, 0}, {2 * time.Millisecond, time.Millisecond, 0}}},
		"a burst, then the duty": {passes: []pass{
			{0, 400 * time.Millisecond, 0},                      // 500 (full, nothing added) - 400 = 100
			{400 * time.Millisecond, 400 * time.Millisecond, 0}, // 100 + 100 - 400 = -200: 800 ms to make up
			{800 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond},
		}},
		"idle refills up to the burst": {passes: []pass{
			{0, 600 * time.Millisecond, 0},         // 500 (full, nothing added) - 600 = -100
			{time.Hour, 600 * time.Millisecond, 0}, // full again
		}},
		"the gap spaces short passes from their starts": {gap: 100 * time.Millisecond, passes: []pass{
			{0, 3 * time.Millisecond, 0},
			{10 * time.Millisecond, 3 * time.Millisecond, 90 * time.Millisecond},
			{250 * time.Millisecond, 3 * time.Millisecond, 0},                    // more than a gap after the last start
			{340 * time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond}, // 250 + 100
		}},
		"the duty's wait counts where it is longer than the gap": {gap: 100 * time.Millisecond, passes: []pass{
			{0, 900 * time.Millisecond, 0},                          // 500 - 900 = -400: 1.6 s to make up
			{900 * time.Millisecond, time.Millisecond, 1600 * time.Millisecond},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			b := New(0.25, 500*time.Millisecond, tc.gap, start)
			for i, p := range tc.passes {
				if got := b.Wait(start.Add(p.at)); got != p.wantWait {
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

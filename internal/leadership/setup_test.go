package leadership

import (
	"flag"
	"testing"
	"time"
)

// TestTimingCheckRefusesAnOrderWhereTwoLeadersMayWrite: a leader must give up (renew deadline) before
// another replica may take its lease, and try to renew more often than it gives up.
func TestTimingCheckRefusesAnOrderWhereTwoLeadersMayWrite(t *testing.T) {
	cases := map[string]struct {
		timing Timing
		ok     bool
	}{
		"the defaults":                      {DefaultTiming, true},
		"short, as the testbed sets it":     {Timing{LeaseDuration: 8 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: time.Second}, true},
		"renew deadline as long as a lease": {Timing{LeaseDuration: 10 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: time.Second}, false},
		"renew deadline past the lease":     {Timing{LeaseDuration: 5 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: time.Second}, false},
		"retries no more often than it gives up": {Timing{LeaseDuration: 15 * time.Second, RenewDeadline: 2 * time.Second,
			RetryPeriod: 2 * time.Second}, false},
		"no retry period": {Timing{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second}, false},
	}
	for name, tc := range cases {
		if err := tc.timing.Check(); (err == nil) != tc.ok {
			t.Errorf("%s: Check() = %v, want ok=%v", name, err, tc.ok)
		}
	}
}

func TestTimingFlagsDefaultToTheTimingTheyBind(t *testing.T) {
	timing := DefaultTiming
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	timing.BindFlags(fs)
	if err := fs.Parse([]string{"--leader-elect-lease-duration=8s"}); err != nil {
		t.Fatal(err)
	}
	want := Timing{LeaseDuration: 8 * time.Second, RenewDeadline: RenewDeadline, RetryPeriod: RetryPeriod}
	if timing != want {
		t.Errorf("timing %+v, want %+v", timing, want)
	}
}

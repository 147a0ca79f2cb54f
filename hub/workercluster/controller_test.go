package workercluster

import (
	"testing"
	"time"
)

// The wait doubles while failures of one reason repeat, is capped, and starts over when the reason
// changes: the operator did something about the last one.
func TestBackoff(t *testing.T) {
	r := &Reconciler{failures: map[string]failures{}}
	steps := []struct {
		reason string
		want   time.Duration
	}{
		{"ClusterProfileNotFound", time.Second},
		{"ClusterProfileNotFound", 2 * time.Second},
		{"ClusterProfileNotFound", 4 * time.Second},
		{"NoAccessProvider", time.Second},
		{"NoAccessProvider", 2 * time.Second},
	}
	for i, s := range steps {
		if got := r.backoff("w", s.reason); got != s.want {
			t.Fatalf("step %d (%s): %s, want %s", i, s.reason, got, s.want)
		}
	}
	for range 10 {
		r.backoff("w", "Unreachable")
	}
	if got := r.backoff("w", "Unreachable"); got != MaxBackoff {
		t.Fatalf("after many failures %s, want the cap %s", got, MaxBackoff)
	}
	if got := r.backoff("other", "Unreachable"); got != time.Second {
		t.Fatalf("another cluster starts at %s", got)
	}
	r.forget("w")
	if got := r.backoff("w", "Unreachable"); got != time.Second {
		t.Fatalf("after a success %s, want 1s", got)
	}
}

package dispatch

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// TestClustersAWorkloadMayNotGoTo: an agent's rejection holds for the TTL from when it was recorded; a
// cluster the workload was taken back from MaxEvictionsPerCluster times is out for good, with the last
// reason said.
func TestClustersAWorkloadMayNotGoTo(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ttl = 10 * time.Minute
	w := &Workload{Refused: &Refusals{
		RejectedAt: map[string]time.Time{"recent": start.Add(time.Minute), "lapsed": start, "just-lapsed": start.Add(time.Second)},
		EvictedFrom: map[string]Evictions{
			"refusing": {Count: MaxEvictionsPerCluster, LastReason: gantry.ReasonRemoteJobRefused},
			"twice":    {Count: MaxEvictionsPerCluster - 1, LastReason: gantry.ReasonPlacementTimeout},
		},
	}}
	now := start.Add(ttl + time.Second)
	want := map[string]string{"recent": RejectedByAgent, "refusing": "taken back from it 3 times (last: RemoteJobRefused)"}
	if diff := cmp.Diff(want, w.rejectedClusters(now, ttl)); diff != "" {
		t.Errorf("rejected clusters (-want +got):\n%s", diff)
	}
	if got := (&Workload{Refused: &Refusals{RejectedAt: map[string]time.Time{"a": start}}}).rejectedClusters(start.Add(DefaultRejectionTTL-time.Second), 0); got["a"] == "" {
		t.Errorf("a TTL of 0 is not DefaultRejectionTTL: %v", got)
	}
	if got := (&Workload{}).rejectedClusters(now, ttl); got != nil {
		t.Errorf("a workload without rejections: %v", got)
	}

	lapses := map[string]struct {
		since, until time.Time
		want         bool
	}{
		"lapsed by until":           {start.Add(ttl - time.Second), start.Add(ttl), true},
		"lapsed before since":       {start.Add(ttl + 2*time.Second), start.Add(ttl + 30*time.Second), false},
		"lapses after until":        {start, start.Add(ttl - time.Second), false},
		"lapses exactly at since":   {start.Add(ttl + time.Second), start.Add(ttl + 30*time.Second), false},
		"recent lapses later, too":  {start.Add(ttl + 30*time.Second), start.Add(ttl + time.Minute), true},
		"an empty span lapses none": {start.Add(ttl), start.Add(ttl), false},
	}
	for name, tc := range lapses {
		if got := w.RejectionLapsed(tc.since, tc.until, ttl); got != tc.want {
			t.Errorf("%s: lapsed %v, want %v", name, got, tc.want)
		}
	}
}

package workercluster

import (
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
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

// The WorkerCluster shows its agent's version and whether it and the hub's are within the version-skew
// policy; a cluster without a report shows neither.
func TestAgentVersionAgainstTheHubs(t *testing.T) {
	report := func(v string) *gantry.CapacityReport {
		return &gantry.CapacityReport{Status: gantry.CapacityReportStatus{AgentVersion: v}}
	}
	cases := map[string]struct {
		hub    string
		report *gantry.CapacityReport
		status metav1.ConditionStatus
		reason string
	}{
		"the release before":      {"v0.3.0", report("v0.2.4"), metav1.ConditionTrue, gantry.ReasonWithinSkewPolicy},
		"two releases before":     {"v0.3.0", report("v0.1.0"), metav1.ConditionFalse, gantry.ReasonOutsideSkewPolicy},
		"an agent without one":    {"v0.3.0", report(""), metav1.ConditionUnknown, gantry.ReasonVersionUnknown},
		"a hub of no release":     {"dev", report("v0.3.0"), metav1.ConditionUnknown, gantry.ReasonVersionUnknown},
		"no agent reports at all": {"v0.3.0", nil, "", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &Reconciler{HubVersion: tc.hub}
			status := &gantry.WorkerClusterStatus{AgentVersion: "stale", Conditions: []metav1.Condition{{Type: gantry.ClusterAgentVersionSupported, Status: metav1.ConditionTrue}}}
			r.observeAgentVersion(tc.report, status)
			c := apimeta.FindStatusCondition(status.Conditions, gantry.ClusterAgentVersionSupported)
			if tc.report == nil {
				if c != nil || status.AgentVersion != "" {
					t.Errorf("without a report: version %q, condition %+v", status.AgentVersion, c)
				}
				return
			}
			if status.AgentVersion != tc.report.Status.AgentVersion {
				t.Errorf("agentVersion %q, want %q", status.AgentVersion, tc.report.Status.AgentVersion)
			}
			if c == nil || c.Status != tc.status || c.Reason != tc.reason || c.Message == "" {
				t.Errorf("condition %+v, want %s %s with a message", c, tc.status, tc.reason)
			}
		})
	}
}

package metrics

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestTimeline(t *testing.T) {
	tl := NewTimeline()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, ok := tl.Won("a", t0); ok {
		t.Error("a winner without a known nomination was timed")
	}
	if _, ok := tl.JobCreated("b", t0); ok {
		t.Error("a Job without a known winner was timed")
	}
	tl.Nominated("a", t0)
	tl.Nominated("a", t0.Add(time.Second)) // a new epoch
	if d, ok := tl.Won("a", t0.Add(1500*time.Millisecond)); !ok || d != 500*time.Millisecond {
		t.Errorf("nominated to winner: %v %v, want 500ms from the latest nomination", d, ok)
	}
	if d, ok := tl.JobCreated("a", t0.Add(1600*time.Millisecond)); !ok || d != 100*time.Millisecond {
		t.Errorf("winner to Job: %v %v, want 100ms", d, ok)
	}
	if tl.Len() != 0 {
		t.Errorf("a workload whose Job was created is still remembered")
	}
	tl.Nominated("gone", t0)
	tl.Nominated("live", t0)
	tl.KeepOnly(func(uid types.UID) bool { return uid == "live" })
	if tl.Len() != 1 {
		t.Errorf("%d remembered, want only the live one", tl.Len())
	}
	var none *Timeline
	none.Nominated("a", t0)
	if _, ok := none.Won("a", t0); ok {
		t.Error("a nil Timeline remembered")
	}
}

func TestBounded(t *testing.T) {
	if got := Bounded(RejectionReasons, "NeverFits"); got != "NeverFits" {
		t.Errorf("a known reason became %s", got)
	}
	if got := Bounded(RejectionReasons, "made up by a worker"); got != Other {
		t.Errorf("an unknown reason became %s, want %s", got, Other)
	}
}

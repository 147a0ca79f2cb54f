package dispatcher

import (
	"testing"
	"time"

	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/gantry-dev/gantry/hub/metrics"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// latency reads the count and sum of one step of the dispatch latency histogram.
func latency(t *testing.T, step string) (uint64, float64) {
	t.Helper()
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "gantry_hub_dispatch_latency_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "step" && l.GetValue() == step {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return 0, 0
}

// TestPassTimesTheStepsOfADispatch: the time from creation to the first nomination, and from the
// nomination to the winner, are observed once each write is applied, on the dispatcher's clock; the
// winner's time is kept for the workload controller, which times the Job's creation from it.
func TestPassTimesTheStepsOfADispatch(t *testing.T) {
	wl := makeHubWorkload("w", "q").Obj() // created at
	h := newHarness(t, at.Add(3*time.Second), append(hubObjects(), wl)...)
	h.d.Timeline = metrics.NewTimeline()
	nominatedBefore, nominatedSum := latency(t, metrics.StepCreatedToNominated)
	wonBefore, wonSum := latency(t, metrics.StepNominatedToWinner)

	h.pass()
	if st := h.status("w"); st.DispatchEpoch != 1 {
		t.Fatalf("not nominated: %+v", st)
	}
	if n, sum := latency(t, metrics.StepCreatedToNominated); n != nominatedBefore+1 || sum-nominatedSum != 3 {
		t.Errorf("created_to_nominated: %d observations adding %v s, want one of 3 s", n-nominatedBefore, sum-nominatedSum)
	}
	h.copies.byName["w1/w"] = hubtest.MakeCopyOf(wl, 1).Admitted().Since(at.Time).Obj()
	h.clock.Step(1500 * time.Millisecond)
	h.pass()
	if st := h.status("w"); st.ClusterName != "w1" {
		t.Fatalf("no winner: %+v", st)
	}
	if n, sum := latency(t, metrics.StepNominatedToWinner); n != wonBefore+1 || sum-wonSum != 1.5 {
		t.Errorf("nominated_to_winner: %d observations adding %v s, want one of 1.5 s", n-wonBefore, sum-wonSum)
	}
	h.clock.Step(250 * time.Millisecond)
	if since, ok := h.d.Timeline.JobCreated(wl.UID, h.clock.Now()); !ok || since != 250*time.Millisecond {
		t.Errorf("time since the winner: %v %v, want 250ms", since, ok)
	}
}

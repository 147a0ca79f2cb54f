package dispatch

import (
	"math"
	"testing"
	"time"
)

// A queue that started a job of 8 GPUs an hour for six hours (and others of other shapes), with one
// more of 8 ahead, starts the job in about two hours, within the Gamma quantiles; a shape it started
// none of gets no forecast.
func TestForecastStart(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	var starts []Start
	for h := range 6 {
		starts = append(starts, Start{At: now.Add(-time.Duration(h)*time.Hour - time.Minute), GPUs: 8},
			Start{At: now.Add(-time.Duration(h) * time.Hour), GPUs: 1})
	}
	starts = append(starts, Start{At: now.Add(-7 * time.Hour), GPUs: 8}) // before the window
	f := ForecastStart(starts, 7, 2, now)                                // 7 GPUs: the shape of 8
	if !f.Known || math.Abs(f.Rate-1) > 1e-9 || f.Likely != 2*time.Hour {
		t.Fatalf("forecast %+v; want a job of its shape an hour, likely in 2h", f)
	}
	if !(f.Early < f.Likely && f.Likely < f.Late) || f.Early < 20*time.Minute || f.Late > 4*time.Hour {
		t.Errorf("range %v..%v around %v", f.Early, f.Late, f.Likely)
	}
	if f := ForecastStart(starts, 32, 1, now); f.Known {
		t.Errorf("no start of 32 GPUs: %+v", f)
	}
}

func TestShape(t *testing.T) {
	for gpus, want := range map[int64]int{0: 0, 1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 8: 3, 9: 4, 32: 5} {
		if got := Shape(gpus); got != want {
			t.Errorf("Shape(%d) = %d, want %d", gpus, got, want)
		}
	}
}

// The approximation of the Gamma quantiles is close to known values (shape 1: the exponential).
func TestGammaQuantile(t *testing.T) {
	for _, tc := range []struct{ k, q, want, tol float64 }{
		{1, 0.5, math.Ln2, 0.02}, {1, 0.9, -math.Log(0.1), 0.05}, {10, 0.5, 9.6687, 0.01}, {10, 0.9, 14.2060, 0.02},
	} {
		if got := gammaQuantile(tc.k, tc.q); math.Abs(got-tc.want) > tc.tol*tc.want {
			t.Errorf("gammaQuantile(%v, %v) = %v, want %v", tc.k, tc.q, got, tc.want)
		}
	}
}

// StartedRecently counts the starts of the job's shape in the window, per cluster.
func TestStartedRecently(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	starts := []Start{
		{At: now.Add(-time.Hour), Cluster: "a", GPUs: 8}, {At: now.Add(-2 * time.Hour), Cluster: "a", GPUs: 5},
		{At: now.Add(-time.Hour), Cluster: "b", GPUs: 8}, {At: now.Add(-time.Hour), Cluster: "b", GPUs: 1},
		{At: now.Add(-7 * time.Hour), Cluster: "c", GPUs: 8}, {At: now.Add(time.Minute), Cluster: "c", GPUs: 8},
	}
	got := StartedRecently(starts, 6, now)
	if len(got) != 2 || got["a"] != 2 || got["b"] != 1 {
		t.Errorf("started recently %v; want a:2 b:1 (c's are outside the window)", got)
	}
}

// QueuePosition counts the pending workloads of the GlobalQueue before it, in queue order, and those of
// its shape among them; admitted ones and other queues' do not count.
func TestQueuePosition(t *testing.T) {
	w := makeWorkload("ns/w", "q").gpuPods(1, 8).createdAt(5).obj()
	s := makeSnapshot().workloads(
		makeWorkload("ns/older8", "q").gpuPods(1, 7).createdAt(1).obj(),
		makeWorkload("ns/older1", "q").gpuPods(1, 1).createdAt(2).obj(),
		makeWorkload("ns/urgent", "q").gpuPods(1, 8).createdAt(9).priority(5).obj(),
		makeWorkload("ns/newer", "q").gpuPods(1, 8).createdAt(9).obj(),
		makeWorkload("ns/running", "q").gpuPods(1, 8).admittedOn("a").obj(),
		makeWorkload("ns/other", "r").gpuPods(1, 8).obj(),
		w).obj()
	position, pending, ahead := QueuePosition(s, w)
	if position != 4 || pending != 5 || ahead != 3 {
		t.Errorf("position %d of %d, %d of its shape ahead; want 4 of 5, 3 (older8, urgent, itself)", position, pending, ahead)
	}
}

// A queue whose room is full starts one job as one ends: with 4 jobs of the shape running and those
// that ended having run 30 minutes, it starts 8 an hour, whatever it started earlier in the window.
func TestForecastStartFromTheJobsRunning(t *testing.T) {
	now := t0.Add(24 * time.Hour)
	starts := []Start{
		{At: now.Add(-5 * time.Hour), Ended: now.Add(-5*time.Hour + 30*time.Minute), GPUs: 1},
		{At: now.Add(-2 * time.Hour), Ended: now.Add(-2*time.Hour + 30*time.Minute), GPUs: 1},
		{At: now.Add(-time.Hour), Ended: now.Add(-time.Hour + 20*time.Minute), GPUs: 8}, // another shape
	}
	for i := range 4 {
		starts = append(starts, Start{At: now.Add(-time.Duration(i+1) * time.Minute), GPUs: 1})
	}
	f := ForecastStart(starts, 1, 4, now)
	if !f.Known || math.Abs(f.Rate-8) > 1e-9 || f.Likely != 30*time.Minute {
		t.Errorf("forecast %+v; want 8 an hour (4 running, 30 min each), likely in 30 min", f)
	}
}

package dispatch

import (
	"math"
	"math/bits"
	"time"
)

// Start is a job its GlobalQueue started: when, where, its GPUs, and when it ended (zero while it runs).
type Start struct {
	At, Ended time.Time
	Cluster   string
	GPUs      int64
}

// Forecast is when a waiting job will most likely start: Likely, within [Early, Late] with the
// probability ForecastCoverage under the model's assumptions. Known is false when the queue started no
// job of its shape in the window it is made from: then nothing is said.
type Forecast struct {
	Known               bool
	Early, Likely, Late time.Duration
	// Rate is the jobs of its shape the queue started per hour in the window; Ahead the jobs of its
	// shape that start before it, its own included.
	Rate  float64
	Ahead int
}

// ForecastWindow is how far back a forecast reads the queue's starts; ForecastCoverage the probability
// its range is meant to hold.
const (
	ForecastWindow   = 6 * time.Hour
	ForecastCoverage = 0.8
)

// Shape is the size class of a job for forecasts: its GPUs rounded up to a power of two (0 without
// GPUs). Jobs of one shape wait for room of one size, and pass one another only in queue order.
func Shape(gpus int64) int {
	if gpus <= 0 {
		return 0
	}
	return bits.Len64(uint64(gpus - 1))
}

// ForecastStart forecasts when a job of gpus GPUs will start, from the queue's starts in the
// ForecastWindow before now and the jobs of its shape ahead of it in the queue (ahead, its own
// included). The queue is taken to go on starting jobs of the shape at the rate it does (startRate), a
// Poisson process: the time to start ahead of them is Gamma-distributed, its mean ahead over the rate,
// and the range its quantiles around ForecastCoverage. It says nothing of a shape the queue did not
// start in the window. A job that would be dispatched now needs no forecast: WhatIf says so.
func ForecastStart(starts []Start, gpus int64, ahead int, now time.Time) Forecast {
	rate := startRate(starts, Shape(gpus), now)
	if rate == 0 || ahead < 1 {
		return Forecast{Ahead: ahead}
	}
	in := func(q float64) time.Duration {
		return time.Duration(gammaQuantile(float64(ahead), q) / rate * float64(time.Hour))
	}
	return Forecast{Known: true, Early: in((1 - ForecastCoverage) / 2), Likely: time.Duration(float64(ahead) / rate * float64(time.Hour)),
		Late: in(1 - (1-ForecastCoverage)/2), Rate: rate, Ahead: ahead}
}

// startRate is how many jobs of the shape an hour the queue starts, from its starts in the window. A
// job waits when the queue's room is full, and then one starts as one ends: the rate is the jobs of the
// shape running now over the mean time those that ended in the window ran (Little's law), when both
// are known. Else it is the starts over the window, or over the time since the first of them when that
// came late in it (a queue that has just begun).
func startRate(starts []Start, shape int, now time.Time) float64 {
	n, running, ended := 0, 0, 0
	var ran time.Duration
	first := now
	for _, s := range starts {
		if Shape(s.GPUs) != shape || !s.At.After(now.Add(-ForecastWindow)) || s.At.After(now) {
			continue
		}
		n++
		first = minTime(first, s.At)
		switch {
		case s.Ended.IsZero() || s.Ended.After(now):
			running++
		default:
			ended++
			ran += s.Ended.Sub(s.At)
		}
	}
	if running > 0 && ended > 0 && ran > 0 {
		return float64(running) / (ran.Hours() / float64(ended))
	}
	if n == 0 {
		return 0
	}
	span := max(now.Sub(first), time.Minute)
	if span > ForecastWindow/2 {
		span = ForecastWindow
	}
	return float64(n) / span.Hours()
}

// StartedRecently counts, per cluster, the starts of jobs of the shape of gpus GPUs in the
// ForecastWindow before now: where the queue has been starting jobs like it.
func StartedRecently(starts []Start, gpus int64, now time.Time) map[string]int {
	shape, out := Shape(gpus), map[string]int{}
	for _, s := range starts {
		if Shape(s.GPUs) == shape && s.At.After(now.Add(-ForecastWindow)) && !s.At.After(now) {
			out[s.Cluster]++
		}
	}
	return out
}

// QueuePosition is where the pending workload w stands in its GlobalQueue of the snapshot, in the order
// the dispatcher takes them (CompareInQueue): its position counting from 1 among the pending, how many
// are pending, and how many of its shape (Shape) come before it, itself included (ForecastStart's ahead).
func QueuePosition(s *Snapshot, w *Workload) (position, pending, aheadOfShape int) {
	position, pending, aheadOfShape = 1, 0, 1
	for _, o := range s.Workloads {
		if o.Phase != Pending || o.GlobalQueue != w.GlobalQueue {
			continue
		}
		pending++
		if o != w && CompareInQueue(o, w) < 0 {
			position++
			if Shape(o.GPU.Total) == Shape(w.GPU.Total) {
				aheadOfShape++
			}
		}
	}
	return position, pending, aheadOfShape
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// gammaQuantile is the q-quantile of the Gamma distribution of shape k and scale 1, by the
// Wilson-Hilferty approximation, close for k of 1 and more.
func gammaQuantile(k, q float64) float64 {
	z := math.Sqrt2 * math.Erfinv(2*q-1)
	c := 1 / (9 * k)
	return k * math.Pow(max(1-c+z*math.Sqrt(c), 0), 3)
}

// Package scrape reads what Gantry's processes and the API servers publish on /metrics, for the
// benchmark (test/e2e/bench) and the scale harness (test/scale): counters and gauges summed over the
// series whose labels match, and histograms to difference and summarize.
package scrape

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families is one scrape of a Prometheus endpoint, by metric name.
type Families map[string]*dto.MetricFamily

// Parse reads the Prometheus text format.
func Parse(r io.Reader) (Families, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}

// HTTP reads the /metrics of a process listening on addr (host:port).
func HTTP(ctx context.Context, addr string) (Families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET http://%s/metrics: %s", addr, resp.Status)
	}
	return Parse(resp.Body)
}

// Series calls f with the labels and value of each counter, gauge or untyped series of the metric whose
// labels match (pairs of name and value; an empty value matches any).
func (f Families) Series(name string, fn func(labels map[string]string, value float64), match ...string) {
	mf := f[name]
	if mf == nil {
		return
	}
	for _, m := range mf.Metric {
		if !labelsMatch(m, match) {
			continue
		}
		labels := make(map[string]string, len(m.Label))
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		fn(labels, m.GetCounter().GetValue()+m.GetGauge().GetValue()+m.GetUntyped().GetValue())
	}
}

// Sum adds up the metric's series whose labels match.
func (f Families) Sum(name string, match ...string) float64 {
	total := 0.0
	f.Series(name, func(_ map[string]string, v float64) { total += v }, match...)
	return total
}

// By adds up the metric's series whose labels match, by the value of one label.
func (f Families) By(name, label string, match ...string) map[string]float64 {
	out := map[string]float64{}
	f.Series(name, func(labels map[string]string, v float64) { out[labels[label]] += v }, match...)
	return out
}

// Change is what counters read by By went up by between two scrapes, per label value, divided by per.
func Change(before, after map[string]float64, per float64) map[string]float64 {
	out := make(map[string]float64, len(after))
	for k, v := range after {
		out[k] = (v - before[k]) / per
	}
	return out
}

func labelsMatch(m *dto.Metric, match []string) bool {
	for i := 0; i+1 < len(match); i += 2 {
		found := false
		for _, l := range m.Label {
			if l.GetName() == match[i] && (match[i+1] == "" || l.GetValue() == match[i+1]) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Histogram is one histogram's cumulative buckets, count and sum, over the series that matched.
type Histogram struct {
	Bounds []float64
	Counts []uint64 // cumulative, per bound
	Count  uint64
	Sum    float64
}

// Histogram adds up the histogram's series whose labels match.
func (f Families) Histogram(name string, match ...string) Histogram {
	var h Histogram
	mf := f[name]
	if mf == nil {
		return h
	}
	for _, m := range mf.Metric {
		if !labelsMatch(m, match) || m.Histogram == nil {
			continue
		}
		h.Count += m.Histogram.GetSampleCount()
		h.Sum += m.Histogram.GetSampleSum()
		for i, b := range m.Histogram.Bucket {
			if len(h.Bounds) <= i {
				h.Bounds, h.Counts = append(h.Bounds, b.GetUpperBound()), append(h.Counts, 0)
			}
			h.Counts[i] += b.GetCumulativeCount()
		}
	}
	return h
}

// Since is what the histogram observed after before.
func (h Histogram) Since(before Histogram) Histogram {
	out := Histogram{Bounds: h.Bounds, Count: h.Count - before.Count, Sum: h.Sum - before.Sum}
	for i, c := range h.Counts {
		if i < len(before.Counts) {
			c -= before.Counts[i]
		}
		out.Counts = append(out.Counts, c)
	}
	return out
}

// Mean is the mean observation of a histogram of seconds.
func (h Histogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return seconds(h.Sum / float64(h.Count))
}

// Quantile of a histogram of seconds says "<= b", b the upper bound of the bucket holding the q-th
// observation (an upper estimate), or "> b" of the last bound when it lies beyond.
func (h Histogram) Quantile(q float64) string {
	if h.Count == 0 || len(h.Bounds) == 0 {
		return "none"
	}
	rank := uint64(math.Ceil(q * float64(h.Count)))
	for i, c := range h.Counts {
		if c >= rank && !math.IsInf(h.Bounds[i], 1) {
			return "<= " + ms(seconds(h.Bounds[i]))
		}
	}
	last := h.Bounds[len(h.Bounds)-1]
	if math.IsInf(last, 1) && len(h.Bounds) > 1 {
		last = h.Bounds[len(h.Bounds)-2]
	}
	return "> " + ms(seconds(last))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"
)

// families is one scrape of a Prometheus endpoint.
type families map[string]*dto.MetricFamily

func parseFamilies(r io.Reader) (families, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}

// scrapeHTTP reads a process's /metrics.
func scrapeHTTP(ctx context.Context, addr string) (families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	return parseFamilies(resp.Body)
}

// scrapeAPIServer reads an API server's /metrics.
func scrapeAPIServer(ctx context.Context, s *apiServer) (families, error) {
	rc, err := restClient(s)
	if err != nil {
		return nil, err
	}
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading /metrics of %s: %w", s.name, err)
	}
	return parseFamilies(bytes.NewReader(raw))
}

// sum adds the values of a counter or gauge family over the series whose labels match every pair of
// match (name, value; an empty value matches any).
func (f families) sum(name string, match ...string) float64 {
	mf := f[name]
	if mf == nil {
		return 0
	}
	total := 0.0
	for _, m := range mf.Metric {
		if !labelsMatch(m, match) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Untyped != nil:
			total += m.Untyped.GetValue()
		}
	}
	return total
}

// by adds a family's values per value of one label.
func (f families) by(name, label string, match ...string) map[string]float64 {
	out := map[string]float64{}
	mf := f[name]
	if mf == nil {
		return out
	}
	for _, m := range mf.Metric {
		if !labelsMatch(m, match) {
			continue
		}
		key := ""
		for _, l := range m.Label {
			if l.GetName() == label {
				key = l.GetValue()
			}
		}
		out[key] += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
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

// histogram is one histogram's cumulative buckets, count and sum.
type histogram struct {
	bounds []float64
	counts []uint64 // cumulative, per bound
	count  uint64
	sum    float64
}

func (f families) histogram(name string, match ...string) histogram {
	var h histogram
	mf := f[name]
	if mf == nil {
		return h
	}
	for _, m := range mf.Metric {
		if !labelsMatch(m, match) || m.Histogram == nil {
			continue
		}
		h.count += m.Histogram.GetSampleCount()
		h.sum += m.Histogram.GetSampleSum()
		for i, b := range m.Histogram.Bucket {
			if len(h.bounds) <= i {
				h.bounds, h.counts = append(h.bounds, b.GetUpperBound()), append(h.counts, 0)
			}
			h.counts[i] += b.GetCumulativeCount()
		}
	}
	return h
}

// since is what the histogram observed after before.
func (h histogram) since(before histogram) histogram {
	out := histogram{bounds: h.bounds, count: h.count - before.count, sum: h.sum - before.sum}
	for i, c := range h.counts {
		if i < len(before.counts) {
			c -= before.counts[i]
		}
		out.counts = append(out.counts, c)
	}
	return out
}

func (h histogram) mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return seconds(h.sum / float64(h.count))
}

// quantile says "<= b", b the upper bound of the bucket holding the q-th observation (an upper
// estimate), or "> b" of the last bound when it lies beyond.
func (h histogram) quantile(q float64) string {
	if h.count == 0 || len(h.bounds) == 0 {
		return "none"
	}
	rank := uint64(math.Ceil(q * float64(h.count)))
	for i, c := range h.counts {
		if c >= rank && !math.IsInf(h.bounds[i], 1) {
			return "<= " + ms(seconds(h.bounds[i]))
		}
	}
	last := h.bounds[len(h.bounds)-1]
	if math.IsInf(last, 1) && len(h.bounds) > 1 {
		last = h.bounds[len(h.bounds)-2]
	}
	return "> " + ms(seconds(last))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// usage is a process's CPU time and memory as the kernel counts them.
type usage struct {
	cpu      time.Duration
	rss, hwm uint64 // resident set now and at its peak, bytes
}

func usageOf(pid int) (usage, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return usage{}, err
	}
	stat, err := p.Stat()
	if err != nil {
		return usage{}, err
	}
	status, err := p.NewStatus()
	if err != nil {
		return usage{}, err
	}
	return usage{cpu: seconds(stat.CPUTime()), rss: uint64(stat.ResidentMemory()), hwm: status.VmHWM}, nil
}

// usageOfAll adds the usage of several processes (the agents).
func usageOfAll(ps []*process) (usage, error) {
	var total usage
	for _, p := range ps {
		u, err := usageOf(p.pid())
		if err != nil {
			return usage{}, err
		}
		total.cpu += u.cpu
		total.rss += u.rss
		total.hwm += u.hwm
	}
	return total, nil
}

// heap is the hub's Go heap after a collection: the profiling endpoint collects before it answers a
// heap profile with gc=1, and the metrics then read the heap as it is.
func heapAfterGC(ctx context.Context, hub *process) (inuse float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hub.pprof+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	f, err := scrapeHTTP(ctx, hub.metrics)
	if err != nil {
		return 0, err
	}
	return f.sum("go_memstats_heap_inuse_bytes"), nil
}

// percentile of durations, nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(i, 0)]
}

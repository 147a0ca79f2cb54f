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

	"github.com/prometheus/procfs"

	"github.com/gantry-dev/gantry/test/scrape"
)

// scrapeAPIServer reads an API server's /metrics.
func scrapeAPIServer(ctx context.Context, s *apiServer) (scrape.Families, error) {
	rc, err := restClient(s)
	if err != nil {
		return nil, err
	}
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading /metrics of %s: %w", s.name, err)
	}
	return scrape.Parse(bytes.NewReader(raw))
}

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
	return usage{cpu: time.Duration(stat.CPUTime() * float64(time.Second)), rss: uint64(stat.ResidentMemory()), hwm: status.VmHWM}, nil
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
	f, err := scrape.HTTP(ctx, hub.metrics)
	if err != nil {
		return 0, err
	}
	return f.Sum("go_memstats_heap_inuse_bytes"), nil
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

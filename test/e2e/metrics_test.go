package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// series is one sample of a scrape: its labels and value.
type series struct {
	labels map[string]string
	value  float64
}

// scrape is a program's /metrics, by metric name.
type scrape map[string][]series

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// scrapeProcess reads the metrics of one of the testbed's Gantry processes, at the address its
// command line gives.
func scrapeProcess(name string) (scrape, error) {
	p, err := tb.Process(name)
	if err != nil {
		return nil, err
	}
	i := slices.Index(p.Args, "--metrics-bind-address")
	if i < 0 || i+1 >= len(p.Args) {
		return nil, fmt.Errorf("%s has no --metrics-bind-address", name)
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + p.Args[i+1] + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s /metrics: %s", name, resp.Status)
	}
	return parseScrape(resp.Body)
}

func parseScrape(r io.Reader) (scrape, error) {
	out := scrape{}
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for s.Scan() {
		m := sampleLine.FindStringSubmatch(s.Text())
		if m == nil {
			continue // comments, blank lines
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s.Text(), err)
		}
		l := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			l[p[1]] = p[2]
		}
		out[m[1]] = append(out[m[1]], series{labels: l, value: v})
	}
	return out, s.Err()
}

// sum adds up the samples of name whose labels include match ("k=v" each).
func (s scrape) sum(name string, match ...string) float64 {
	total := 0.0
	for _, x := range s[name] {
		ok := true
		for _, kv := range match {
			k, v, _ := strings.Cut(kv, "=")
			ok = ok && x.labels[k] == v
		}
		if ok {
			total += x.value
		}
	}
	return total
}

// checkFleetMetrics checks, after at least n jobs ran on the workers, that the hub's and the agents'
// /metrics serve the fleet's state and the dispatch's events with plausible values.
func checkFleetMetrics(t *testing.T, n int) {
	t.Helper()
	eventually(t, "the hub's and the agents' metrics", 30*time.Second, poll, func() error {
		hub, err := scrapeProcess("gantry-hub")
		if err != nil {
			return err
		}
		now := float64(time.Now().Unix())
		for _, w := range tb.Workers {
			c := "cluster=" + w.Name
			switch {
			case hub.sum("gantry_hub_worker_cluster_connected", c, "reason=Connected") != 1:
				return fmt.Errorf("%s not connected: %v", w.Name, hub["gantry_hub_worker_cluster_connected"])
			case hub.sum("gantry_hub_worker_cluster_agent_ready", c) != 1:
				return fmt.Errorf("%s's agent not ready: %v", w.Name, hub["gantry_hub_worker_cluster_agent_ready"])
			case hub.sum("gantry_hub_worker_cluster_lease_age_seconds", c) > 60 || len(hub["gantry_hub_worker_cluster_lease_age_seconds"]) == 0:
				return fmt.Errorf("hub lease on %s: %v", w.Name, hub["gantry_hub_worker_cluster_lease_age_seconds"])
			case now-hub.sum("gantry_hub_worker_cluster_last_contact_timestamp_seconds", c) > 120:
				return fmt.Errorf("last contact with %s: %v", w.Name, hub["gantry_hub_worker_cluster_last_contact_timestamp_seconds"])
			case hub.sum("gantry_hub_worker_cluster_gpus_allocatable", c) <= 0:
				return fmt.Errorf("no GPUs on %s: %v", w.Name, hub["gantry_hub_worker_cluster_gpus_allocatable"])
			}
		}
		count := hub.sum("gantry_hub_dispatch_latency_seconds_count", "step=created_to_job_created")
		mean := hub.sum("gantry_hub_dispatch_latency_seconds_sum", "step=created_to_job_created") / count
		switch f := float64(n); {
		case hub.sum("gantry_hub_workloads", "state=finished") < f:
			return fmt.Errorf("finished workloads: %v", hub["gantry_hub_workloads"])
		case count < f || mean <= 0 || mean > 240:
			return fmt.Errorf("end-to-end dispatch latency: %v observations, mean %v s", count, mean)
		case hub.sum("gantry_hub_dispatch_latency_seconds_count", "step=winner_to_job_created") < f:
			return fmt.Errorf("winner to Job: %v", hub["gantry_hub_dispatch_latency_seconds_count"])
		case hub.sum("gantry_hub_cluster_winners_total") < f:
			return fmt.Errorf("winners: %v", hub["gantry_hub_cluster_winners_total"])
		case hub.sum("gantry_hub_api_writes_total", "target=worker", "verb=create", "resource=jobs") < f:
			return fmt.Errorf("Job creates on workers: %v", hub["gantry_hub_api_writes_total"])
		case hub.sum("gantry_hub_api_writes_total", "target=hub", "resource=workloads/status") < f:
			return fmt.Errorf("Workload status writes on the hub: %v", hub["gantry_hub_api_writes_total"])
		}
		placed := 0.0
		for _, w := range tb.Workers {
			agent, err := scrapeProcess("gantry-agent-" + strings.TrimPrefix(w.Name, "worker-"))
			if err != nil {
				return err
			}
			placed += agent.sum("gantry_agent_placement_duration_seconds_count")
			if len(agent["gantry_agent_reservations"]) != 1 {
				return fmt.Errorf("%s's agent exports no reservations gauge", w.Name)
			}
		}
		if placed < float64(n) {
			return fmt.Errorf("placements timed by the agents: %v, want at least %d", placed, n)
		}
		return nil
	})
}

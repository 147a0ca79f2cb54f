package main

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/procfs"

	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/test/scrape"
)

// report is what a run measured.
type report struct {
	o options
	// emptyStart is the time from starting the hub to its caches synced with nothing to hold;
	// emptyHub its memory then.
	emptyStart time.Duration
	emptyHub   memory
	// perConnection is what one real worker's connection adds to the hub, perMemoryConnection one
	// in-memory worker's; watches the watches the hub opens on a worker, by resource, counted on the
	// worker watchesOn names (a real one when there is one).
	perConnection, perMemoryConnection memory
	watches                            map[string]float64
	watchesOn                          string
	depths                             []depthRow
	// fullStart is the time from starting the hub over the whole queue to its caches synced,
	// fullFirstPass to its first dispatch pass; fullHub its memory once it stopped writing.
	fullStart, fullFirstPass time.Duration
	// fullCaughtUp is the time to its controllers' queues empty, fullCPU the hub's CPU until then.
	fullCaughtUp, fullCPU time.Duration
	fullHub               memory
	drain                 drainRow
	peakRSS               uint64
}

func newReport(o options) *report { return &report{o: o} }

// depthRow is one queue depth: how long the queue took to fill and the hub to settle, the probes'
// latencies, the passes during the probes, the hub's memory.
type depthRow struct {
	depth              int
	submitted, settled time.Duration
	latencies          []time.Duration
	passes             scrape.Histogram
	memory             memory
}

// drainRow is the drain of the queue and what each job cost.
type drainRow struct {
	jobs int
	// whole says the drain took the whole queue, not the first -drain jobs.
	whole  bool
	took   time.Duration
	passes scrape.Histogram
	// realJobs and memoryJobs are the jobs that reached real and in-memory workers during the drain: the
	// measured ones and those dispatched alongside them.
	realJobs, memoryJobs int
	// per job that reached a worker: CPU of the hub, and of the real workers' agents per job that ran there; writes the hub
	// sent to the hub and to workers; the real workers' agents' writes per job that ran there (their API
	// servers' count less the hub's and the player's), the in-memory workers' agents' likewise.
	hubCPU, agentCPU time.Duration
	// uncut is how many of the drain's passes were planned again with a queue's tail they had cut.
	uncut                              int
	hubToHub, hubToWorkers, agentWrite float64
	memoryAgentWrite                   float64
	// hubToHubByKind is hubToHub by verb and resource, the largest first ("PUT workloads/status 4.1").
	hubToHubByKind []string
	// nominations are the nominations persisted per job, by reach (Candidates, Alone, Widened).
	nominations map[string]float64
	// harnessCPU is this process's CPU per job: what the in-memory workers take of the machine.
	harnessCPU time.Duration
}

func (d *drainRow) measure(before, after costs, total int, realWorkers, memoryWorkers []string) {
	d.realJobs = sumOver(after.arrived, realWorkers) - sumOver(before.arrived, realWorkers)
	d.memoryJobs = sumOver(after.arrived, memoryWorkers) - sumOver(before.arrived, memoryWorkers)
	// The costs are of every job dispatched meanwhile: with many workers, more than the measured ones
	// reach a worker before the last of those does.
	n := float64(max(total, d.realJobs+d.memoryJobs))
	d.passes = after.hubMetrics.Histogram(passMetric).Since(before.hubMetrics.Histogram(passMetric))
	d.uncut = int(after.hubMetrics.Sum(uncutMetric) - before.hubMetrics.Sum(uncutMetric))
	d.hubCPU = time.Duration(float64(after.hub.cpu-before.hub.cpu) / n)
	d.harnessCPU = time.Duration(float64(after.harness.cpu-before.harness.cpu) / n)
	hubWrites := func(m scrape.Families, target string) float64 {
		return m.Sum("gantry_hub_api_writes_total", "target", target)
	}
	d.hubToHub = (hubWrites(after.hubMetrics, "hub") - hubWrites(before.hubMetrics, "hub")) / n
	d.hubToWorkers = (hubWrites(after.hubMetrics, "worker") - hubWrites(before.hubMetrics, "worker")) / n
	d.hubToHubByKind = writesByKind(before.hubMetrics, after.hubMetrics, n)
	d.nominations = scrape.Change(before.hubMetrics.By(nominationsMetric, "reach"), after.hubMetrics.By(nominationsMetric, "reach"), n)
	players := sumOver(after.playerWrites, realWorkers) - sumOver(before.playerWrites, realWorkers)
	hubToReal := 0.0
	for _, w := range realWorkers {
		hubToReal += after.hubMetrics.Sum("gantry_hub_api_writes_total", "target", "worker", "cluster", w) -
			before.hubMetrics.Sum("gantry_hub_api_writes_total", "target", "worker", "cluster", w)
	}
	if d.realJobs > 0 {
		jobs := float64(d.realJobs)
		d.agentCPU = time.Duration(float64(after.agents.cpu-before.agents.cpu) / jobs)
		d.agentWrite = (after.realWrites - before.realWrites - hubToReal - float64(players)) / jobs
	}
	if d.memoryJobs > 0 {
		d.memoryAgentWrite = (after.memoryAgentWrites - before.memoryAgentWrites) / float64(d.memoryJobs)
	}
}

// writesByKind is what the hub wrote to the hub between two scrapes, per job, by verb and resource,
// the largest first, leaving out kinds under 0.05 per job.
func writesByKind(before, after scrape.Families, n float64) []string {
	count := func(m scrape.Families) map[string]float64 {
		out := map[string]float64{}
		m.Series("gantry_hub_api_writes_total", func(l map[string]string, v float64) { out[l["verb"]+" "+l["resource"]] += v }, "target", "hub")
		return out
	}
	b, a := count(before), count(after)
	kinds := slices.Collect(maps.Keys(a))
	sort.Slice(kinds, func(i, j int) bool { return a[kinds[i]]-b[kinds[i]] > a[kinds[j]]-b[kinds[j]] })
	var out []string
	for _, k := range kinds {
		if per := (a[k] - b[k]) / n; per >= 0.05 {
			out = append(out, fmt.Sprintf("%s %.1f", k, per))
		}
	}
	return out
}

// sumOver adds the counts of the workers.
func sumOver(counts map[string]int, workers []string) int {
	sum := 0
	for _, w := range workers {
		sum += counts[w]
	}
	return sum
}

const mib = 1 << 20

func (r *report) print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("Gantry at scale: %s; the real gantry-hub; one-GPU Jobs running %s each on a worker.", r.fleet(), r.o.runtime)
	p("The agents run without a placement timeout: the harness runs Jobs without pods.")
	p("Machine: %s.", machine())
	if r.o.hubMemoryLimit != "" {
		p("The hub's soft memory limit (GOMEMLIMIT): %s.", r.o.hubMemoryLimit)
	}
	p("")
	p("| measure | value | target |")
	p("| --- | --- | --- |")
	p("| hub start to caches synced, empty | %s | |", r.emptyStart.Round(time.Millisecond))
	p("| hub memory, empty: RSS / Go heap | %.0f / %.0f MiB | |", r.emptyHub.rss/mib, r.emptyHub.heap/mib)
	if r.o.workers > 0 {
		p("| one worker connection, real (mean of %d): hub RSS / Go heap | %.1f / %.1f MiB | < 20 MiB |", r.o.workers, r.perConnection.rss/mib, r.perConnection.heap/mib)
	}
	if r.o.memoryWorkers > 0 {
		p("| one worker connection, in-memory (mean of %d): hub RSS / Go heap | %.1f / %.1f MiB | < 20 MiB |", r.o.memoryWorkers,
			r.perMemoryConnection.rss/mib, r.perMemoryConnection.heap/mib)
	}
	p("| watches the hub opens on a worker (%s) | %s | only Gantry's objects |", r.watchesOn, watchList(r.watches))
	for _, d := range r.depths {
		p("| %d queued: submitted / hub settled | %s / %s | |", d.depth, d.submitted.Round(time.Second), d.settled.Round(time.Second))
		p("| %d queued: dispatch latency p50 / p99 (%d jobs) | %s / %s | |", d.depth, len(d.latencies),
			ms(percentile(d.latencies, 50)), ms(percentile(d.latencies, 99)))
		p("| %d queued: dispatch pass mean / p99 (%d passes) | %s / %s | < 100 ms |", d.depth, d.passes.Count,
			ms(d.passes.Mean()), d.passes.Quantile(0.99))
		p("| %d queued: hub RSS / Go heap | %.0f / %.0f MiB | < 2 GiB |", d.depth, d.memory.rss/mib, d.memory.heap/mib)
	}
	if r.fullStart > 0 {
		depth := r.o.depths[len(r.o.depths)-1]
		p("| hub restart over %d queued: caches synced / first pass | %s / %s | < 60 s |", depth, r.fullStart.Round(time.Millisecond), r.fullFirstPass.Round(time.Millisecond))
		p("| hub restart over %d queued: controllers caught up (every Job and Workload looked at) / hub CPU until then | %s / %.1f s | |",
			depth, r.fullCaughtUp.Round(time.Millisecond), r.fullCPU.Seconds())
		p("| hub restart over %d queued: RSS / Go heap | %.0f / %.0f MiB | < 2 GiB |", depth, r.fullHub.rss/mib, r.fullHub.heap/mib)
	}
	if d := r.drain; d.jobs > 0 {
		what := "the whole queue"
		if !d.whole {
			what = "the first of the queue"
		}
		p("| drain, %s: %d jobs dispatched in | %s (%.1f jobs/s) | |", what, d.jobs, d.took.Round(time.Second), float64(d.jobs)/d.took.Seconds())
		p("| drain: dispatch pass mean / p99 (%d passes, %d planned again with a tail they had cut) | %s / %s | < 100 ms |",
			d.passes.Count, d.uncut, ms(d.passes.Mean()), d.passes.Quantile(0.99))
		p("| drain: jobs that reached real / in-memory workers meanwhile (the per-job figures below are per one of these) | %d / %d | |", d.realJobs, d.memoryJobs)
		p("| drain: CPU per job, hub + agents (real workers' gantry-agent, per job run there) | %s + %s = %s | < 5 ms |",
			ms(d.hubCPU), ms(d.agentCPU), ms(d.hubCPU+d.agentCPU))
		p("| drain: API writes per job, hub to hub / hub to workers / agents (real workers, per job run there) | %.1f / %.1f / %.1f | |",
			d.hubToHub, d.hubToWorkers, d.agentWrite)
		p("| drain: API writes per job, hub to hub, by kind | %s | |", strings.Join(d.hubToHubByKind, ", "))
		p("| drain: nominations per job, by reach (Candidates / Alone / Widened) | %.2f / %.2f / %.2f | |",
			d.nominations[dispatch.ReachCandidates], d.nominations[dispatch.ReachAlone], d.nominations[dispatch.ReachWidened])
		if r.o.memoryWorkers > 0 {
			p("| drain: API writes per job of the in-memory workers' agents (per job run there) | %.1f | |", d.memoryAgentWrite)
			p("| drain: CPU per job of the harness's process (the in-memory workers and their agents, the player of every worker) | %s | |", ms(d.harnessCPU))
		}
	}
	if r.peakRSS > 0 {
		p("| hub peak RSS | %.0f MiB | < 2 GiB |", float64(r.peakRSS)/mib)
	}
}

// fleet says what the workers of the run were.
func (r *report) fleet() string {
	if r.o.memoryWorkers == 0 {
		return fmt.Sprintf("%d real worker API servers (etcd and kube-apiserver, %d nodes of %d GPUs each, objects only) with the real gantry-agent",
			r.o.workers, r.o.nodes, r.o.gpus)
	}
	return fmt.Sprintf("%d real worker API servers, %s (etcd and kube-apiserver, %d nodes of %d GPUs each, objects only) with the real "+
		"gantry-agent, and %d in-memory workers, %s (test/scale/memworker: the API the hub uses on a worker, served in the harness's "+
		"process, the same nodes, Gantry's agent passes in process)",
		r.o.workers, workerSpan(1, r.o.workers), r.o.nodes, r.o.gpus, r.o.memoryWorkers, workerSpan(r.o.workers+1, r.o.memoryWorkers))
}

// workerSpan names n workers numbered from first.
func workerSpan(first, n int) string {
	switch n {
	case 0:
		return "none"
	case 1:
		return fmt.Sprintf("worker-%d", first)
	}
	return fmt.Sprintf("worker-%d to worker-%d", first, first+n-1)
}

func watchList(watches map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(watches)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, watches[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func machine() string {
	s := fmt.Sprintf("%d cores", runtime.NumCPU())
	if fs, err := procfs.NewDefaultFS(); err == nil {
		if mi, err := fs.Meminfo(); err == nil && mi.MemTotal != nil {
			s += fmt.Sprintf(", %.0f GiB", float64(*mi.MemTotal)/(1<<20))
		}
	}
	return s
}

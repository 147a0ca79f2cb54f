package main

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// Targets, and what Kueue MultiKueue v0.17.0 measured on this machine at its best configuration (the
// worker-client budget of later Kueue releases, raised concurrency), printed for comparison.
const (
	// targetThroughput is twice the 19.9 jobs/s another client measured through Gantry on 2026-12-06.
	targetThroughput = 40.0                  // jobs/s, at least
	targetSingleP50  = 40 * time.Millisecond // at most
	// targetBurstRatio bounds the burst's time through Gantry over its time posted straight to the workers.
	targetBurstRatio = 1.08
	// targetHubCPUPerJob and targetAgentsCPUPerJob bound the CPU the hub, and the agents together, spend
	// on one job, all its phases.
	targetHubCPUPerJob    = 10 * time.Millisecond
	targetAgentsCPUPerJob = 10 * time.Millisecond
	// targetExtraWrites bounds the writes a job costs through Gantry beyond those it costs posted straight
	// to a worker: half of the +21.6 measured on 2026-12-06.
	targetExtraWrites = 10.8
	kueueThroughput   = "4.0 jobs/s"
	kueueSingle       = "153 ms"
	kueueRequests     = "33-36 (default configuration)"
)

// phase is one measured stretch of the burst.
type phase struct {
	name     string
	window   time.Duration
	requests map[string]requestCounts
	events   eventCounts
}

type report struct {
	jobs        int
	podRuntime  time.Duration
	singles     []time.Duration
	singleTimes []jobTimes
	submitTime  time.Duration
	clusters    []string
	run, clean  phase
	idleRate    map[string]requestCounts
	burst       []jobTimes
	// hubCPU and agentsCPU are the CPU the hub and the agents used over the burst, both phases.
	hubCPU, agentsCPU time.Duration
	// hubRestCPU and agentsRestCPU are the CPU the hub and the agents use on the testbed at rest, in
	// seconds per second.
	hubRestCPU, agentsRestCPU float64
	// counted is what Gantry's metrics counted over the burst, both phases: the agents' and the hub's
	// passes, the hub's nominations by reach.
	counted gantryCounts
	// direct is the same burst posted straight to the workers.
	direct directBurst
}

// split divides a cluster's writes in a phase among their owners, per job.
func (r *report) split(p phase, cluster string) (all, gantry, kube, bench, idle float64) {
	hub := cluster == testbed.HubName
	var events float64
	for k, v := range p.requests[cluster] {
		all += v
		switch owner(hub, k) {
		case ownerGantry:
			gantry += v
		case ownerBench:
			bench += v
		case ownerEvents:
			events += v
		default:
			kube += v
		}
	}
	g := min(p.events[cluster][0], events)
	gantry += g
	kube += events - g
	for _, v := range r.idleRate[cluster] {
		idle += v * p.window.Seconds()
	}
	n := float64(r.jobs)
	return all / n, gantry / n, kube / n, bench / n, idle / n
}

// figures is what the report says about the burst, computed once: the headline summary, which is also
// recorded and set against the last recorded run, and what only the printed table shows.
type figures struct {
	summary
	// span runs from the first hub Job's creation to the last Job's creation on a worker.
	span time.Duration
	// gantryWrites are Gantry's own mutating requests per job, all clusters, both phases.
	gantryWrites float64
	// notOnce describes the jobs that were not created exactly once on the workers.
	notOnce []string
}

func (r *report) figures() figures {
	var f figures
	r.latencyFigures(&f)
	r.writeFigures(&f)
	jobs := figure(r.jobs)
	f.BurstComplete = figure(r.run.window.Seconds())
	f.DirectComplete = figure(r.direct.run.window.Seconds())
	f.CompleteRatio = ratio(f.BurstComplete, f.DirectComplete)
	f.HubCPUPerJob = ratio(millis(r.hubCPU), jobs)
	f.AgentsCPUPerJob = ratio(millis(r.agentsCPU), jobs)
	f.CPUPerJob = f.HubCPUPerJob + f.AgentsCPUPerJob
	// What they would have used over both phases at rest.
	window := (r.run.window + r.clean.window).Seconds()
	f.HubRestCPUPerJob = ratio(figure(r.hubRestCPU*window*1000), jobs)
	f.AgentsRestCPUPerJob = ratio(figure(r.agentsRestCPU*window*1000), jobs)
	f.AgentPassesPerJob = ratio(figure(r.counted.agentPasses), jobs)
	f.HubPassesPerJob = ratio(figure(r.counted.hubPasses), jobs)
	nominations := 0.0
	for _, n := range r.counted.nominations {
		nominations += n
	}
	f.NominationsPerJob = ratio(figure(nominations), jobs)
	f.AlonePerJob = ratio(figure(r.counted.nominations[dispatch.ReachAlone]), jobs)
	return f
}

// latencyFigures are the burst's throughput and latencies, and the single jobs' latency.
func (r *report) latencyFigures(f *figures) {
	var lat []time.Duration
	var first, last time.Time
	for _, t := range r.burst {
		lat = append(lat, t.workerCreated.Sub(t.hubCreated))
		if first.IsZero() || t.hubCreated.Before(first) {
			first = t.hubCreated
		}
		if t.workerCreated.After(last) {
			last = t.workerCreated
		}
		if t.creations != 1 {
			f.notOnce = append(f.notOnce, fmt.Sprintf("%d creations", t.creations))
		}
	}
	f.span = last.Sub(first)
	f.BurstThroughput = ratio(figure(r.jobs), figure(f.span.Seconds()))
	f.BurstP50 = millis(percentile(lat, 50))
	f.BurstP99 = millis(percentile(lat, 99))
	f.SingleP50 = millis(percentile(r.singles, 50))
}

// writeFigures are the mutating requests a job costs on all clusters, both phases, through Gantry and
// posted straight to the workers.
func (r *report) writeFigures(f *figures) {
	var all, own, direct float64
	for _, c := range r.clusters {
		a, g, _, _, _ := r.split(r.run, c)
		ca, cg, _, _, _ := r.split(r.clean, c)
		all += a + ca
		own += g + cg
		for _, p := range []phase{r.direct.run, r.direct.clean} {
			for _, v := range p.requests[c] {
				direct += v
			}
		}
	}
	f.gantryWrites = own
	f.WritesPerJob = figure(all)
	f.DirectWritesPerJob = ratio(figure(direct), figure(r.jobs))
	if f.DirectWritesPerJob > 0 {
		f.ExtraWritesPerJob = f.WritesPerJob - f.DirectWritesPerJob
	}
	f.WritesRatio = ratio(f.WritesPerJob, f.DirectWritesPerJob)
}

// print writes the report of the run whose figures are f (r.figures()).
func (r *report) print(w io.Writer, f figures) {
	fmt.Fprintf(w, "\nGantry dispatch benchmark: a burst of %d one-pod Jobs (cpu 100m, pods run %s) and %d single Jobs, on a hub and two kwok workers (%d CPUs here)\n\n",
		r.jobs, r.podRuntime, len(r.singles), runtime.NumCPU())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	singleP50 := fromMillis(f.SingleP50)
	fmt.Fprintln(tw, "\tGantry\ttarget\t\tKueue MultiKueue v0.17.0, best configuration")
	fmt.Fprintf(tw, "burst dispatch throughput\t%.1f jobs/s\t>= %.0f jobs/s\t%s\t%s\n", f.BurstThroughput, targetThroughput, verdict(f.BurstThroughput >= targetThroughput), kueueThroughput)
	fmt.Fprintf(tw, "burst latency p50 / p99\t%s / %s\t\t\t\n", ms(fromMillis(f.BurstP50)), ms(fromMillis(f.BurstP99)))
	fmt.Fprintf(tw, "single job latency p50 (%d runs)\t%s\t< %s\t%s\t%s\n", len(r.singles), ms(singleP50), ms(targetSingleP50), verdict(singleP50 < targetSingleP50), kueueSingle)
	fmt.Fprintf(tw, "mutating requests per job, all clusters\t%.1f\t\t\t%s\n", f.WritesPerJob, kueueRequests)
	fmt.Fprintf(tw, "  of which Gantry's own\t%.1f\t\t\t\n", f.gantryWrites)
	printAgainstDirect(tw, f)
	_ = tw.Flush()
	fmt.Fprintf(w, "\nLatency: hub Job created -> its Job created on the winner, both as seen by watches from this process.\n")
	fmt.Fprintf(w, "Throughput: %d jobs from the first hub Job creation to the last creation on a worker, %s; the client submitted them in %s.\n",
		r.jobs, ms(f.span), ms(r.submitTime))
	fmt.Fprintf(w, "Posted straight: the same %d Jobs created on the workers in turn by as many clients, without Gantry, until all\n"+
		"completed there (%s), then deleted (%s); Gantry's CPU is the hub's and the agents' over the burst and its deletion.\n",
		r.jobs, ms(r.direct.run.window), ms(r.direct.clean.window))
	fmt.Fprintf(w, "Single jobs, one after another, each after the previous completed: min %s, p50 %s, max %s.\n",
		ms(slices.Min(r.singles)), ms(singleP50), ms(slices.Max(r.singles)))
	if len(f.notOnce) > 0 {
		fmt.Fprintf(w, "WARNING: %d jobs were not created exactly once on the workers (%s)\n", len(f.notOnce), strings.Join(f.notOnce, ", "))
	}
	r.printStages(w)

	for _, p := range []phase{r.run, r.clean} {
		fmt.Fprintf(w, "\nMutating API requests per job, %s (%s):\n", p.name, ms(p.window))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "cluster\tall\tGantry\tKubernetes\tbenchmark client\tidle background\t")
		var sum [5]float64
		for _, c := range r.clusters {
			a, g, k, b, i := r.split(p, c)
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", c, a, g, k, b, i)
			for j, v := range []float64{a, g, k, b, i} {
				sum[j] += v
			}
		}
		fmt.Fprintf(tw, "total\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", sum[0], sum[1], sum[2], sum[3], sum[4])
		_ = tw.Flush()
	}
	fmt.Fprintln(w, "\nGantry: its Workloads (+status), CapacityReports, Jobs created/deleted on workers, hub Job status, namespaces")
	fmt.Fprintln(w, "on workers, Events from gantry-* components. Kubernetes: pods, bindings, Job status on workers, leases, the")
	fmt.Fprintln(w, "hub's garbage collector... Benchmark client: its Job creations and deletions on the hub. Idle background: what")
	fmt.Fprintln(w, "the idle testbed writes in as long (leases, capacity reports), already included in the other columns.")

	r.printBreakdown(w)
}

// printAgainstDirect compares the burst through Gantry with the same burst posted straight to the
// workers: its time, the writes a job costs over and beyond those, and Gantry's own CPU per job.
func printAgainstDirect(tw io.Writer, f figures) {
	hub, agents := fromMillis(f.HubCPUPerJob), fromMillis(f.AgentsCPUPerJob)
	fmt.Fprintf(tw, "burst submit -> all complete, over posted straight to the workers\t%.2fx (%s / %s)\t<= %.2fx\t%s\t\n",
		f.CompleteRatio, ms(fromSeconds(f.BurstComplete)), ms(fromSeconds(f.DirectComplete)), targetBurstRatio, verdict(f.CompleteRatio <= targetBurstRatio))
	fmt.Fprintf(tw, "mutating requests per job, over posted straight to the workers\t%.2fx (%.1f / %.1f)\t\t\t\n",
		f.WritesRatio, f.WritesPerJob, f.DirectWritesPerJob)
	fmt.Fprintf(tw, "mutating requests per job beyond those posted straight (%.1f)\t%+.1f\t<= %.1f\t%s\t\n",
		f.DirectWritesPerJob, f.ExtraWritesPerJob, targetExtraWrites, verdict(f.ExtraWritesPerJob <= targetExtraWrites))
	fmt.Fprintf(tw, "Gantry's own CPU per job, hub and agents\t%.2f ms (%.1f + %.1f)\t< %s + %s\t%s\t\n",
		f.CPUPerJob, f.HubCPUPerJob, f.AgentsCPUPerJob, ms(targetHubCPUPerJob), ms(targetAgentsCPUPerJob),
		verdict(hub < targetHubCPUPerJob && agents < targetAgentsCPUPerJob))
	fmt.Fprintf(tw, "  of which they use at rest over as long\t%.2f ms (%.1f + %.1f)\t\t\t\n",
		f.HubRestCPUPerJob+f.AgentsRestCPUPerJob, f.HubRestCPUPerJob, f.AgentsRestCPUPerJob)
	fmt.Fprintf(tw, "  agents' passes per job, both agents; the hub's\t%.1f; %.1f\t\t\t\n", f.AgentPassesPerJob, f.HubPassesPerJob)
	fmt.Fprintf(tw, "nominations per job, of which alone\t%.2f, %.2f\t\t\t\n", f.NominationsPerJob, f.AlonePerJob)
}

// breakdownRow is one kind of write in printBreakdown: per job, on each cluster through Gantry, in its
// delete phase, and the same burst posted straight to the workers (all clusters).
type breakdownRow struct {
	key      reqKey
	owner    string
	values   []float64
	clean    float64
	total    float64
	straight float64
}

// printBreakdown lists the writes per job by kind, for both phases together, beside the same burst
// posted straight to the workers: the last column is what a job costs through Gantry beyond that.
func (r *report) printBreakdown(w io.Writer) {
	list := r.breakdownRows()
	fmt.Fprintf(w, "\nMutating requests per job by kind, both phases (%s + %s); \"-> code\": requests that failed:\n", ms(r.run.window), ms(r.clean.window))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "request\tby\t%s\tof all: in delete phase\tposted straight\tbeyond\n", strings.Join(r.clusters, "\t"))
	var beyond float64
	for _, rw := range list {
		vals := make([]string, len(rw.values))
		for i, v := range rw.values {
			vals[i] = fmt.Sprintf("%.2f", v)
		}
		beyond += rw.total - rw.straight
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.2f\t%+.2f\n", rw.key, rw.owner, strings.Join(vals, "\t"), rw.clean, rw.straight, rw.total-rw.straight)
	}
	g := make([]string, len(r.clusters))
	var clean float64
	for i, c := range r.clusters {
		g[i] = fmt.Sprintf("%.2f", (r.run.events[c][0]+r.clean.events[c][0])/float64(r.jobs))
		clean += r.clean.events[c][0] / float64(r.jobs)
	}
	fmt.Fprintf(tw, "  of the events: from gantry-*\t(listed)\t%s\t%.2f\t\t\n", strings.Join(g, "\t"), clean)
	fmt.Fprintf(tw, "  all kinds listed\t\t%s\t\t\t%+.2f\n", strings.Repeat("\t", len(r.clusters)-1), beyond)
	_ = tw.Flush()
}

// breakdownRows sums the writes per job by kind, through Gantry and posted straight, leaving out kinds
// under 0.005 per job in both, ordered by who writes them and then by count.
func (r *report) breakdownRows() []*breakdownRow {
	rows := map[reqKey]*breakdownRow{}
	row := func(k reqKey) *breakdownRow {
		if rows[k] == nil {
			rows[k] = &breakdownRow{key: k, values: make([]float64, len(r.clusters))}
		}
		return rows[k]
	}
	perJob := 1 / float64(r.jobs)
	for i, c := range r.clusters {
		for _, p := range []phase{r.run, r.clean} {
			for k, v := range p.requests[c] {
				rw := row(k)
				rw.values[i] += v * perJob
				rw.total += v * perJob
				if p.name == r.clean.name {
					rw.clean += v * perJob
				}
			}
		}
		for _, p := range []phase{r.direct.run, r.direct.clean} {
			for k, v := range p.requests[c] {
				row(k).straight += v * perJob
			}
		}
	}
	var list []*breakdownRow
	for _, rw := range rows {
		if rw.total < 0.005 && rw.straight < 0.005 {
			continue
		}
		owners := map[string]bool{}
		for i, c := range r.clusters {
			if rw.values[i] > 0 {
				owners[owner(c == testbed.HubName, rw.key)] = true
			}
		}
		if len(owners) == 0 {
			owners[owner(false, rw.key)] = true
		}
		rw.owner = strings.Join(slices.Sorted(maps.Keys(owners)), "/")
		list = append(list, rw)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].owner != list[j].owner {
			return list[i].owner < list[j].owner
		}
		return list[i].total > list[j].total
	})
	return list
}

// stages of a dispatch, each from the end of the one before.
var stages = []struct {
	name     string
	from, to func(jobTimes) time.Time
}{
	{"hub Job -> hub Workload created", func(t jobTimes) time.Time { return t.hubCreated }, func(t jobTimes) time.Time { return t.workloadCreated }},
	{"-> nominated (dispatchEpoch set)", func(t jobTimes) time.Time { return t.workloadCreated }, func(t jobTimes) time.Time { return t.nominated }},
	{"-> first copy admitted on a worker", func(t jobTimes) time.Time { return t.nominated }, func(t jobTimes) time.Time { return t.copyAdmitted }},
	{"-> winner recorded on the hub", func(t jobTimes) time.Time { return t.copyAdmitted }, func(t jobTimes) time.Time { return t.winnerRecorded }},
	{"-> Job created on the winner", func(t jobTimes) time.Time { return t.winnerRecorded }, func(t jobTimes) time.Time { return t.workerCreated }},
}

// printStages shows where the time of a dispatch goes, for single jobs and the burst.
func (r *report) printStages(w io.Writer) {
	fmt.Fprintln(w, "\nWhere dispatch time goes (each stage from the end of the previous one, as seen by watches):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\tsingle p50\tburst p50\tburst p99\tburst max\t")
	for _, s := range stages {
		var single, burst []time.Duration
		for _, t := range r.singleTimes {
			if from, to := s.from(t), s.to(t); !from.IsZero() && !to.IsZero() {
				single = append(single, to.Sub(from))
			}
		}
		for _, t := range r.burst {
			if from, to := s.from(t), s.to(t); !from.IsZero() && !to.IsZero() {
				burst = append(burst, to.Sub(from))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", s.name, ms(percentile(single, 50)), ms(percentile(burst, 50)),
			ms(percentile(burst, 99)), ms(percentile(burst, 100)))
	}
	_ = tw.Flush()
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1 // nearest rank
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	if d >= time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// figure is one headline number. It is written to JSON with at most three decimals, so that a
// recorded run reads and diffs well; NaN and infinities, which no real run yields, are written as null.
type figure float64

func (f figure) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return []byte(strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)), nil
}

// ratio is a/b, or 0 (not measured) when b is: a burst of one job has no span, a failed reading no CPU.
func ratio(a, b figure) figure {
	if b == 0 {
		return 0
	}
	return a / b
}

func millis(d time.Duration) figure     { return figure(d.Seconds() * 1000) }
func fromMillis(f figure) time.Duration { return time.Duration(float64(f) * float64(time.Millisecond)) }
func fromSeconds(f figure) time.Duration {
	return time.Duration(float64(f) * float64(time.Second))
}

// summary is the headline of a run: the figures a regression shows in, recorded and set against the
// last recorded run. A zero figure was not measured (no real run yields one): it is left out of the
// JSON and printed as "-".
type summary struct {
	BurstThroughput figure `json:"burstThroughputJobsPerSecond,omitempty"`
	BurstP50        figure `json:"burstLatencyP50Ms,omitempty"`
	BurstP99        figure `json:"burstLatencyP99Ms,omitempty"`
	SingleP50       figure `json:"singleLatencyP50Ms,omitempty"`
	// BurstComplete and DirectComplete run from the burst's submission until all its Jobs completed,
	// through Gantry and posted straight to the workers.
	BurstComplete  figure `json:"burstCompleteSeconds,omitempty"`
	DirectComplete figure `json:"directCompleteSeconds,omitempty"`
	CompleteRatio  figure `json:"completeRatio,omitempty"`
	// The writes are mutating requests per job on all clusters, both phases (run and deletion).
	WritesPerJob       figure `json:"writesPerJob,omitempty"`
	DirectWritesPerJob figure `json:"directWritesPerJob,omitempty"`
	ExtraWritesPerJob  figure `json:"extraWritesPerJob,omitempty"`
	WritesRatio        figure `json:"writesRatio,omitempty"`
	// The CPU is Gantry's own, in milliseconds per job over the burst and its deletion.
	CPUPerJob       figure `json:"cpuPerJobMs,omitempty"`
	HubCPUPerJob    figure `json:"hubCPUPerJobMs,omitempty"`
	AgentsCPUPerJob figure `json:"agentsCPUPerJobMs,omitempty"`
	// The CPU the hub and the agents use at rest (sampled on the idle testbed) over as long as the burst
	// and its deletion took, per job: part of the CPU per job above that no job causes.
	HubRestCPUPerJob    figure `json:"hubRestCPUPerJobMs,omitempty"`
	AgentsRestCPUPerJob figure `json:"agentsRestCPUPerJobMs,omitempty"`
	AgentPassesPerJob   figure `json:"agentPassesPerJob,omitempty"`
	HubPassesPerJob     figure `json:"hubPassesPerJob,omitempty"`
	// Nominations persisted per job, and those of them that went to one cluster alone.
	NominationsPerJob figure `json:"nominationsPerJob,omitempty"`
	AlonePerJob       figure `json:"alonePerJob,omitempty"`
}

// record is one run as checked in (recorded.json): its headline and what it ran on, which must match
// for the figures to compare.
type record struct {
	Commit     string  `json:"commit"`
	Date       string  `json:"date"` // YYYY-MM-DD
	CPUs       int     `json:"cpus"`
	Jobs       int     `json:"jobs"`
	PodRuntime string  `json:"podRuntime"`
	Note       string  `json:"note,omitempty"`
	Summary    summary `json:"summary"`
}

// recordedJSON is the last recorded run; BENCH_RECORD=test/e2e/bench/recorded.json make bench replaces it.
//
//go:embed recorded.json
var recordedJSON []byte

// record is the headline of the run whose figures are f, to print against the last recorded run and
// maybe to record.
func (r *report) record(f figures, commit, note string, now time.Time) record {
	return record{
		Commit: commit, Date: now.Format(time.DateOnly), CPUs: runtime.NumCPU(), Jobs: r.jobs,
		PodRuntime: r.podRuntime.String(), Note: note, Summary: f.summary,
	}
}

// parseRecord reads a recorded run. Unknown fields are an error: a figure renamed in the code would
// otherwise read as not recorded, and its regressions would go unflagged.
func parseRecord(data []byte) (record, error) {
	var rec record
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return record{}, fmt.Errorf("parsing a recorded run: %w", err)
	}
	return rec, nil
}

func writeRecord(path string, rec record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the record of this run: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the record of this run: %w", err)
	}
	return nil
}

// Tolerances are fractions of the recorded figure by which a figure may move the bad way before it
// is flagged: about the run-to-run noise of the same code on the 2-CPU machine the runs are recorded
// on, so that a flag is worth a look and silence does not hide a slide like the third of throughput
// once lost over a week.
const (
	// throughputTolerance covers the burst's throughput: eight runs of one build on an idle machine
	// ranged 28-41 jobs/s.
	throughputTolerance = 0.30
	// ratioTolerance covers the burst's time over posting straight, which the same runs held to
	// 1.01-1.02x (and which a worker winning most of the jobs moved to 1.14-1.37x).
	ratioTolerance = 0.05
	// singleTolerance covers the single jobs' p50: ten jobs of tens of milliseconds each, 20-30 ms
	// over those runs.
	singleTolerance = 0.5
	// writesTolerance is tight because writes per job are the steady figure: they count requests
	// rather than time, so they hardly move between runs of the same code, whatever the machine's load.
	writesTolerance = 0.03
	cpuTolerance    = 0.15
	// notJudged figures are shown and never flagged: they follow a judged one (the burst's latencies
	// follow its throughput, the writes beyond posting straight follow the writes per job) or move
	// with the machine rather than with Gantry (the completion times, of which the ratio is judged).
	notJudged = 0
)

// headline is how one summary figure is shown and judged against the recorded run.
type headline struct {
	name          string
	value         func(summary) figure
	format        func(figure) string
	lowerIsBetter bool
	tolerance     float64
}

var headlines = []headline{
	{"burst dispatch throughput", func(s summary) figure { return s.BurstThroughput }, formatf("%.1f jobs/s"), false, throughputTolerance},
	{"burst latency p50", func(s summary) figure { return s.BurstP50 }, formatMillis, true, notJudged},
	{"burst latency p99", func(s summary) figure { return s.BurstP99 }, formatMillis, true, notJudged},
	{"single job latency p50", func(s summary) figure { return s.SingleP50 }, formatMillis, true, singleTolerance},
	{"burst submit -> all complete, through Gantry", func(s summary) figure { return s.BurstComplete }, formatSeconds, true, notJudged},
	{"burst submit -> all complete, posted straight", func(s summary) figure { return s.DirectComplete }, formatSeconds, true, notJudged},
	{"burst completion, Gantry over posted straight", func(s summary) figure { return s.CompleteRatio }, formatf("%.2fx"), true, ratioTolerance},
	{"mutating requests per job, all clusters", func(s summary) figure { return s.WritesPerJob }, formatf("%.1f"), true, writesTolerance},
	{"mutating requests per job, posted straight", func(s summary) figure { return s.DirectWritesPerJob }, formatf("%.1f"), true, notJudged},
	{"mutating requests per job beyond posted straight", func(s summary) figure { return s.ExtraWritesPerJob }, formatf("%+.1f"), true, notJudged},
	{"mutating requests per job, Gantry over posted straight", func(s summary) figure { return s.WritesRatio }, formatf("%.2fx"), true, writesTolerance},
	{"Gantry's own CPU per job, hub and agents", func(s summary) figure { return s.CPUPerJob }, formatf("%.1f ms"), true, cpuTolerance},
	{"Gantry's own CPU per job, hub", func(s summary) figure { return s.HubCPUPerJob }, formatf("%.1f ms"), true, cpuTolerance},
	{"Gantry's own CPU per job, agents", func(s summary) figure { return s.AgentsCPUPerJob }, formatf("%.1f ms"), true, cpuTolerance},
	{"Gantry's CPU at rest over as long, per job, hub", func(s summary) figure { return s.HubRestCPUPerJob }, formatf("%.1f ms"), true, notJudged},
	{"Gantry's CPU at rest over as long, per job, agents", func(s summary) figure { return s.AgentsRestCPUPerJob }, formatf("%.1f ms"), true, notJudged},
	{"agents' passes per job, both agents", func(s summary) figure { return s.AgentPassesPerJob }, formatf("%.1f"), true, notJudged},
	{"the hub's passes per job", func(s summary) figure { return s.HubPassesPerJob }, formatf("%.1f"), true, notJudged},
	{"nominations per job", func(s summary) figure { return s.NominationsPerJob }, formatf("%.2f"), true, notJudged},
	{"nominations per job that went alone", func(s summary) figure { return s.AlonePerJob }, formatf("%.2f"), false, notJudged},
}

func formatf(format string) func(figure) string {
	return func(f figure) string { return fmt.Sprintf(format, float64(f)) }
}

func formatMillis(f figure) string  { return ms(fromMillis(f)) }
func formatSeconds(f figure) string { return ms(fromSeconds(f)) }

// comparison is one headline figure of this run next to the recorded one, ready to print.
type comparison struct {
	name, now, recorded, change, tolerance string
	worse                                  bool
}

// compare sets this run's headline against the recorded one. A figure missing on either side is
// shown as "-" and has no change, so it is never flagged.
func compare(now, recorded summary) []comparison {
	var out []comparison
	for _, h := range headlines {
		n, r := h.value(now), h.value(recorded)
		c := comparison{name: h.name, now: "-", recorded: "-", change: "-", tolerance: "-"}
		if n != 0 {
			c.now = h.format(n)
		}
		if r != 0 {
			c.recorded = h.format(r)
		}
		if h.tolerance != notJudged {
			c.tolerance = fmt.Sprintf("%.0f%%", h.tolerance*100)
		}
		if n != 0 && r != 0 {
			change := float64((n - r) / figure(math.Abs(float64(r))))
			c.change = fmt.Sprintf("%+.1f%%", change*100)
			if !h.lowerIsBetter {
				change = -change
			}
			c.worse = h.tolerance != notJudged && change > h.tolerance
		}
		out = append(out, c)
	}
	return out
}

// printAgainstRecorded prints this run's headline against the last recorded run. It only prints:
// the figures are noisy, so the benchmark's exit status does not depend on them.
func printAgainstRecorded(w io.Writer, this, last record) {
	fmt.Fprintf(w, "\nAgainst the last recorded run (%s, %s):\n", last.Commit, last.Date)
	fmt.Fprintf(w, "Recorded on %d CPUs, %d jobs, pods %s", last.CPUs, last.Jobs, last.PodRuntime)
	if last.Note != "" {
		fmt.Fprintf(w, "; %s", last.Note)
	}
	fmt.Fprintf(w, ". This run: %s.\n", this.Commit)
	if diffs := setupDiffers(this, last); len(diffs) > 0 {
		fmt.Fprintf(w, "NOTE: this run differs from the recorded one (%s); its figures compare poorly.\n", strings.Join(diffs, ", "))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tthis run\trecorded\tchange\ttolerance\t")
	var worse []string
	for _, c := range compare(this.Summary, last.Summary) {
		flag := ""
		if c.worse {
			flag = "WORSE"
			worse = append(worse, c.name)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.name, c.now, c.recorded, c.change, c.tolerance, flag)
	}
	_ = tw.Flush()
	if len(worse) == 0 {
		fmt.Fprintln(w, "No figure moved the bad way beyond its tolerance (run-to-run noise on the recording machine).")
		return
	}
	fmt.Fprintf(w, "WORSE beyond run-to-run noise: %s. Worth a look; the exit status does not depend on it.\n", strings.Join(worse, ", "))
}

// setupDiffers lists what this run ran on that differs from the recorded run.
func setupDiffers(this, last record) []string {
	var out []string
	if this.CPUs != last.CPUs {
		out = append(out, fmt.Sprintf("%d CPUs, recorded %d", this.CPUs, last.CPUs))
	}
	if this.Jobs != last.Jobs {
		out = append(out, fmt.Sprintf("%d jobs, recorded %d", this.Jobs, last.Jobs))
	}
	if this.PodRuntime != last.PodRuntime {
		out = append(out, fmt.Sprintf("pods %s, recorded %s", this.PodRuntime, last.PodRuntime))
	}
	return out
}

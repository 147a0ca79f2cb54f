package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// smallReport is a burst of 4 jobs on a hub and one worker, with figures easy to check by hand.
func smallReport() *report {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	jobs := func(verb string) reqKey { return reqKey{group: "batch", resource: "jobs", verb: verb} }
	pods := func(verb string) reqKey { return reqKey{resource: "pods", verb: verb} }
	workloads := reqKey{group: "gantry.dev", resource: "workloads", verb: "POST"}
	return &report{
		jobs: 4, podRuntime: 30 * time.Second, clusters: []string{testbed.HubName, "worker-1"},
		singles: []time.Duration{70 * time.Millisecond, 50 * time.Millisecond, 60 * time.Millisecond},
		// Latencies 100, 200, 300, 500 ms; the first hub Job at 0, the last worker Job at 2 s.
		burst: []jobTimes{
			{hubCreated: at(0), workerCreated: at(100), creations: 1},
			{hubCreated: at(500), workerCreated: at(700), creations: 1},
			{hubCreated: at(1000), workerCreated: at(1300), creations: 2},
			{hubCreated: at(1500), workerCreated: at(2000), creations: 1},
		},
		// Through Gantry: 20 writes in the run and 8 in the deletion, 7 per job.
		run: phase{name: "run", window: 10 * time.Second, requests: map[string]requestCounts{
			testbed.HubName: {workloads: 8, jobs("POST"): 4},
			"worker-1":      {jobs("POST"): 4, pods("POST"): 4},
		}},
		clean: phase{name: "clean", window: 2 * time.Second, requests: map[string]requestCounts{
			testbed.HubName: {jobs("DELETE"): 4},
			"worker-1":      {jobs("DELETE"): 4},
		}},
		// Posted straight: 10 writes, 2.5 per job.
		direct: directBurst{
			run:   phase{window: 8 * time.Second, requests: map[string]requestCounts{"worker-1": {jobs("POST"): 4, pods("POST"): 4}}},
			clean: phase{window: time.Second, requests: map[string]requestCounts{"worker-1": {jobs("DELETE"): 2}}},
		},
		hubCPU: 40 * time.Millisecond, agentsCPU: 60 * time.Millisecond, counted: gantryCounts{agentPasses: 6, hubPasses: 8, nominations: map[string]float64{dispatch.ReachAlone: 3, dispatch.ReachCandidates: 1}},
	}
}

var approx = cmpopts.EquateApprox(1e-9, 0)

func TestSummaryFromReport(t *testing.T) {
	f := smallReport().figures()
	want := summary{
		BurstThroughput: 2, // 4 jobs in 2 s
		BurstP50:        200, BurstP99: 500, SingleP50: 60,
		BurstComplete: 10, DirectComplete: 8, CompleteRatio: 1.25,
		WritesPerJob: 7, DirectWritesPerJob: 2.5, ExtraWritesPerJob: 4.5, WritesRatio: 2.8,
		CPUPerJob: 25, HubCPUPerJob: 10, AgentsCPUPerJob: 15,
		AgentPassesPerJob: 1.5,
		HubPassesPerJob:   2,
		NominationsPerJob: 1,
		AlonePerJob:       0.75,
	}
	if diff := cmp.Diff(want, f.summary, approx); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	// Gantry's own: the hub's Workloads (8) and the Jobs it creates and deletes on the worker (4 + 4).
	if f.gantryWrites != 4 {
		t.Errorf("Gantry's own writes per job = %v, want 4", f.gantryWrites)
	}
	if f.span != 2*time.Second || len(f.notOnce) != 1 {
		t.Errorf("span %v, not created once %v; want 2s and one job", f.span, f.notOnce)
	}
}

func TestPrintShowsTheRatiosOverPostedStraight(t *testing.T) {
	var out bytes.Buffer
	r := smallReport()
	r.print(&out, r.figures())
	for _, want := range []string{"1.25x (10.0 s / 8.00 s)", "2.80x (7.0 / 2.5)", "+4.5", "25.00 ms (10.0 + 15.0)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	// The hub's 10 ms and the agents' 15 ms each miss their bound of under 10 ms.
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "Gantry's own CPU per job") && (!strings.Contains(line, "< 10 ms + 10 ms") || !strings.Contains(line, "MISSED")) {
			t.Errorf("CPU row %q, want the bounds of the hub and the agents, missed", line)
		}
	}
}

func TestSummaryOfAnEmptyBurstIsNotMeasured(t *testing.T) {
	// No span, no direct burst, no CPU: every ratio is 0 (not measured), none infinite, so it encodes.
	r := &report{jobs: 1, burst: []jobTimes{{}}}
	s := r.figures().summary
	if s.BurstThroughput != 0 || s.CompleteRatio != 0 || s.WritesRatio != 0 || s.ExtraWritesPerJob != 0 {
		t.Errorf("summary %+v, want its ratios not measured", s)
	}
	if err := writeRecord(filepath.Join(t.TempDir(), "r.json"), record{Summary: s}); err != nil {
		t.Error(err)
	}
}

func TestCompareFlagsWhatMovedTheBadWayBeyondTolerance(t *testing.T) {
	recorded := summary{BurstThroughput: 20, BurstP99: 500, WritesPerJob: 40, CPUPerJob: 40, CompleteRatio: 1.2}
	cases := []struct {
		name      string
		now       summary
		row       string
		wantWorse bool
		change    string
	}{
		{"throughput down 40%", summary{BurstThroughput: 12}, "burst dispatch throughput", true, "-40.0%"},
		{"throughput down 20%, within 30%", summary{BurstThroughput: 16}, "burst dispatch throughput", false, "-20.0%"},
		{"throughput up, better", summary{BurstThroughput: 30}, "burst dispatch throughput", false, "+50.0%"},
		{"writes up 5%, beyond 3%", summary{WritesPerJob: 42}, "mutating requests per job, all clusters", true, "+5.0%"},
		{"writes up 2%, within 3%", summary{WritesPerJob: 40.8}, "mutating requests per job, all clusters", false, "+2.0%"},
		{"writes down, better", summary{WritesPerJob: 30}, "mutating requests per job, all clusters", false, "-25.0%"},
		{"CPU up 20%", summary{CPUPerJob: 48}, "Gantry's own CPU per job, hub and agents", true, "+20.0%"},
		{"burst ratio up 10%", summary{CompleteRatio: 1.32}, "burst completion, Gantry over posted straight", true, "+10.0%"},
		{"burst ratio up 2.5%, within 5%", summary{CompleteRatio: 1.23}, "burst completion, Gantry over posted straight", false, "+2.5%"},
		{"p99 doubled, not judged", summary{BurstP99: 1000}, "burst latency p99", false, "+100.0%"},
		{"single p50 not recorded", summary{SingleP50: 500}, "single job latency p50", false, "-"},
		{"throughput not measured now", summary{}, "burst dispatch throughput", false, "-"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got *comparison
			for _, c := range compare(tc.now, recorded) {
				if c.name == tc.row {
					got = &c
				}
			}
			if got == nil {
				t.Fatalf("no row %q", tc.row)
			}
			if got.worse != tc.wantWorse || got.change != tc.change {
				t.Errorf("row %+v, want worse=%v change %s", *got, tc.wantWorse, tc.change)
			}
		})
	}
}

func TestPrintAgainstRecorded(t *testing.T) {
	last := record{Commit: "afb7230", Date: "2026-12-06", CPUs: 2, Jobs: 300, PodRuntime: "30s", Note: "figures as reported",
		Summary: summary{BurstThroughput: 19, SingleP50: 66, WritesPerJob: 41.3, CPUPerJob: 45}}
	this := record{Commit: "abc1234", CPUs: 4, Jobs: 300, PodRuntime: "30s",
		Summary: summary{BurstThroughput: 9.5, BurstP50: 900, SingleP50: 70, WritesPerJob: 41.5, CPUPerJob: 39}}
	var out bytes.Buffer
	printAgainstRecorded(&out, this, last)
	t.Logf("\n%s", out.String())
	lines := strings.Split(out.String(), "\n")
	wantRows := map[string][]string{
		"burst dispatch throughput":                {"9.5 jobs/s", "19.0 jobs/s", "-50.0%", "30%", "WORSE"},
		"burst latency p50":                        {"900 ms", "-", "-", "-"},
		"single job latency p50":                   {"70 ms", "66 ms", "+6.1%", "50%"},
		"mutating requests per job, all clusters":  {"41.5", "41.3", "+0.5%", "3%"},
		"Gantry's own CPU per job, hub and agents": {"39.0 ms", "45.0 ms", "-13.3%", "15%"},
	}
	for name, want := range wantRows {
		row := findRow(lines, name)
		if got := columns.Split(strings.TrimSpace(strings.TrimPrefix(row, name)), -1); !cmp.Equal(got, want) {
			t.Errorf("row %q: got %q, want %q", name, got, want)
		}
	}
	for _, want := range []string{
		"Against the last recorded run (afb7230, 2026-12-06)",
		"NOTE: this run differs from the recorded one (4 CPUs, recorded 2)",
		"WORSE beyond run-to-run noise: burst dispatch throughput.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// columns separates the tabwriter's columns, which are two spaces apart at least.
var columns = regexp.MustCompile(`\s{2,}`)

func findRow(lines []string, name string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, name+"  ") {
			return l
		}
	}
	return ""
}

func TestRecordRoundTrip(t *testing.T) {
	r := smallReport()
	rec := r.record(r.figures(), "abc1234", "a note", time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC))
	if rec.Date != "2026-12-07" || rec.Jobs != 4 || rec.PodRuntime != "30s" {
		t.Errorf("record %+v, want date 2026-12-07, 4 jobs, pods 30s", rec)
	}
	path := filepath.Join(t.TempDir(), "recorded.json")
	if err := writeRecord(path, rec); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseRecord(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec, got, approx); diff != "" {
		t.Errorf("record after a round trip (-want +got):\n%s", diff)
	}
	// Not measured figures are left out; written ones have at most three decimals.
	if strings.Contains(string(data), "burstLatencyP50") == (rec.Summary.BurstP50 == 0) {
		t.Errorf("burstLatencyP50Ms written %v, measured %v", strings.Contains(string(data), "burstLatencyP50"), rec.Summary.BurstP50)
	}
}

func TestFigureJSON(t *testing.T) {
	rec := record{Summary: summary{WritesRatio: 2.0000000001, CPUPerJob: 1.23456, BurstThroughput: figure(math.Inf(1))}}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := writeRecord(path, rec); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	for _, want := range []string{`"writesRatio": 2,`, `"cpuPerJobMs": 1.235`, `"burstThroughputJobsPerSecond": null`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("written record lacks %s:\n%s", want, data)
		}
	}
	if _, err := parseRecord([]byte(`{"commit": "x", "summary": {"burstThroughput": 19}}`)); err == nil {
		t.Error("a record with an unknown figure parsed")
	}
}

func TestEmbeddedRecordParses(t *testing.T) {
	rec, err := parseRecord(recordedJSON)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Commit == "" || rec.Date == "" || rec.CPUs < 1 || rec.Jobs < 1 {
		t.Errorf("the recorded run lacks its setup: %+v", rec)
	}
	if _, err := time.Parse(time.DateOnly, rec.Date); err != nil {
		t.Errorf("recorded date: %v", err)
	}
	if _, err := time.ParseDuration(rec.PodRuntime); err != nil {
		t.Errorf("recorded pod runtime: %v", err)
	}
	// The judged figures a regression shows in first must be there to compare with.
	s := rec.Summary
	if s.BurstThroughput <= 0 || s.SingleP50 <= 0 || s.CompleteRatio <= 0 || s.WritesPerJob <= 0 || s.CPUPerJob <= 0 {
		t.Errorf("the recorded run lacks a judged figure: %+v", s)
	}
}

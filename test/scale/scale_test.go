package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// A small run of the whole harness: two real workers and one in memory, queues of 50 and 200 jobs. It
// checks that the harness measures what it says (every figure of the report present and plausible, the
// in-memory worker's apart) and that the hub under it kept its promise: every job reached exactly one
// worker, the in-memory one among them, and the probes were dispatched while the held queue waited for
// quota.
func TestASmallRunMeasuresEverything(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("the scale harness needs KUBEBUILDER_ASSETS (run it with make test or make bench-scale)")
	}
	o := defaults()
	o.workers, o.memoryWorkers, o.nodes, o.depths, o.probes, o.runtime, o.clients = 2, 1, 2, []int{50, 200}, 5, 200*time.Millisecond, 4
	logDir, err := os.MkdirTemp("", "gantry-scale-test-")
	if err != nil {
		t.Fatal(err)
	}
	o.bin, o.logDir = filepath.Join(repoRoot(), "bin"), logDir
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	r, err := run(ctx, o)
	if r != nil {
		var out bytes.Buffer
		r.print(&out)
		t.Log("\n" + out.String())
	}
	if err != nil {
		t.Fatalf("%v (logs in %s)", err, o.logDir)
	}
	_ = os.RemoveAll(logDir)
	if len(r.depths) != 2 {
		t.Fatalf("%d depths measured, want 2", len(r.depths))
	}
	for _, d := range r.depths {
		if len(d.latencies) != o.probes || percentile(d.latencies, 50) <= 0 {
			t.Errorf("depth %d: %d probe latencies, p50 %s", d.depth, len(d.latencies), percentile(d.latencies, 50))
		}
		if d.passes.Count == 0 || d.memory.heap <= 0 || d.memory.rss < d.memory.heap {
			t.Errorf("depth %d: %d passes, heap %.0f, RSS %.0f", d.depth, d.passes.Count, d.memory.heap, d.memory.rss)
		}
	}
	if r.perConnection.heap <= 0 || r.emptyStart <= 0 || r.fullStart <= 0 || r.fullFirstPass < r.fullStart || r.fullCaughtUp < r.fullFirstPass || r.fullCPU <= 0 {
		t.Errorf("per connection %.0f B of heap, start empty %s, over the queue %s (first pass %s, caught up %s with %s of CPU)",
			r.perConnection.heap, r.emptyStart, r.fullStart, r.fullFirstPass, r.fullCaughtUp, r.fullCPU)
	}
	for resource := range r.watches {
		if !strings.HasSuffix(resource, "workloads") && resource != "jobs" && !strings.HasSuffix(resource, "capacityreports") {
			t.Errorf("the hub watches %s on a worker", resource)
		}
	}
	if len(r.watches) == 0 || !strings.HasSuffix(r.watchesOn, "real") {
		t.Errorf("watches of the hub %v counted on %q, want some on a real worker", r.watches, r.watchesOn)
	}
	// Before the drain, the held queue's quota lets one job run on each worker.
	d, drained := r.drain, 200-o.workers-o.memoryWorkers
	if d.jobs != drained || d.hubCPU <= 0 || d.agentCPU <= 0 || d.hubToHub <= 0 || d.hubToWorkers <= 0 || d.agentWrite <= 0 {
		t.Errorf("drain: %d jobs (want %d), CPU per job %s + %s, writes per job %.1f / %.1f / %.1f",
			d.jobs, drained, d.hubCPU, d.agentCPU, d.hubToHub, d.hubToWorkers, d.agentWrite)
	}
	if d.realJobs <= 0 || d.memoryJobs <= 0 || d.realJobs+d.memoryJobs != d.jobs || d.memoryAgentWrite <= 0 || d.harnessCPU <= 0 {
		t.Errorf("drain: %d jobs on real workers and %d in memory (want both, %d in all), the in-memory agent's writes per job %.1f, the harness's CPU per job %s",
			d.realJobs, d.memoryJobs, d.jobs, d.memoryAgentWrite, d.harnessCPU)
	}
}

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/prometheus/procfs"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
	"github.com/gantry-dev/gantry/test/scrape"
)

// gantryProcesses are the testbed's Gantry processes whose CPU a job costs: the hub, then the agents.
var gantryProcesses = []string{"gantry-hub", "gantry-agent-1", "gantry-agent-2"}

// processCPU is the CPU time each of the testbed's Gantry processes has used so far, in the order of
// gantryProcesses.
func processCPU(tb *testbed.Testbed) ([]time.Duration, error) {
	out := make([]time.Duration, len(gantryProcesses))
	for i, name := range gantryProcesses {
		p, err := tb.Process(name)
		if err != nil {
			return nil, err
		}
		proc, err := procfs.NewProc(p.PID)
		if err != nil {
			return nil, err
		}
		stat, err := proc.Stat()
		if err != nil {
			return nil, fmt.Errorf("reading the CPU time of %s: %w", name, err)
		}
		out[i] = time.Duration(stat.CPUTime() * float64(time.Second))
	}
	return out, nil
}

// cpuSplit is the CPU the hub and the agents used between two readings of processCPU.
func cpuSplit(before, after []time.Duration) (hub, agents time.Duration) {
	for i := range after {
		if i == 0 {
			hub += after[i] - before[i]
		} else {
			agents += after[i] - before[i]
		}
	}
	return hub, agents
}

// directBurst is the same burst posted straight to the workers, half to each, without Gantry: what the
// burst costs the clusters themselves.
type directBurst struct {
	run, clean phase
}

// runDirect submits the burst's Jobs straight to the workers, in turn, waits until all completed there,
// deletes them and waits until they are gone, counting the writes of each phase.
func runDirect(ctx context.Context, tb *testbed.Testbed, rec *recorder, ns, id string, names []string, o options) (directBurst, error) {
	var d directBurst
	for _, w := range tb.Workers {
		if err := w.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return d, fmt.Errorf("creating namespace %s on %s: %w", ns, w.Name, err)
		}
	}
	before, err := scrapeAll(ctx, tb)
	if err != nil {
		return d, err
	}
	start := time.Now()
	if err := submitDirect(ctx, tb, ns, id, names, o); err != nil {
		return d, err
	}
	if err := rec.waitAll(ns, names, "complete on its worker", o.waitTimeout, func(t jobTimes) bool { return !t.workerComplete.IsZero() }); err != nil {
		return d, err
	}
	afterRun, err := scrapeAll(ctx, tb)
	if err != nil {
		return d, err
	}
	d.run = phase{name: "submit -> all complete", window: time.Since(start), requests: diffAll(afterRun, before)}
	cleanStart := time.Now()
	for _, w := range tb.Workers {
		if err := w.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), client.MatchingLabels{runLabel: id},
			client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			return d, fmt.Errorf("deleting the direct burst's jobs on %s: %w", w.Name, err)
		}
	}
	if err := rec.waitAll(ns, names, "deleted from its worker", o.waitTimeout, func(t jobTimes) bool { return !t.workerGone.IsZero() }); err != nil {
		return d, err
	}
	if err := waitNoneLeft(ctx, tb.Workers, &corev1.PodList{}, ns, o.waitTimeout); err != nil {
		return d, err
	}
	afterClean, err := scrapeAll(ctx, tb)
	if err != nil {
		return d, err
	}
	d.clean = phase{name: "delete -> all gone", window: time.Since(cleanStart), requests: diffAll(afterClean, afterRun)}
	return d, nil
}

// submitDirect creates the Jobs on the workers in turn, with the burst's number of concurrent clients.
func submitDirect(ctx context.Context, tb *testbed.Testbed, ns, id string, names []string, o options) error {
	next := make(chan int)
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for range o.submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				job := benchJob(ns, names[i], id, o.podRuntime)
				delete(job.Labels, gantry.QueueLabel)
				w := tb.Workers[i%len(tb.Workers)]
				if err := w.Client.Create(ctx, job); err != nil {
					errs <- fmt.Errorf("submitting %s to %s: %w", job.Name, w.Name, err)
				}
			}
		}()
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs // nil when none failed
}

// cleanUpDirect removes the direct burst's namespace from the workers.
func cleanUpDirect(tb *testbed.Testbed, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, w := range tb.Workers {
		_ = w.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationBackground))
		_ = client.IgnoreNotFound(w.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
}

// gantryCounts are what Gantry's own metrics have counted so far: the agents' passes (the count of
// their pass duration histogram: controller-runtime's count of reconciles also has the calls that
// pacing held back), the hub's passes, and its nominations by reach.
type gantryCounts struct {
	agentPasses, hubPasses float64
	nominations            map[string]float64
}

func countGantry(ctx context.Context, tb *testbed.Testbed) (gantryCounts, error) {
	var c gantryCounts
	for i, name := range gantryProcesses {
		p, err := tb.Process(name)
		if err != nil {
			return c, err
		}
		addr := flagValue(p.Args, "--metrics-bind-address")
		if addr == "" {
			return c, fmt.Errorf("%s serves no metrics", name)
		}
		m, err := scrape.HTTP(ctx, addr)
		if err != nil {
			return c, fmt.Errorf("reading the metrics of %s: %w", name, err)
		}
		if i == 0 {
			c.hubPasses = float64(m.Histogram("gantry_hub_dispatch_pass_duration_seconds").Count)
			c.nominations = m.By("gantry_hub_nominations_total", "reach")
			continue
		}
		c.agentPasses += float64(m.Histogram("gantry_agent_admission_pass_duration_seconds").Count)
	}
	return c, nil
}

// since is what was counted between before and c.
func (c gantryCounts) since(before gantryCounts) gantryCounts {
	return gantryCounts{agentPasses: c.agentPasses - before.agentPasses, hubPasses: c.hubPasses - before.hubPasses,
		nominations: scrape.Change(before.nominations, c.nominations, 1)}
}

// flagValue is the value of a flag on a command line, given as "--flag value" or "--flag=value".
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

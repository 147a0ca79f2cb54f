package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/scale/memworker"
	"github.com/gantry-dev/gantry/test/scrape"
)

// connect starts the hub with no worker registered, then registers the real workers, then the
// in-memory ones: what the hub holds once a kind is connected, less what it held before, is the cost of
// those connections. On the first real worker (the first in-memory one when there is none), the
// watches open before and after the hub connected tell the hub's.
func (f *fleet) connect(ctx context.Context, r *report) error {
	start := time.Now()
	var err error
	if f.hub, err = startHub(f.o.bin, f.o.logDir, f.hubKubeconfig, f.o.hubMemoryLimit); err != nil {
		return err
	}
	if err := waitReady(ctx, f.hub, 2*time.Minute); err != nil {
		return err
	}
	r.emptyStart = time.Since(start)
	before, err := f.hubMemory(ctx)
	if err != nil {
		return err
	}
	r.emptyHub = before
	probe := append(f.real(), f.inMemory()...)[0]
	watchesBefore, err := watchesOn(ctx, probe)
	if err != nil {
		return err
	}
	for _, group := range [][]*apiServer{f.real(), f.inMemory()} {
		if len(group) == 0 {
			continue
		}
		after, err := f.connectAll(ctx, group)
		if err != nil {
			return err
		}
		per := after.minus(before).per(len(group))
		if group[0].inMemory() {
			r.perMemoryConnection = per
		} else {
			r.perConnection = per
		}
		before = after
	}
	watchesAfter, err := watchesOn(ctx, probe)
	if err != nil {
		return err
	}
	r.watchesOn = probe.name + ", " + probe.kind()
	r.watches = map[string]float64{}
	for resource, n := range watchesAfter {
		if d := n - watchesBefore[resource]; d != 0 {
			r.watches[resource] = d
		}
	}
	return nil
}

// connectAll registers the workers, waits until the hub has connected them all and returns the hub's
// memory then.
func (f *fleet) connectAll(ctx context.Context, ws []*apiServer) (memory, error) {
	for _, w := range ws {
		if err := register(ctx, f.hubAPI, w); err != nil {
			return memory{}, err
		}
	}
	if err := waitConnected(ctx, f.hubAPI, names(ws), 5*time.Minute); err != nil {
		return memory{}, err
	}
	return f.hubMemory(ctx)
}

// watchesOn counts the watches open on a worker by resource: a real API server's long-running WATCH
// requests, an in-memory worker's open watches.
func watchesOn(ctx context.Context, w *apiServer) (map[string]float64, error) {
	if w.inMemory() {
		out := map[string]float64{}
		for resource, n := range w.mem.Watches() {
			out[resource] = float64(n)
		}
		return out, nil
	}
	m, err := scrapeAPIServer(ctx, w)
	if err != nil {
		return nil, err
	}
	return m.By("apiserver_longrunning_requests", "resource", "verb", "WATCH"), nil
}

// memory is the hub's resident set and Go heap after a collection.
type memory struct{ rss, heap float64 }

func (m memory) minus(o memory) memory { return memory{m.rss - o.rss, m.heap - o.heap} }
func (m memory) per(n int) memory      { return memory{m.rss / float64(n), m.heap / float64(n)} }

func (f *fleet) hubMemory(ctx context.Context) (memory, error) {
	heap, err := heapAfterGC(ctx, f.hub)
	if err != nil {
		return memory{}, err
	}
	u, err := usageOf(f.hub.pid())
	if err != nil {
		return memory{}, err
	}
	return memory{rss: float64(u.rss), heap: heap}, nil
}

// fill deepens the held queue to each depth in turn; at each, once the hub has written what it had to,
// probe jobs measure the dispatch latency of a job that can run, and the hub's passes are timed.
func (f *fleet) fill(ctx context.Context, r *report) error {
	for _, depth := range f.o.depths {
		start := time.Now()
		if err := f.submit(ctx, depth); err != nil {
			return err
		}
		row := depthRow{depth: depth, submitted: time.Since(start)}
		if err := f.settle(ctx, depth); err != nil {
			return err
		}
		row.settled = time.Since(start)
		before, err := scrape.HTTP(ctx, f.hub.metrics)
		if err != nil {
			return err
		}
		if depth == f.o.depths[len(f.o.depths)-1] {
			f.profile(ctx, "probes.pprof")
		}
		if row.latencies, err = f.probe(ctx, depth); err != nil {
			return err
		}
		after, err := scrape.HTTP(ctx, f.hub.metrics)
		if err != nil {
			return err
		}
		row.passes = after.Histogram(passMetric).Since(before.Histogram(passMetric))
		if row.memory, err = f.hubMemory(ctx); err != nil {
			return err
		}
		if depth == f.o.depths[len(f.o.depths)-1] && f.o.profiles != "" {
			f.writeProfile(ctx, "/debug/pprof/heap", filepath.Join(f.o.profiles, "heap.pprof"))
		}
		r.depths = append(r.depths, row)
		logf("depth %d: probe p50 %s, pass mean %s; each probe %v; steps' p99 %s", depth, percentile(row.latencies, 50),
			row.passes.Mean(), row.latencies, stepsP99(before, after))
	}
	return nil
}

const (
	passMetric  = "gantry_hub_dispatch_pass_duration_seconds"
	uncutMetric = "gantry_hub_dispatch_passes_uncut_total"
	// nominationsMetric counts nominations by reach.
	nominationsMetric = "gantry_hub_nominations_total"
)

// stepsP99 says, of the steps of the dispatches between two scrapes of the hub, the 99th percentile
// of each: which step a slow probe waited in.
func stepsP99(before, after scrape.Families) string {
	var parts []string
	for _, step := range []string{"created_to_nominated", "nominated_to_winner", "winner_to_job_created"} {
		h := after.Histogram(stepMetric, "step", step).Since(before.Histogram(stepMetric, "step", step))
		parts = append(parts, step+" "+h.Quantile(0.99))
	}
	return strings.Join(parts, ", ")
}

const stepMetric = "gantry_hub_dispatch_latency_seconds"

// settle waits until the hub has a Workload for each held job and has stopped writing.
func (f *fleet) settle(ctx context.Context, depth int) error {
	if err := poll(ctx, 30*time.Minute, time.Second, func() error {
		n, err := count(ctx, f.hubAPI.client, &gantry.WorkloadList{}, heldNS)
		if err != nil {
			return err
		}
		if n < depth {
			return fmt.Errorf("%d workloads of %d", n, depth)
		}
		return nil
	}); err != nil {
		return err
	}
	return f.quiet(ctx)
}

// quiet waits until the hub sent no write for two seconds.
func (f *fleet) quiet(ctx context.Context) error {
	last := -1.0
	return poll(ctx, 30*time.Minute, 2*time.Second, func() error {
		m, err := scrape.HTTP(ctx, f.hub.metrics)
		if err != nil {
			return err
		}
		n := m.Sum("gantry_hub_api_writes_total")
		if n != last {
			last = n
			return fmt.Errorf("the hub is still writing (%.0f writes so far)", n)
		}
		return nil
	})
}

// probe submits jobs to the open queue one after another and returns, for each, the time from its
// submission to its Job's arrival on a worker.
func (f *fleet) probe(ctx context.Context, depth int) ([]time.Duration, error) {
	var out []time.Duration
	for i := range f.o.probes {
		j := job(probeNS, fmt.Sprintf("probe-%d-%03d", depth, i))
		j.Labels[gantry.QueueLabel] = "q"
		start := time.Now()
		if err := f.hubAPI.client.Create(ctx, j); err != nil {
			return nil, err
		}
		key := client.ObjectKeyFromObject(j).String()
		var at time.Time
		if err := poll(ctx, 2*time.Minute, time.Millisecond, func() error {
			var ok bool
			if at, ok = f.player.arrivedAt(key); !ok {
				return fmt.Errorf("%s has not reached a worker", key)
			}
			return nil
		}); err != nil {
			return nil, err
		}
		out = append(out, at.Sub(start))
	}
	return out, nil
}

// restart stops the hub and starts it again with the whole queue in place: the start-up of a hub that
// takes over a deep queue.
func (f *fleet) restart(ctx context.Context, r *report) error {
	f.hub.stop()
	start := time.Now()
	var err error
	if f.hub, err = startHub(f.o.bin, f.o.logDir, f.hubKubeconfig, f.o.hubMemoryLimit); err != nil {
		return err
	}
	if err := waitReady(ctx, f.hub, 10*time.Minute); err != nil {
		return err
	}
	r.fullStart = time.Since(start)
	f.profile(ctx, "restart.pprof")
	if err := poll(ctx, 10*time.Minute, 100*time.Millisecond, func() error {
		m, err := scrape.HTTP(ctx, f.hub.metrics)
		if err != nil {
			return err
		}
		if m.Histogram(passMetric).Count == 0 {
			return fmt.Errorf("no dispatch pass yet")
		}
		return nil
	}); err != nil {
		return err
	}
	r.fullFirstPass = time.Since(start)
	if err := f.quiet(ctx); err != nil {
		return err
	}
	if err := f.caughtUp(ctx); err != nil {
		return err
	}
	r.fullCaughtUp = time.Since(start)
	u, err := usageOf(f.hub.pid())
	if err != nil {
		return err
	}
	r.fullCPU = u.cpu
	r.fullHub, err = f.hubMemory(ctx)
	return err
}

// caughtUp waits until the hub's controllers have no work waiting: a hub that starts over a deep queue
// looks at every Job and Workload once, most of which it has nothing to write for, so the wait for
// quiet alone may end before that.
func (f *fleet) caughtUp(ctx context.Context) error {
	return poll(ctx, 30*time.Minute, time.Second, func() error {
		m, err := scrape.HTTP(ctx, f.hub.metrics)
		if err != nil {
			return err
		}
		if n := m.Sum("workqueue_depth"); n > 0 {
			return fmt.Errorf("%.0f reconciles waiting", n)
		}
		return nil
	})
}

// costs are the counters a drain is measured by.
type costs struct {
	hub, agents usage // agents: the real workers' gantry-agent processes
	// harness is this process: the in-memory workers with their agents, and the player.
	harness    usage
	hubMetrics scrape.Families
	// realWrites are the mutating requests the real workers' API servers answered; memoryAgentWrites
	// the writes of the in-memory workers' agents.
	realWrites, memoryAgentWrites float64
	// arrived and playerWrites count, by worker, the Jobs that reached it and the player's writes there.
	arrived, playerWrites map[string]int
}

func (f *fleet) costs(ctx context.Context) (costs, error) {
	var c costs
	var err error
	if c.hub, err = usageOf(f.hub.pid()); err != nil {
		return c, err
	}
	if c.agents, err = usageOfAll(f.agents); err != nil {
		return c, err
	}
	if c.harness, err = usageOf(os.Getpid()); err != nil {
		return c, err
	}
	if c.hubMetrics, err = scrape.HTTP(ctx, f.hub.metrics); err != nil {
		return c, err
	}
	for _, w := range f.real() {
		m, err := scrapeAPIServer(ctx, w)
		if err != nil {
			return c, err
		}
		c.realWrites += writes(m)
	}
	for _, w := range f.inMemory() {
		c.memoryAgentWrites += float64(w.mem.Writes().Of(memworker.ClientAgent))
	}
	c.arrived, c.playerWrites = f.player.byWorker()
	return c, nil
}

// writes adds an API server's mutating requests.
func writes(m scrape.Families) float64 {
	total := 0.0
	for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"} {
		total += m.Sum("apiserver_request_total", "verb", verb)
	}
	return total
}

// drain gives the held queue the workers' whole capacity and lets its running jobs finish; it ends
// when every held job has reached a worker.
func (f *fleet) drain(ctx context.Context, r *report) error {
	before, err := f.costs(ctx)
	if err != nil {
		return err
	}
	arrivedBefore := f.player.arrivedIn(heldNS)
	start := time.Now()
	var gq gantry.GlobalQueue
	if err := f.hubAPI.client.Get(ctx, client.ObjectKey{Name: heldQueue}, &gq); err != nil {
		return err
	}
	gq.Spec.Clusters = f.quota(int64(f.o.nodes) * f.o.gpus)
	if err := f.hubAPI.client.Update(ctx, &gq); err != nil {
		return err
	}
	f.player.release()
	f.profile(ctx, "drain.pprof")
	total := f.submitted
	if f.o.drain > 0 {
		total = min(total, arrivedBefore+f.o.drain)
	}
	logf("draining %d jobs", total-arrivedBefore)
	if err := poll(ctx, 3*time.Hour, time.Second, func() error {
		if n := f.player.arrivedIn(heldNS); n < total {
			return fmt.Errorf("%d of %d held jobs reached a worker", n, total)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("%w; %s; player: %v", err, f.waiting(context.Background()), f.player.check())
	}
	r.drain = drainRow{jobs: total - arrivedBefore, took: time.Since(start), whole: total == f.submitted}
	if err := f.waitFinished(ctx, total); err != nil {
		return err
	}
	after, err := f.costs(ctx)
	if err != nil {
		return err
	}
	r.drain.measure(before, after, r.drain.jobs, names(f.real()), names(f.inMemory()))
	return nil
}

// profile starts writing a CPU profile of the hub over the next 30 s to the file in the -profiles
// directory, when there is one.
func (f *fleet) profile(ctx context.Context, file string) {
	if f.o.profiles != "" {
		go func() {
			f.profiling.Lock()
			defer f.profiling.Unlock()
			f.writeProfile(ctx, "/debug/pprof/profile?seconds=30", filepath.Join(f.o.profiles, file))
		}()
	}
}

// writeProfile writes what the hub's profiling endpoint answers at that path to a file.
func (f *fleet) writeProfile(ctx context.Context, endpoint, path string) {
	url := fmt.Sprintf("http://%s%s", f.hub.pprof, endpoint)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		logf("profile: %v", err)
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		logf("profile: %v", err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := os.Create(path)
	if err == nil {
		_, err = io.Copy(out, resp.Body)
		err = errors.Join(err, out.Close())
	}
	if err != nil {
		logf("profile: %v", err)
	}
}

// waiting says why the held workloads still wait: how many per reason of their Pending condition, with
// one message of each.
func (f *fleet) waiting(ctx context.Context) string {
	var list gantry.WorkloadList
	if err := f.hubAPI.client.List(ctx, &list, client.InNamespace(heldNS)); err != nil {
		return err.Error()
	}
	counts, example := map[string]int{}, map[string]string{}
	for _, wl := range list.Items {
		if wl.Status.Winner() != "" {
			continue
		}
		reason, message := "none", ""
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending); c != nil {
			reason, message = c.Reason, c.Message
		}
		counts[reason]++
		example[reason] = wl.Name + ": " + message
	}
	var parts []string
	for reason, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s (%s)", n, reason, example[reason]))
	}
	return "waiting: " + strings.Join(parts, "; ")
}

// waitFinished waits until the hub has mirrored every held Job's completion, so that the costs
// counted cover each job's whole path.
func (f *fleet) waitFinished(ctx context.Context, total int) error {
	return poll(ctx, 30*time.Minute, 2*time.Second, func() error {
		m, err := scrape.HTTP(ctx, f.hub.metrics)
		if err != nil {
			return err
		}
		done := m.Sum("gantry_hub_workloads_finished_total")
		if int(done) < total {
			return fmt.Errorf("%.0f workloads finished", done)
		}
		return nil
	})
}

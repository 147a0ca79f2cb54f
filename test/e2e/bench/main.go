// Command bench measures how fast Gantry dispatches on the kwok testbed of hack/dev-up.sh, and how many
// writes each job costs the API servers. hack/bench.sh (make bench) brings a testbed up, runs it and
// tears the testbed down.
//
// It first runs single Jobs one after another on the idle testbed (latency from the Job's creation on
// the hub to its creation on the winning worker), then submits a burst of one-pod Jobs at once and
// reports dispatch throughput, latency percentiles and the mutating API requests per job on each
// cluster, read from the API servers' apiserver_request_total before and after, and the CPU the hub
// and the agents spent on it. Last it posts the same burst straight to the workers, without Gantry,
// and sets Gantry's time and writes against those.
//
// Every time comes from watches in this process: the hub Job's creation is when the hub's watch
// delivered it, its creation on a worker when that worker's watch did.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// runLabel marks every Job of one benchmark run; the watches select on it.
const runLabel = "bench.gantry.dev/run"

type options struct {
	dir         string
	jobs        int
	singles     int
	idle        time.Duration
	submitters  int
	waitTimeout time.Duration
	podRuntime  time.Duration
	// record is the file to write this run's headline to; commit and note go into that record.
	record, commit, note string
}

// singleRuntime is how long the pods of single Jobs run: the next single Job waits for the last to finish.
const singleRuntime = time.Second

// defaultPodRuntime reads BENCH_POD_RUNTIME. Batch pods run for minutes; 30 s keeps the burst's pods
// running while the burst is dispatched, so the burst measures dispatch rather than the pods' churn.
func defaultPodRuntime() time.Duration {
	if v := os.Getenv("BENCH_POD_RUNTIME"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return d
		}
		fmt.Fprintf(os.Stderr, "bench: BENCH_POD_RUNTIME=%q is not a positive duration\n", v)
		os.Exit(2)
	}
	return 30 * time.Second
}

func main() {
	o := options{}
	defaultJobs := 300
	if v := os.Getenv("BENCH_JOBS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: BENCH_JOBS=%q is not a positive number\n", v)
			os.Exit(2)
		}
		defaultJobs = n
	}
	flag.StringVar(&o.dir, "dir", ".dev", "Directory of a running testbed (hack/dev-up.sh).")
	flag.IntVar(&o.jobs, "jobs", defaultJobs, "Jobs in the burst (default: BENCH_JOBS or 300).")
	flag.IntVar(&o.singles, "singles", 10, "Single Jobs run one after another on the idle testbed.")
	flag.DurationVar(&o.idle, "idle-sample", 10*time.Second, "How long to sample the idle testbed's background writes.")
	flag.IntVar(&o.submitters, "submitters", 32, "Concurrent clients submitting the burst.")
	flag.DurationVar(&o.podRuntime, "pod-runtime", defaultPodRuntime(), "How long each pod runs on its kwok node (default: BENCH_POD_RUNTIME or 30s).")
	flag.DurationVar(&o.waitTimeout, "wait-timeout", 10*time.Minute, "Bound on each wait for the burst.")
	flag.StringVar(&o.record, "record", "", "Write this run's headline figures as JSON to this file (BENCH_RECORD in hack/bench.sh); test/e2e/bench/recorded.json is the one later runs compare with.")
	flag.StringVar(&o.commit, "commit", "", "The commit measured, as the record names it (hack/bench.sh passes git rev-parse --short HEAD).")
	flag.StringVar(&o.note, "note", "", "A free-text note for the record.")
	flag.Parse()
	if o.record != "" && o.commit == "" {
		// Checked before the run, which takes minutes: a record without its commit says nothing.
		fmt.Fprintln(os.Stderr, "bench: -record needs -commit")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

func run(o options) error {
	tb, err := testbed.Open(o.dir, 2000, 4000)
	if err != nil {
		return err
	}
	ctx := context.Background()
	id := strconv.FormatInt(time.Now().Unix(), 36)
	singleNS, burstNS, directNS := "bench-single-"+id, "bench-burst-"+id, "bench-direct-"+id
	for _, ns := range []string{singleNS, burstNS} {
		if err := newNamespace(ctx, tb, ns); err != nil {
			return err
		}
	}
	defer cleanUp(tb, singleNS, burstNS)
	defer cleanUpDirect(tb, directNS)

	rec := newRecorder(singleNS, burstNS)
	wctx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	for _, c := range tb.All() {
		if err := rec.watchJobs(wctx, c, runLabel+"="+id, c == tb.Hub); err != nil {
			return err
		}
		if err := rec.watchWorkloads(wctx, c, c == tb.Hub); err != nil {
			return err
		}
	}
	r := &report{jobs: o.jobs, podRuntime: o.podRuntime, clusters: clusterNames(tb)}
	if err := runSingles(ctx, tb, rec, r, singleNS, id, o); err != nil {
		return err
	}
	if err := sampleIdle(ctx, tb, r, o.idle); err != nil {
		return err
	}
	names := make([]string, o.jobs)
	for i := range names {
		names[i] = fmt.Sprintf("burst-%04d", i)
	}
	if err := runBurst(ctx, tb, rec, r, burstNS, id, names, o); err != nil {
		return err
	}
	logf("posting the same burst straight to the workers")
	if r.direct, err = runDirect(ctx, tb, rec, directNS, id, names, o); err != nil {
		return err
	}
	f := r.figures()
	r.print(os.Stdout, f)
	this := r.record(f, o.commit, o.note, time.Now())
	if last, err := parseRecord(recordedJSON); err != nil {
		fmt.Fprintf(os.Stdout, "\nThe last recorded run (test/e2e/bench/recorded.json) cannot be read: %v\n", err)
	} else {
		printAgainstRecorded(os.Stdout, this, last)
	}
	if o.record != "" {
		if err := writeRecord(o.record, this); err != nil {
			return err
		}
		logf("recorded this run in %s", o.record)
	}
	return nil
}

// runSingles runs single Jobs one after another on the idle testbed, after one that warms it up.
func runSingles(ctx context.Context, tb *testbed.Testbed, rec *recorder, r *report, ns, id string, o options) error {
	// The first Job pays for connections and the namespace on the workers; it is not measured.
	logf("warming up")
	if _, err := runSingle(ctx, tb, rec, benchJob(ns, "warm-up", id, singleRuntime)); err != nil {
		return err
	}
	logf("running %d single jobs one after another", o.singles)
	for i := range o.singles {
		name := fmt.Sprintf("single-%d", i)
		d, err := runSingle(ctx, tb, rec, benchJob(ns, name, id, singleRuntime))
		if err != nil {
			return err
		}
		r.singles = append(r.singles, d)
		r.singleTimes = append(r.singleTimes, rec.get(ns, name))
	}
	return nil
}

// sampleIdle samples what the idle testbed writes per second, and the CPU Gantry's processes use per
// second at rest (leases, heartbeats, resyncs): what they would use over the burst without it.
func sampleIdle(ctx context.Context, tb *testbed.Testbed, r *report, sample time.Duration) error {
	logf("sampling the idle testbed's background writes and Gantry's CPU at rest for %s", sample)
	before, err := scrapeAll(ctx, tb)
	if err != nil {
		return err
	}
	cpuBefore, err := processCPU(tb)
	if err != nil {
		return err
	}
	start := time.Now()
	time.Sleep(sample)
	after, err := scrapeAll(ctx, tb)
	if err != nil {
		return err
	}
	cpuAfter, err := processCPU(tb)
	if err != nil {
		return err
	}
	window := time.Since(start)
	r.idleRate = ratesAll(diffAll(after, before), window)
	hub, agents := cpuSplit(cpuBefore, cpuAfter)
	r.hubRestCPU, r.agentsRestCPU = hub.Seconds()/window.Seconds(), agents.Seconds()/window.Seconds()
	return nil
}

// runBurst submits the burst to the hub, waits until every Job completed, deletes them and waits until
// they are gone everywhere, recording the writes and Gantry's CPU of both phases.
func runBurst(ctx context.Context, tb *testbed.Testbed, rec *recorder, r *report, ns, id string, names []string, o options) error {
	logf("submitting a burst of %d jobs", o.jobs)
	before, err := scrapeAll(ctx, tb)
	if err != nil {
		return err
	}
	cpuBefore, err := processCPU(tb)
	if err != nil {
		return err
	}
	countsBefore, err := countGantry(ctx, tb)
	if err != nil {
		return err
	}
	runStart := time.Now()
	if err := submitAll(ctx, tb, ns, id, names, o.submitters, o.podRuntime); err != nil {
		return err
	}
	r.submitTime = time.Since(runStart)
	if err := rec.waitAll(ns, names, "created on a worker", o.waitTimeout, func(t jobTimes) bool { return !t.workerCreated.IsZero() }); err != nil {
		return dispatchStuck(ctx, tb, ns, err)
	}
	logf("all %d jobs created on workers; waiting for them to complete", o.jobs)
	if err := rec.waitAll(ns, names, "complete on the hub", o.waitTimeout, func(t jobTimes) bool { return !t.hubComplete.IsZero() }); err != nil {
		return dispatchStuck(ctx, tb, ns, err)
	}
	afterRun, err := scrapeAll(ctx, tb)
	if err != nil {
		return err
	}
	if r.run, err = measuredPhase(ctx, tb, ns, "submit -> all complete", runStart, before, afterRun, nil); err != nil {
		return err
	}
	logf("deleting the burst's jobs on the hub")
	cleanStart := time.Now()
	if err := tb.Hub.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns),
		client.MatchingLabels{runLabel: id}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		return fmt.Errorf("deleting the burst's jobs: %w", err)
	}
	if err := rec.waitAll(ns, names, "deleted from their worker", o.waitTimeout, func(t jobTimes) bool { return !t.workerGone.IsZero() }); err != nil {
		return err
	}
	if err := waitNoneLeft(ctx, tb.All(), &gantry.WorkloadList{}, ns, o.waitTimeout); err != nil {
		return err
	}
	// Posted straight or not, a deleted Job's pods go after it: the phase ends when they are gone.
	if err := waitNoneLeft(ctx, tb.Workers, &corev1.PodList{}, ns, o.waitTimeout); err != nil {
		return err
	}
	cpuAfter, err := processCPU(tb)
	if err != nil {
		return err
	}
	r.hubCPU, r.agentsCPU = cpuSplit(cpuBefore, cpuAfter)
	countsAfter, err := countGantry(ctx, tb)
	if err != nil {
		return err
	}
	r.counted = countsAfter.since(countsBefore)
	afterClean, err := scrapeAll(ctx, tb)
	if err != nil {
		return err
	}
	if r.clean, err = measuredPhase(ctx, tb, ns, "delete -> all gone", cleanStart, afterRun, afterClean, r.run.events); err != nil {
		return err
	}
	for _, n := range names {
		r.burst = append(r.burst, rec.get(ns, n))
	}
	return nil
}

// measuredPhase is a phase that started at start and ends now: what the clusters wrote from before to
// after, and the Events in the namespace since those of earlier phases.
func measuredPhase(ctx context.Context, tb *testbed.Testbed, ns, name string, start time.Time, before, after map[string]requestCounts,
	earlier eventCounts) (phase, error) {
	window := time.Since(start)
	events, err := eventsAll(ctx, tb, ns)
	if err != nil {
		return phase{}, err
	}
	if earlier != nil {
		events = subEvents(events, earlier)
	}
	return phase{name: name, window: window, requests: diffAll(after, before), events: events}, nil
}

// benchJob is a one-pod Job with a small CPU request, so that hundreds fit at once. Its pod is created
// and ready within about half a second on kwok, then runs for runtime.
func benchJob(ns, name, id string, runtime time.Duration) *batchv1.Job {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			gantry.QueueLabel: "default", runLabel: id,
		}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
					"pod-create.stage.kwok.x-k8s.io/delay":          "200ms",
					"pod-create.stage.kwok.x-k8s.io/jitter-delay":   "200ms",
					"pod-ready.stage.kwok.x-k8s.io/delay":           "200ms",
					"pod-ready.stage.kwok.x-k8s.io/jitter-delay":    "200ms",
					"pod-complete.stage.kwok.x-k8s.io/delay":        runtime.String(),
					"pod-complete.stage.kwok.x-k8s.io/jitter-delay": runtime.String(),
				}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "work", Image: "registry.example/batch:1",
						Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl}}},
				},
			},
		},
	}
}

// newNamespace creates a hub namespace with the Queue "default" on the testbed's GlobalQueue "default".
func newNamespace(ctx context.Context, tb *testbed.Testbed, ns string) error {
	if err := tb.Hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	q := &gantry.Queue{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}, Spec: gantry.QueueSpec{GlobalQueue: "default"}}
	if err := tb.Hub.Client.Create(ctx, q); err != nil {
		return fmt.Errorf("creating the queue in %s: %w", ns, err)
	}
	return nil
}

// runSingle submits one Job and waits until it was created on a worker and completed on the hub, so the
// next one starts on an idle testbed. It returns the dispatch latency.
func runSingle(ctx context.Context, tb *testbed.Testbed, rec *recorder, job *batchv1.Job) (time.Duration, error) {
	if err := tb.Hub.Client.Create(ctx, job); err != nil {
		return 0, fmt.Errorf("submitting %s: %w", job.Name, err)
	}
	names := []string{job.Name}
	if err := rec.waitAll(job.Namespace, names, "created on a worker", time.Minute, func(t jobTimes) bool {
		return !t.workerCreated.IsZero() && !t.hubCreated.IsZero()
	}); err != nil {
		return 0, dispatchStuck(ctx, tb, job.Namespace, err)
	}
	if err := rec.waitAll(job.Namespace, names, "complete on the hub", time.Minute, func(t jobTimes) bool { return !t.hubComplete.IsZero() }); err != nil {
		return 0, dispatchStuck(ctx, tb, job.Namespace, err)
	}
	t := rec.get(job.Namespace, job.Name)
	return t.workerCreated.Sub(t.hubCreated), nil
}

// submitAll creates the Jobs with several concurrent clients.
func submitAll(ctx context.Context, tb *testbed.Testbed, ns, id string, names []string, clients int, runtime time.Duration) error {
	next := make(chan string)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range next {
				if err := tb.Hub.Client.Create(ctx, benchJob(ns, name, id, runtime)); err != nil {
					errs <- fmt.Errorf("submitting %s: %w", name, err)
					return
				}
			}
		}()
	}
	var err error
feed:
	for _, n := range names {
		select {
		case next <- n:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err != nil {
		return err
	}
	select {
	case err = <-errs:
		return err
	default:
		return nil
	}
}

// dispatchStuck adds what the hub Workloads say to an error about Jobs that did not get far enough.
func dispatchStuck(ctx context.Context, tb *testbed.Testbed, ns string, err error) error {
	var wls gantry.WorkloadList
	if lerr := tb.Hub.Client.List(ctx, &wls, client.InNamespace(ns)); lerr != nil {
		return err
	}
	byState := map[string]int{}
	example := map[string]string{}
	for _, wl := range wls.Items {
		state := "winner=" + wl.Status.ClusterName
		for _, c := range wl.Status.Conditions {
			if c.Status == metav1.ConditionTrue {
				state += " " + c.Type + "(" + c.Reason + ")"
			}
		}
		byState[state]++
		if _, ok := example[state]; !ok {
			example[state] = fmt.Sprintf("%s epoch=%d nominated=%v", wl.Name, wl.Status.DispatchEpoch, wl.Status.NominatedClusters)
		}
	}
	msg := fmt.Sprintf("%v\nhub workloads in %s by state:", err, ns)
	for s, n := range byState {
		msg += fmt.Sprintf("\n  %4d  %s   e.g. %s", n, s, example[s])
	}
	return fmt.Errorf("%s\nsee the logs in the testbed's logs/ directory", msg)
}

// waitNoneLeft polls until the clusters hold no object of list's kind in ns, or fails after timeout.
func waitNoneLeft(ctx context.Context, clusters []*testbed.Cluster, list client.ObjectList, ns string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := 0
		for _, c := range clusters {
			if err := c.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				return err
			}
			left += meta.LenList(list)
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s, %d %T items in %s are left on the clusters", timeout, left, list, ns)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cleanUp removes the benchmark's Jobs and namespaces, so that a testbed that stays up is left as it
// was found. Namespaces are deleted without waiting.
func cleanUp(tb *testbed.Testbed, namespaces ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range namespaces {
		_ = tb.Hub.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationBackground))
	}
	// Gantry withdraws the Jobs from the workers before the hub Workloads go.
	for _, ns := range namespaces {
		_ = waitNoneLeft(ctx, tb.All(), &gantry.WorkloadList{}, ns, time.Minute)
	}
	for _, c := range tb.All() {
		for _, ns := range namespaces {
			_ = client.IgnoreNotFound(c.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		}
	}
}

func clusterNames(tb *testbed.Testbed) []string {
	var out []string
	for _, c := range tb.All() {
		out = append(out, c.Name)
	}
	return out
}

func scrapeAll(ctx context.Context, tb *testbed.Testbed) (map[string]requestCounts, error) {
	out := map[string]requestCounts{}
	for _, c := range tb.All() {
		rc, err := scrapeRequests(ctx, c)
		if err != nil {
			return nil, err
		}
		out[c.Name] = rc
	}
	return out, nil
}

func diffAll(after, before map[string]requestCounts) map[string]requestCounts {
	out := map[string]requestCounts{}
	for name, a := range after {
		out[name] = sub(a, before[name])
	}
	return out
}

func ratesAll(d map[string]requestCounts, window time.Duration) map[string]requestCounts {
	out := map[string]requestCounts{}
	for name, rc := range d {
		out[name] = requestCounts{}
		for k, v := range rc {
			out[name][k] = v / window.Seconds()
		}
	}
	return out
}

// eventCounts are estimated Event writes in the burst's namespace per cluster: [Gantry's, others'].
type eventCounts map[string][2]float64

func eventsAll(ctx context.Context, tb *testbed.Testbed, ns string) (eventCounts, error) {
	out := eventCounts{}
	for _, c := range tb.All() {
		g, o, err := eventWrites(ctx, c, ns)
		if err != nil {
			return nil, err
		}
		out[c.Name] = [2]float64{g, o}
	}
	return out, nil
}

func subEvents(after, before eventCounts) eventCounts {
	out := eventCounts{}
	for n, a := range after {
		b := before[n]
		out[n] = [2]float64{max(0, a[0]-b[0]), max(0, a[1]-b[1])}
	}
	return out
}

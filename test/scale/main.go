// Command scale measures one gantry-hub at scale: a real hub API server holding a deep queue of Jobs,
// real worker API servers (etcd and kube-apiserver, no nodes behind their Node objects) each with the
// real gantry-agent, and the real gantry-hub. Workers beyond those the machine holds may be in memory
// (-memory-workers; test/scale/memworker: the API the hub uses on a worker, served in this process,
// with the agent's passes in process), which the hub connects to as to any worker. The harness plays
// the workers' Job controller. It prints the hub's memory, start-up, dispatch latency against queue
// depth, pass times, the cost of a worker connection, and API writes and CPU per dispatched job
// (docs/performance.md), saying which figures come from real workers and which from in-memory ones.
//
// Usage: go run ./test/scale [flags]   (make bench-scale; needs make build and the envtest binaries in
// KUBEBUILDER_ASSETS, as hack/install-tools.sh --envtest prints)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
	batchv1 "k8s.io/api/batch/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

var scheme = kruntime.NewScheme()

func init() {
	for _, add := range []func(*kruntime.Scheme) error{clientgoscheme.AddToScheme, gantry.AddToScheme, batchv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
}

// options of one run.
type options struct {
	// workers is the number of real worker API servers, memoryWorkers that of in-memory ones
	// (memworker) registered after them; each has nodes GPU nodes of gpus GPUs.
	workers, memoryWorkers, nodes int
	gpus                          int64
	// depths are the queue depths at which latency is probed, in increasing order; the last is the
	// queue that is drained at the end.
	depths []int
	// probes is the number of jobs whose latency is measured at each depth, one after another.
	probes int
	// drain is how many held jobs the drain waits for; 0 is the whole queue.
	drain int
	// runtime is how long the player keeps each Job running.
	runtime time.Duration
	// clients submit jobs in parallel.
	clients int
	// profiles, when set, is a directory that receives CPU profiles of the hub over 30 s from the start
	// of the deepest queue's probes (probes.pprof), of the restart from ready on (restart.pprof) and of
	// the drain (drain.pprof), and a profile of its heap at the deepest queue (heap.pprof).
	profiles string
	// bin holds gantry-hub and gantry-agent; root is the repository (for the CRDs); logDir receives
	// the processes' logs.
	bin, root, logDir string
	// hubMemoryLimit is the hub's soft memory limit (GOMEMLIMIT), as a container limit would set it
	// (internal/memlimit); empty for none.
	hubMemoryLimit string
}

func defaults() options {
	return options{workers: 20, nodes: 4, gpus: 8, depths: []int{1000, 10000, 100000}, probes: 30,
		runtime: time.Second, clients: 16}
}

func main() {
	o := defaults()
	fs := flag.NewFlagSet("scale", flag.ExitOnError)
	fs.IntVar(&o.workers, "workers", o.workers, "Real worker API servers, each with its own agent.")
	fs.IntVar(&o.memoryWorkers, "memory-workers", o.memoryWorkers, "In-memory workers added after the real ones: the hub's requests answered in this process, Gantry's agent passes in process.")
	fs.IntVar(&o.nodes, "nodes", o.nodes, "GPU nodes per worker (Node objects only).")
	fs.Int64Var(&o.gpus, "gpus", o.gpus, "GPUs per node.")
	depths := fs.String("depths", "1000,10000,100000", "Queue depths at which dispatch latency is probed, increasing; the last is drained at the end.")
	fs.IntVar(&o.probes, "probes", o.probes, "Jobs whose dispatch latency is measured at each depth.")
	fs.IntVar(&o.drain, "drain", 0, "Held jobs the drain measures (the first to reach workers); 0 drains the whole queue.")
	fs.DurationVar(&o.runtime, "runtime", o.runtime, "How long each Job runs on its worker.")
	fs.IntVar(&o.clients, "clients", o.clients, "Parallel clients submitting jobs.")
	fs.StringVar(&o.bin, "bin", "bin", "Directory of the gantry-hub and gantry-agent binaries (make build).")
	fs.StringVar(&o.profiles, "profiles", "", "Directory for CPU profiles of the hub over 30 s from the start of the deepest queue's probes (probes.pprof), of the restart from ready on (restart.pprof) and of the drain (drain.pprof), and of its heap at the deepest queue (heap.pprof).")
	fs.StringVar(&o.hubMemoryLimit, "hub-memory-limit", "", "The hub's soft memory limit (GOMEMLIMIT, e.g. 1800MiB), as its chart's memory limit sets it; empty for none.")
	fs.StringVar(&o.logDir, "logs", "", "Directory for the processes' logs (default: a new temporary directory).")
	_ = fs.Parse(os.Args[1:])
	var err error
	if o.depths, err = parseDepths(*depths); err != nil {
		fmt.Fprintln(os.Stderr, "scale: -depths:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r, err := run(ctx, o)
	if r != nil {
		r.print(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func parseDepths(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("%q: want increasing positive numbers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "scale: "+format+"\n", args...)
}

// repoRoot is the repository this file is in.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

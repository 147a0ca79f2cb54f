package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gantry-dev/gantry/agent/controller"
	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
	"github.com/gantry-dev/gantry/test/scale/memworker"
	"github.com/gantry-dev/gantry/test/testcluster"
)

const systemNamespace = "gantry-system"

// apiServer is one API server of a run: the hub's or a real worker's (an etcd and a kube-apiserver
// started by envtest), or an in-memory worker's (memworker, in this process).
type apiServer struct {
	name   string
	env    *envtest.Environment // nil for an in-memory worker
	mem    *memworker.Server    // nil for a real API server
	cfg    *rest.Config
	client client.Client
}

// startAPIServer starts an etcd and a kube-apiserver with Gantry's CRDs.
func startAPIServer(root, name string) (*apiServer, error) {
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(root, "deploy", "crd")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // Start can fail after its processes came up (installing CRDs)
		return nil, fmt.Errorf("starting the API server of %s: %w", name, err)
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &apiServer{name: name, env: env, cfg: cfg, client: c}, nil
}

// startMemoryWorker starts an in-memory worker, without its agent.
func startMemoryWorker(name string) (*apiServer, error) {
	mem, err := memworker.Start(memworker.Options{Name: name})
	if err != nil {
		return nil, fmt.Errorf("starting the in-memory worker %s: %w", name, err)
	}
	cfg := mem.Config()
	cfg.QPS, cfg.Burst = 2000, 4000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		mem.Stop()
		return nil, err
	}
	return &apiServer{name: name, mem: mem, cfg: cfg, client: c}, nil
}

// startMemoryAgent starts the agent of an in-memory worker with gantry-agent's default flags but the
// placement timeout (see noPlacementTimeout).
func startMemoryAgent(w *apiServer) error {
	return w.mem.StartAgent(controller.Options{ReservationTTL: controller.DefaultReservationTTL,
		StarvationTimeout: controller.DefaultStarvationTimeout})
}

// noPlacementTimeout turns the agents' placement timeout off: the player runs Jobs without pods, so a
// Job running longer than the timeout (a held job while a deep queue fills) would be given up as never
// placed and dispatched again, to another worker.
const noPlacementTimeout = "--placement-timeout=0"

func (s *apiServer) inMemory() bool { return s.mem != nil }

// kind says which kind of worker s is, for the report.
func (s *apiServer) kind() string {
	if s.inMemory() {
		return "in-memory"
	}
	return "real"
}

func (s *apiServer) stop() {
	switch {
	case s == nil:
	case s.mem != nil:
		s.mem.Stop()
	case s.env != nil:
		_ = s.env.Stop()
	}
}

func restClient(s *apiServer) (rest.Interface, error) {
	cs, err := kubernetes.NewForConfig(s.cfg)
	if err != nil {
		return nil, err
	}
	return cs.CoreV1().RESTClient(), nil
}

// kubeconfig reaches the server with embedded credentials: envtest's administrator's for a real one;
// for an in-memory worker, a token of the hub's identity of deploy/worker/hub-access.yaml.
func (s *apiServer) kubeconfig() ([]byte, error) {
	if s.mem != nil {
		return s.mem.Kubeconfig()
	}
	return testcluster.Kubeconfig(s.cfg)
}

func (s *apiServer) writeKubeconfig(dir string) (string, error) {
	kc, err := s.kubeconfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, s.name+".kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

// prepareWorker gives a worker Gantry's namespace and nodes objects of GPU machines; no kubelet runs
// behind them, so nothing but their status says they are there.
func prepareWorker(ctx context.Context, w *apiServer, nodes int, gpus int64) error {
	if err := w.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}}); err != nil {
		return err
	}
	for i := range nodes {
		if err := testcluster.CreateGPUNode(ctx, w.client, fmt.Sprintf("%s-gpu-%d", w.name, i), gpus); err != nil {
			return err
		}
	}
	return nil
}

// register writes a worker's kubeconfig Secret and its WorkerCluster on the hub.
func register(ctx context.Context, hub, w *apiServer) error {
	kc, err := w.kubeconfig()
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.name + "-kubeconfig", Namespace: systemNamespace},
		Data: map[string][]byte{workerconfig.SecretKey: kc}}
	if err := hub.client.Create(ctx, secret); err != nil {
		return err
	}
	return hub.client.Create(ctx, &gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: w.name},
		Spec: gantry.WorkerClusterSpec{KubeconfigSecretRef: &gantry.SecretReference{Name: secret.Name}}})
}

// waitConnected waits until the hub reports every named WorkerCluster Connected and its agent ready.
func waitConnected(ctx context.Context, hub *apiServer, names []string, timeout time.Duration) error {
	return poll(ctx, timeout, 200*time.Millisecond, func() error {
		for _, n := range names {
			var wc gantry.WorkerCluster
			if err := hub.client.Get(ctx, client.ObjectKey{Name: n}, &wc); err != nil {
				return err
			}
			for _, typ := range []string{gantry.ClusterConnected, gantry.ClusterAgentReady} {
				if !meta.IsStatusConditionTrue(wc.Status.Conditions, typ) {
					return fmt.Errorf("%s: %s is not True", n, typ)
				}
			}
		}
		return nil
	})
}

// process is one Gantry program the harness runs: the hub or an agent.
type process struct {
	name string
	cmd  *exec.Cmd
	// done is closed when the process has exited.
	done chan struct{}
	// metrics is the address of its metrics endpoint; pprof its profiling endpoint (hub only).
	metrics, pprof, probe string
}

// startProcess runs a Gantry binary with its output in logDir and env added to this process's
// environment.
func startProcess(name, binary, logDir string, env []string, args ...string) (*process, error) {
	// Appended to: a process started again (the hub's restart) keeps the log of the one before.
	log, err := os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = log.Close(); close(p.done) }()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// startHub runs gantry-hub against the hub API server, with its metrics, readiness and profiling
// endpoints on free loopback ports, and the soft memory limit (GOMEMLIMIT) memLimit unless it is empty.
func startHub(bin, logDir, kubeconfig, memLimit string) (*process, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	var env []string
	if memLimit != "" {
		env = []string{"GOMEMLIMIT=" + memLimit}
	}
	p, err := startProcess("gantry-hub", filepath.Join(bin, "gantry-hub"), logDir, env,
		"--kubeconfig", kubeconfig, "--namespace", systemNamespace, "--leader-elect=false", "--allow-loopback-workers",
		"--metrics-bind-address", addr(0), "--metrics-secure=false", "--health-probe-bind-address", addr(1), "--pprof-bind-address", addr(2))
	if err != nil {
		return nil, err
	}
	p.metrics, p.probe, p.pprof = addr(0), addr(1), addr(2)
	return p, nil
}

// startAgent runs gantry-agent on a worker, with its metrics on a free loopback port.
func startAgent(bin, logDir string, w *apiServer) (*process, error) {
	kubeconfig, err := w.writeKubeconfig(logDir)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	p, err := startProcess("gantry-agent-"+w.name, filepath.Join(bin, "gantry-agent"), logDir, nil,
		"--kubeconfig", kubeconfig, "--namespace", systemNamespace, "--cluster-name", w.name, "--leader-elect=false", noPlacementTimeout,
		"--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(ports[0]), "--metrics-secure=false", "--health-probe-bind-address", "0")
	if err != nil {
		return nil, err
	}
	p.metrics = "127.0.0.1:" + strconv.Itoa(ports[0])
	return p, nil
}

// waitReady waits until the process's /readyz answers 200.
func waitReady(ctx context.Context, p *process, timeout time.Duration) error {
	return poll(ctx, timeout, 20*time.Millisecond, func() error {
		select {
		case <-p.done:
			return errStop{fmt.Errorf("%s exited: %s", p.name, p.cmd.ProcessState)}
		default:
		}
		resp, err := http.Get("http://" + p.probe + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s /readyz: %s", p.name, resp.Status)
		}
		return nil
	})
}

func freePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// errStop ends a poll at once.
type errStop struct{ error }

// poll calls f every interval until it returns nil, returns errStop, or timeout passes.
func poll(ctx context.Context, timeout, interval time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		var stop errStop
		if errors.As(err, &stop) {
			return stop.error
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

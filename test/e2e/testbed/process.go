package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is one of the testbed's Gantry processes, known by its pid file in Dir/pids, as hack/dev-up.sh
// and hack/dev-down.sh keep them.
type Process struct {
	Name string
	PID  int
	// Args is the command line.
	Args []string
	// exited is closed when a process this package started ends; nil for the script's processes.
	exited chan struct{}
}

// Process returns the running process of that name.
func (tb *Testbed) Process(name string) (*Process, error) {
	p, err := readPidFile(filepath.Join(tb.Dir, "pids", name+".pid"), name)
	if err != nil {
		return nil, err
	}
	// A recycled pid is not ours: the testbed's processes name files in its directory.
	if !strings.Contains(strings.Join(p.Args, " "), tb.Dir+string(filepath.Separator)) {
		return nil, fmt.Errorf("pid %d of %s runs %q, not a process of the testbed", p.PID, name, p.Args[0])
	}
	return p, nil
}

// Start runs args as the testbed process name, with its output appended to Dir/logs/<name>.log and its
// pid in Dir/pids, so that hack/dev-down.sh stops it too.
func (tb *Testbed) Start(name string, args []string) (*Process, error) {
	logFile, err := os.OpenFile(filepath.Join(tb.Dir, "logs", name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "=== %s %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(args, " "))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Name: name, PID: cmd.Process.Pid, Args: args, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	if err := os.WriteFile(filepath.Join(tb.Dir, "pids", name+".pid"), []byte(strconv.Itoa(p.PID)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	return p, nil
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error { return syscall.Kill(p.PID, sig) }

// Running tells whether the process has not ended.
func (p *Process) Running() bool {
	if p.exited != nil {
		select {
		case <-p.exited:
			return false
		default:
			return true
		}
	}
	return syscall.Kill(p.PID, 0) == nil
}

// Stop ends the process: TERM, then KILL after ten seconds. A stopped (SIGSTOP) process is continued
// first, so that it can see the TERM.
func (p *Process) Stop() error { return p.stopWithin(10 * time.Second) }

// stopWithin sends TERM, and KILL once grace has passed.
func (p *Process) stopWithin(grace time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = p.Signal(syscall.SIGTERM)
	_ = p.Signal(syscall.SIGCONT)
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); {
		if !p.Running() {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := p.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// WithPorts returns the process's command line with its metrics and health probe addresses, and the
// hub's endpoint when it has one, moved to free loopback ports, for a second replica of it.
func (p *Process) WithPorts() ([]string, error) {
	args := slices.Clone(p.Args)
	for _, flag := range []string{"--metrics-bind-address", "--health-probe-bind-address", "--endpoint-bind-address"} {
		i := slices.Index(args, flag)
		if i < 0 && flag == "--endpoint-bind-address" {
			continue
		}
		if i < 0 || i+1 >= len(args) {
			return nil, fmt.Errorf("%s has no %s", p.Name, flag)
		}
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		args[i+1] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	return args, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// controlPlane lists a cluster's control plane components in the order they start; kwok, which stands
// for the kubelets, is not one of them.
var controlPlane = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// controlPlaneGrace is how long a control plane component stopped by StopControlPlane may take to exit
// before it is killed (the API server, draining its watches, would take 10 s, and etcd 7 s).
const controlPlaneGrace = 2 * time.Second

// StopControlPlane stops a cluster's etcd, API server, controller manager and scheduler, as an outage
// of its control plane would; its nodes (kwok) go on. An outage leaves no time for a clean shutdown:
// each gets controlPlaneGrace after its TERM before it is killed. The returned function starts them
// again, from the same command lines, and waits until the API server is ready.
func (tb *Testbed) StopControlPlane(cluster string) (start func() error, err error) {
	dir := filepath.Join(tb.Dir, "kwok", "clusters", kwokName(cluster))
	var stopped []*Process
	for _, name := range controlPlane {
		p, err := tb.ControlPlaneProcess(cluster, name)
		if err != nil {
			return nil, err
		}
		stopped = append(stopped, p)
	}
	// The API server first, so that nothing sees etcd gone while it still serves.
	for i := len(stopped) - 1; i >= 0; i-- {
		if err := stopped[i].stopWithin(controlPlaneGrace); err != nil {
			return nil, err
		}
	}
	start = func() error {
		for _, p := range stopped {
			if err := startComponent(dir, p); err != nil {
				return err
			}
		}
		return tb.waitReady(cluster)
	}
	return start, nil
}

// ControlPlaneProcess is the running process of one of the cluster's control plane components (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler).
func (tb *Testbed) ControlPlaneProcess(cluster, name string) (*Process, error) {
	return readPidFile(filepath.Join(tb.Dir, "kwok", "clusters", kwokName(cluster), "pids", name+".pid"), name)
}

func readPidFile(path, name string) (*Process, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("pid file %s: %w", path, err)
	}
	cmdline, err := readCmdline(pid)
	if err != nil {
		return nil, fmt.Errorf("%s (pid %d) is not running: %w", name, pid, err)
	}
	return &Process{Name: name, PID: pid, Args: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")}, nil
}

// readCmdline reads a process's command line. A process that was just started may still be in its
// exec, past the point where its starter saw it succeed but before the kernel set up its arguments:
// its command line reads empty for that moment, so an empty one is read again for up to a second.
func readCmdline(pid int) ([]byte, error) {
	path := fmt.Sprintf("/proc/%d/cmdline", pid)
	for range 100 {
		cmdline, err := os.ReadFile(path)
		if err != nil || len(cmdline) > 0 {
			return cmdline, err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return os.ReadFile(path)
}

// startComponent starts a control plane component in the cluster's directory, as kwokctl does, with
// its pid where kwokctl keeps it, so that kwokctl delete stops it.
func startComponent(dir string, p *Process) error {
	logFile, err := os.OpenFile(filepath.Join(dir, "logs", p.Name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(p.Args[0], p.Args[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	go func() { _ = cmd.Wait() }()
	return os.WriteFile(filepath.Join(dir, "pids", p.Name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

// waitReady waits (bounded) until the cluster's API server answers /readyz.
func (tb *Testbed) waitReady(cluster string) error {
	var c *Cluster
	for _, x := range tb.All() {
		if x.Name == cluster {
			c = x
		}
	}
	if c == nil {
		return fmt.Errorf("no cluster %s", cluster)
	}
	var err error
	for range 240 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = c.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("the API server of %s is not ready after 2 minutes: %w", cluster, err)
}

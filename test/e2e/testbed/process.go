package testbed

import (
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
	data, err := os.ReadFile(filepath.Join(tb.Dir, "pids", name+".pid"))
	if err != nil {
		return nil, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("pid file of %s: %w", name, err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, fmt.Errorf("%s (pid %d) is not running: %w", name, pid, err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	// A recycled pid is not ours: the testbed's processes name files in its directory.
	if !strings.Contains(string(cmdline), tb.Dir+string(filepath.Separator)) {
		return nil, fmt.Errorf("pid %d of %s runs %q, not a process of the testbed", pid, name, args[0])
	}
	return &Process{Name: name, PID: pid, Args: args}, nil
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
func (p *Process) Stop() error {
	if !p.Running() {
		return nil
	}
	_ = p.Signal(syscall.SIGTERM)
	_ = p.Signal(syscall.SIGCONT)
	for range 50 {
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

// WithPorts returns the process's command line with its metrics and health probe addresses moved to two
// free loopback ports, for a second replica of it.
func (p *Process) WithPorts() ([]string, error) {
	args := slices.Clone(p.Args)
	for _, flag := range []string{"--metrics-bind-address", "--health-probe-bind-address"} {
		i := slices.Index(args, flag)
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

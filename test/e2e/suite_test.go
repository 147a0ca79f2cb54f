// Package e2e runs Gantry end to end on whole clusters: TestMain brings up the kwok testbed of
// hack/dev-up.sh (a hub and two GPU workers, each with its own API server, scheduler, Job controller and
// kwok, plus the real gantry-hub and gantry-agent binaries) in a directory of its own, so a developer's
// .dev testbed is left alone, and tears it down at the end.
//
// Environment:
//
//	GANTRY_TOOLS     bin dir of hack/install-tools.sh (set by make test-e2e); required, so that no cold
//	                 tool build runs inside the test timeout
//	GANTRY_E2E_DIR   testbed directory (default .dev-e2e in the repo root)
//	GANTRY_E2E_PORT  first of the loopback ports for the Gantry processes and the JobSet controllers
//	                 (testbed.DevPorts of them; default: free ports from 18180)
//	GANTRY_E2E_KEEP  when set, the testbed is left running for inspection (hack/dev-down.sh with
//	                 GANTRY_DEV_DIR set to the testbed directory removes it)
package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

var (
	tb    *testbed.Testbed
	audit *testbed.Ledger
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tools := os.Getenv("GANTRY_TOOLS")
	if tools == "" {
		fmt.Fprintln(os.Stderr, "e2e tests need GANTRY_TOOLS (run them with make test-e2e)")
		return 1
	}
	if _, err := os.Stat(filepath.Join(tools, "kwokctl")); err != nil {
		fmt.Fprintf(os.Stderr, "GANTRY_TOOLS=%s has no kwokctl: %v\n", tools, err)
		return 1
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir := os.Getenv("GANTRY_E2E_DIR")
	if dir == "" {
		dir = filepath.Join(root, ".dev-e2e")
	}
	if dir, err = filepath.Abs(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	release, err := testbed.Lock(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer release()

	port := 0
	if p := os.Getenv("GANTRY_E2E_PORT"); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			fmt.Fprintf(os.Stderr, "GANTRY_E2E_PORT=%q: %v\n", p, err)
			return 1
		}
	} else if port, err = testbed.FreePortBase(18180); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	// The script output is shown only when something fails.
	var scriptLog bytes.Buffer
	var logMu sync.Mutex
	out := lockedWriter{w: &scriptLog, mu: &logMu}
	var downOnce sync.Once
	down := func() {
		downOnce.Do(func() {
			if os.Getenv("GANTRY_E2E_KEEP") != "" {
				fmt.Fprintf(os.Stderr, "e2e: GANTRY_E2E_KEEP is set; the testbed keeps running in %s\n", dir)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := testbed.Down(ctx, root, dir, out); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: tearing down the testbed: %v\n%s", err, scriptLog.String())
			}
		})
	}

	// Leftovers of a run that was killed before it could tear down.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := testbed.Down(ctx, root, dir, out); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: removing an earlier testbed: %v\n%s", err, scriptLog.String())
		return 1
	}
	defer down()
	stopOnSignal(down)
	stopBeforeTimeout(down)

	start := time.Now()
	fmt.Fprintf(os.Stderr, "e2e: bringing up the testbed in %s (Gantry ports from %d)\n", dir, port)
	upCtx, upCancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer upCancel()
	if err := testbed.Up(upCtx, root, dir, port, out); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n%s", err, scriptLog.String())
		saveLogs(dir)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: testbed up in %s\n", time.Since(start).Round(time.Second))

	if tb, err = testbed.Open(dir, 100, 200); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	// The audit starts before any test submits a Job, so it sees every Job created on a worker.
	if audit, err = testbed.StartLedger(context.Background(), tb.Hub, tb.Workers); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer audit.Close()

	code := m.Run()
	if code != 0 {
		saveLogs(dir)
	}
	return code
}

// stopOnSignal tears the testbed down when the run is interrupted: its processes are detached and
// would otherwise outlive the test binary.
func stopOnSignal(down func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-ch
		fmt.Fprintf(os.Stderr, "e2e: %v: tearing down the testbed\n", sig)
		down()
		os.Exit(1)
	}()
}

// stopBeforeTimeout tears the testbed down shortly before go test's -timeout kills the binary, which
// skips every deferred call.
func stopBeforeTimeout(down func()) {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return
	}
	timeout, ok := f.Value.(flag.Getter).Get().(time.Duration)
	if !ok || timeout < 5*time.Minute {
		return
	}
	time.AfterFunc(timeout-90*time.Second, func() {
		fmt.Fprintln(os.Stderr, "e2e: go test's -timeout is near: tearing down the testbed")
		down()
	})
}

// saveLogs copies the testbed's logs out of its directory, which teardown removes.
func saveLogs(dir string) {
	dst, err := os.MkdirTemp("", "gantry-e2e-logs-")
	if err != nil {
		return
	}
	src := filepath.Join(dir, "logs")
	entries, err := os.ReadDir(src)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err == nil {
			_ = os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644)
		}
	}
	// The clusters' own logs (API servers, controller managers, schedulers, kwok).
	clusters, _ := filepath.Glob(filepath.Join(dir, "kwok", "clusters", "*", "logs", "*.log"))
	for _, f := range clusters {
		cluster := filepath.Base(filepath.Dir(filepath.Dir(f)))
		if data, err := os.ReadFile(f); err == nil {
			_ = os.WriteFile(filepath.Join(dst, cluster+"-"+filepath.Base(f)), data, 0o644)
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: testbed logs saved in %s\n", dst)
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// previousRelease is the commit whose agent the version-skew test runs (hack/previous-release).
func previousRelease(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "hack", "previous-release"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			return line
		}
	}
	t.Fatal("hack/previous-release names no commit")
	return ""
}

// previousAgent builds gantry-agent from the previous release's commit, once per commit, into the
// tools cache, and returns its path.
func previousAgent(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	commit := previousRelease(t, root)
	cache := os.Getenv("GANTRY_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(home, ".cache", "gantry")
	}
	bin := filepath.Join(cache, "previous-agent", commit, "gantry-agent")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("the checkout lacks commit %s of hack/previous-release (a shallow clone? git fetch --unshallow): %v %s", commit, err, out)
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", root, commit, src))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("extracting %s: %v %s", commit, err, out)
	}
	build := exec.Command("go", "build", "-trimpath", "-o", bin+".tmp",
		"-ldflags", "-X github.com/gantry-dev/gantry/internal/version.Version=previous-"+commit[:7], "./cmd/gantry-agent")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the agent of %s: %v\n%s", commit, err, out)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runAgent replaces the running agent of the worker by binary with the same arguments for the rest of
// the test, and returns when the new one wrote its CapacityReport; the worker's own agent comes back at
// the end.
func runAgent(t *testing.T, worker, binary string) (logFrom int64) {
	t.Helper()
	name := "gantry-agent-" + strings.TrimPrefix(worker, "worker-")
	proc, err := tb.Process(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Stop(); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(tb.Dir, "logs", name+".log")
	if st, err := os.Stat(log); err == nil {
		logFrom = st.Size()
	}
	started := time.Now()
	replaced, err := tb.Start(name, append([]string{binary}, withoutNewerFlags(proc.Args[1:])...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := replaced.Stop(); err != nil {
			t.Errorf("stopping the replaced agent: %v", err)
		}
		if _, err := tb.Start(name, proc.Args); err != nil {
			t.Errorf("restarting %s: %v", name, err)
		}
	})
	eventually(t, worker+"'s CapacityReport written by the agent of "+binary, time.Minute, poll, func() error {
		var r gantry.CapacityReport
		if err := tb.Worker(worker).Client.Get(context.Background(), types.NamespacedName{Namespace: "gantry-system", Name: worker}, &r); err != nil {
			return err
		}
		if r.Status.HeartbeatTime.Time.Before(started.Truncate(time.Second)) {
			return fmt.Errorf("last heartbeat %s, before the agent started", r.Status.HeartbeatTime)
		}
		return nil
	})
	return logFrom
}

// newerFlags are the agent's flags the previous release does not know; it serves its metrics over
// plain HTTP, as the testbed asks of this one.
var newerFlags = []string{"--metrics-secure"}

func withoutNewerFlags(args []string) []string {
	var out []string
	for _, a := range args {
		if !slices.ContainsFunc(newerFlags, func(f string) bool { return a == f || strings.HasPrefix(a, f+"=") }) {
			out = append(out, a)
		}
	}
	return out
}

// errorsLogged are the lines at level error in the log after offset.
func errorsLogged(t *testing.T, path string, offset int64) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		t.Fatal(err)
	}
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if strings.Contains(s.Text(), `"level":"error"`) {
			out = append(out, s.Text())
		}
	}
	return out
}

// The version-skew policy (docs/upgrading.md): this hub works with the agent of the release before,
// which speaks the API's earlier version (gantry.dev/v1alpha1, still served) on a worker whose CRDs are
// this release's. Jobs sent to that worker are admitted by it, created there once and complete, and it
// logs no error.
func TestTheAgentOfThePreviousReleaseRunsJobsForThisHub(t *testing.T) {
	agent := previousAgent(t)
	ns := newNamespace(t, "skew")
	dumpOnFailure(t, ns)
	ownQueueOn(t, ns, "worker-2", 4)
	logFrom := runAgent(t, "worker-2", agent)

	var jobs []*batchv1.Job
	for i := range 3 {
		job := makeJob(ns, fmt.Sprintf("skew-%d", i)).pods(2).gpus(1).runsFor("3s").obj()
		submit(t, job)
		jobs = append(jobs, job)
	}
	allComplete(t, jobs, 3*time.Minute)
	for _, job := range jobs {
		if wl := hubWorkload(t, job); wl.Status.ClusterName != "worker-2" {
			t.Errorf("%s ran on %q, want worker-2", job.Name, wl.Status.ClusterName)
		}
	}
	checkOneRun(t, ns)
	checkCreatedOnceOnTheWinner(t, jobs)
	nothingLeftAfterDeletion(t, ns)
	if errs := errorsLogged(t, filepath.Join(tb.Dir, "logs", "gantry-agent-2.log"), logFrom); len(errs) > 0 {
		t.Errorf("the previous release's agent logged %d errors:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

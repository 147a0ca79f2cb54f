package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// hubLeader returns the holder of the hub's leader election lease.
func hubLeader() (string, error) { return leaseHolder(tb.Hub, "gantry-hub") }

// TestAPausedHubLeaderIsReplacedAndWritesNothingWhenItWakes runs a second hub replica, pauses the leader
// (SIGSTOP) while jobs are being dispatched and run, and lets it sleep past its lease. The other replica
// takes over and carries on, more jobs arrive, and then the old leader wakes with its reconciles
// mid-way: it must write nothing and exit. Every job completes once, and the etcd ledger of the workers
// shows no job in two places at any instant.
func TestAPausedHubLeaderIsReplacedAndWritesNothingWhenItWakes(t *testing.T) {
	ns := newNamespace(t, "e2e-replicas")
	dumpOnFailure(t, ns)
	first, leader := twoHubs(t)

	var submitted []*batchv1.Job
	for i := range 6 {
		submitted = append(submitted, makeJob(ns, fmt.Sprintf("before-%d", i)).gpus(4).runsFor("20s").obj())
	}
	for _, job := range submitted {
		submit(t, job)
	}
	eventually(t, "some jobs dispatched", time.Minute, poll, func() error {
		_, err := winnerOf(submitted[0])
		return err
	})
	logBefore := logSize(t, "gantry-hub")
	if err := first.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitForAnotherLeader(t, leader)
	for i := range 4 {
		job := makeJob(ns, fmt.Sprintf("after-%d", i)).gpus(4).runsFor("5s").obj()
		submitted = append(submitted, job)
		submit(t, job)
	}
	eventually(t, "the new leader dispatching the new jobs", 2*time.Minute, poll, func() error {
		_, err := winnerOf(submitted[len(submitted)-1])
		return err
	})
	woken := time.Now()
	if err := first.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the old leader exiting", time.Minute, poll, func() error {
		if first.Running() {
			return fmt.Errorf("pid %d still running", first.PID)
		}
		return nil
	})
	woke := logSince(t, "gantry-hub", logBefore)
	if !strings.Contains(woke, "leader election lost") {
		t.Errorf("the old leader exited without saying it lost the election; its log after the pause:\n%s", tailLines(woke, 30))
	}
	t.Logf("writes the old leader refused when it woke: %d", strings.Count(woke, "Refused a write"))
	checkNoWritesSince(t, leader, woken)

	allComplete(t, submitted, 4*time.Minute)
	checkOneRun(t, ns)
	nothingLeftAfterDeletion(t, ns)
}

// twoHubs starts a second hub replica, a standby of the testbed's, and returns the leading one and its
// identity; the testbed gets its one hub back at the end.
func twoHubs(t *testing.T) (*testbed.Process, string) {
	t.Helper()
	first, err := tb.Process("gantry-hub")
	if err != nil {
		t.Fatal(err)
	}
	leader, err := hubLeader()
	if err != nil || leader == "" {
		t.Fatalf("no hub leader before the test: %q %v", leader, err)
	}
	args, err := first.WithPorts()
	if err != nil {
		t.Fatal(err)
	}
	second, err := tb.Start("gantry-hub-2", args)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restoreOneHub(t, first, second) })
	return first, leader
}

// waitForAnotherLeader waits until a hub replica other than old holds the lease.
func waitForAnotherLeader(t *testing.T, old string) {
	t.Helper()
	eventually(t, "another hub replica leading", 2*time.Minute, poll, func() error {
		if now, err := hubLeader(); err != nil || now == old || now == "" {
			return fmt.Errorf("leader %q (%v)", now, err)
		}
		return nil
	})
}

// TestTheHubLeaderKilledMidBurstIsReplacedByTheStandby kills the leader of two hub replicas with SIGKILL
// while a burst is being dispatched, as a node lost under it would: the standby takes the lease once it
// lapses and finishes the burst and the jobs after it. Every job completes once, each Job created once
// on its winner.
func TestTheHubLeaderKilledMidBurstIsReplacedByTheStandby(t *testing.T) {
	ns := newNamespace(t, "e2e-leader-killed")
	dumpOnFailure(t, ns)
	first, leader := twoHubs(t)
	var submitted []*batchv1.Job
	for i := range 8 {
		job := makeJob(ns, fmt.Sprintf("burst-%d", i)).gpus(4).runsFor("5s").obj()
		submitted = append(submitted, job)
		submit(t, job)
	}
	eventually(t, "the burst being dispatched", time.Minute, 100*time.Millisecond, func() error {
		_, err := winnerOf(submitted[0])
		return err
	})
	if err := first.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitForAnotherLeader(t, leader)
	for i := range 4 {
		job := makeJob(ns, fmt.Sprintf("after-%d", i)).gpus(4).runsFor("3s").obj()
		submitted = append(submitted, job)
		submit(t, job)
	}
	allComplete(t, submitted, 4*time.Minute)
	checkPromiseKept(t, submitted)
}

// checkNoWritesSince reads the audit logs of the hub and the workers: the replica wrote before, and no
// write of its took effect since the time given.
func checkNoWritesSince(t *testing.T, identity string, since time.Time) {
	t.Helper()
	before := 0
	for _, c := range tb.All() {
		events, err := tb.Audit(c.Name, "replica/"+identity)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			switch {
			case !e.Applied():
			case e.Received.Before(since):
				before++
			default:
				t.Errorf("the old leader's write took effect on %s after it woke: %s %s at %s (%d)",
					c.Name, e.Verb, e.RequestURI, e.Received.Format(time.RFC3339Nano), e.Response.Code)
			}
		}
	}
	if before == 0 {
		t.Errorf("the audit logs show no write of replica %s at all; the check above proves nothing", identity)
	}
	t.Logf("writes of the old leader that took effect before its pause: %d", before)
}

// restoreOneHub leaves the testbed as the test found it: one hub, started from the first replica's
// command line, leading.
func restoreOneHub(t *testing.T, first, second *testbed.Process) {
	if first.Running() {
		_ = first.Signal(syscall.SIGCONT)
		_ = first.Stop()
	}
	if _, err := tb.Start("gantry-hub", first.Args); err != nil {
		t.Errorf("restarting gantry-hub: %v", err)
		return
	}
	// The second replica hands the lease on as it stops.
	if err := second.Stop(); err != nil {
		t.Errorf("stopping the second hub: %v", err)
	}
	_ = os.Remove(filepath.Join(tb.Dir, "pids", "gantry-hub-2.pid"))
	eventually(t, "gantry-hub leading again", 2*time.Minute, poll, func() error {
		leader, err := hubLeader()
		if err != nil || leader == "" {
			return fmt.Errorf("leader %q (%v)", leader, err)
		}
		for _, wc := range testbed.WorkerNames {
			if err := connected(wc); err != nil {
				return err
			}
		}
		return nil
	})
}

// connected reports nil once the WorkerCluster says Connected and the hub leads.
func connected(name string) error {
	var wc gantry.WorkerCluster
	if err := tb.Hub.Client.Get(context.Background(), types.NamespacedName{Name: name}, &wc); err != nil {
		return err
	}
	for _, c := range wc.Status.Conditions {
		if c.Type == gantry.ClusterConnected && c.Status == "True" {
			return nil
		}
	}
	return fmt.Errorf("%s not Connected: %s", name, conditions(wc.Status.Conditions))
}

func logSize(t *testing.T, name string) int64 {
	fi, err := os.Stat(filepath.Join(tb.Dir, "logs", name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func logSince(t *testing.T, name string, offset int64) string {
	data, err := os.ReadFile(filepath.Join(tb.Dir, "logs", name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	if offset > int64(len(data)) {
		return ""
	}
	return string(data[offset:])
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

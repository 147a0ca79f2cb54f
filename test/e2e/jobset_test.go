package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestJobSetOnWorkers runs hack/testbed/check-jobset.sh on the suite's testbed: on each worker a JobSet
// created directly there is defaulted and validated by JobSet's webhooks, runs its pods on kwok nodes,
// reaches Completed, and leaves nothing behind once deleted. It works in a namespace of its own
// (jobset-check), which no other test uses.
func TestJobSetOnWorkers(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "testbed", "check-jobset.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GANTRY_DEV_DIR="+tb.Dir, "GANTRY_CHECK_TIMEOUT=90")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("hack/testbed/check-jobset.sh:\n%s", out)
	if err != nil {
		t.Fatalf("hack/testbed/check-jobset.sh: %v", err)
	}
}

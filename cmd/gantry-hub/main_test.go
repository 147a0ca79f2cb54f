package main

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// TestMain runs the hub's main in place of the tests when a test re-executes this binary, so that a test
// checks what the real command prints without building it.
func TestMain(m *testing.M) {
	if os.Getenv("GANTRY_TEST_RUN_MAIN") == "1" {
		os.Args = append([]string{"gantry-hub"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestVersionFlag(t *testing.T) {
	cmd := exec.Command(os.Args[0], "--version")
	cmd.Env = append(os.Environ(), "GANTRY_TEST_RUN_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gantry-hub --version: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`^gantry-hub \S+ \(\S+\)\n$`).Match(out) {
		t.Errorf("gantry-hub --version printed %q, want \"gantry-hub <version> (<commit>)\"", out)
	}
}

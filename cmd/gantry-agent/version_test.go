package main

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// TestMain runs the agent's main in place of the tests when a test re-executes this binary, so that a
// test checks what the real command prints without building it.
func TestMain(m *testing.M) {
	if os.Getenv("GANTRY_TEST_RUN_MAIN") == "1" {
		os.Args = append([]string{"gantry-agent"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestVersionFlag(t *testing.T) {
	// --version needs none of the flags that running requires.
	o, err := parseFlags([]string{"--version"})
	if err != nil || !o.version {
		t.Fatalf("parseFlags(--version) = %+v, %v", o, err)
	}
	cmd := exec.Command(os.Args[0], "--version")
	cmd.Env = append(os.Environ(), "GANTRY_TEST_RUN_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gantry-agent --version: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`^gantry-agent \S+ \(\S+\)\n$`).Match(out) {
		t.Errorf("gantry-agent --version printed %q, want \"gantry-agent <version> (<commit>)\"", out)
	}
}

package main

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
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

// A provider file the hub cannot use stops it at start, saying why, before it connects anywhere.
func TestBadProviderFileStopsTheHub(t *testing.T) {
	dir := t.TempDir()
	bad := dir + "/providers.json"
	if err := os.WriteFile(bad, []byte(`{"providers":[{"name":"ocm","execConfig":{"apiVersion":"v9","command":"/bin/true"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		bad:                   "provider ocm: execConfig.apiVersion \"v9\"",
		dir + "/missing.json": "failed to read access config file",
	} {
		cmd := exec.Command(os.Args[0], "--clusterprofile-provider-file="+file)
		cmd.Env = append(os.Environ(), "GANTRY_TEST_RUN_MAIN=1")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), want) {
			t.Errorf("gantry-hub with %s: %v\n%s\nwant exit 2 saying %q", file, err, out, want)
		}
	}
}

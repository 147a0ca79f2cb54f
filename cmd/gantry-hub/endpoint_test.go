package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The hub refuses to serve the endpoint in plain HTTP beyond loopback, and says what to do, before it
// connects to anything.
func TestEndpointWithoutTLSBeyondLoopbackIsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--endpoint-bind-address", ":8443"},
		{"--endpoint-bind-address", "10.0.0.1:8443", "--endpoint-tls-cert-file", "tls.crt"},
	} {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "GANTRY_TEST_RUN_MAIN=1")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Fatalf("gantry-hub %v: %v\n%s", args, err, out)
		}
		if !strings.Contains(string(out), "--endpoint-tls-cert-file and --endpoint-tls-key-file") {
			t.Errorf("gantry-hub %v says %q", args, out)
		}
	}
}

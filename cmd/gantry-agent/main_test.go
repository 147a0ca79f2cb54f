package main

import (
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--cluster-name", "worker-1"})
	if err != nil {
		t.Fatal(err)
	}
	if o.namespace != "gantry-system" || o.metrics.BindAddress != ":8080" || !o.metrics.Secure || o.probeAddr != ":8081" || !o.leaderElect ||
		o.kubeAPIQPS != 200 || o.kubeAPIBurst != 400 || o.kubeconfig != "" {
		t.Errorf("defaults: %+v", o)
	}

	cases := map[string]struct {
		args []string
		want string
	}{
		"missing cluster name": {nil, "--cluster-name is required"},
		"invalid cluster name": {[]string{"--cluster-name", "Worker_1"}, "not a valid object name"},
		"stray argument":       {[]string{"--cluster-name", "w", "extra"}, "unexpected arguments"},
		"bad qps":              {[]string{"--cluster-name", "w", "--kube-api-qps", "0"}, "must be positive"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parseFlags(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

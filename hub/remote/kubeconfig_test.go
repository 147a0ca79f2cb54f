package remote

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig/workerconfigtest"
)

func TestIsHub(t *testing.T) {
	hub := HubIdentity{Host: "https://Hub.example:6443", UID: "hub-uid"}
	cases := map[string]struct {
		hub  HubIdentity
		host string
		uid  types.UID
		want bool
	}{
		"same URL":                  {hub: hub, host: "https://Hub.example:6443", want: true},
		"case and trailing dot":     {hub: hub, host: "https://hub.EXAMPLE.:6443/", want: true},
		"other port":                {hub: hub, host: "https://hub.example:7443"},
		"other host":                {hub: hub, host: "https://worker.example:6443"},
		"default port":              {hub: HubIdentity{Host: "https://hub.example"}, host: "https://hub.example:443", want: true},
		"bare host:port":            {hub: HubIdentity{Host: "10.0.0.1:6443"}, host: "https://10.0.0.1:6443", want: true},
		"IPv6 spellings":            {hub: HubIdentity{Host: "https://[::1]:6443"}, host: "https://[0:0::1]:6443", want: true},
		"other name, same cluster":  {hub: hub, host: "https://hub-alias.example:6443", uid: "hub-uid", want: true},
		"other name, other cluster": {hub: hub, host: "https://hub-alias.example:6443", uid: "worker-uid"},
		"no UIDs known":             {hub: HubIdentity{Host: "https://hub.example"}, host: "https://worker.example"},
		"hub UID unknown":           {hub: HubIdentity{Host: "https://hub.example"}, host: "https://worker.example", uid: "worker-uid"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.hub.isHub(tc.host, tc.uid); got != tc.want {
				t.Fatalf("isHub(%q, %q) = %v, want %v", tc.host, tc.uid, got, tc.want)
			}
		})
	}
}

// A refused kubeconfig goes nowhere: the connect path dials nothing. The last case is the control: an
// accepted kubeconfig does reach the listener.
func TestRefusedKubeconfigsAreNeverDialed(t *testing.T) {
	l := workerconfigtest.Listen(t)
	server := l.Server()
	// No CA data: the fake one would fail before anything is dialed, and the control must dial.
	noCA := strings.Replace(workerconfigtest.WithServer(server), "    certificate-authority-data: ZmFrZQ==\n", "", 1)
	kc := func(old, new string) []byte { return []byte(strings.Replace(noCA, old, new, 1)) }
	loopback := Options{AllowLoopback: true}
	cases := []struct {
		name       string
		kubeconfig []byte
		opts       Options
		hub        HubIdentity
		wantReason string
	}{
		{"token file", kc("    token: abc", "    tokenFile: /etc/hostname"), loopback, HubIdentity{}, gantry.ReasonInsecureKubeconfig},
		{"skip tls verify", kc("    server:", "    insecure-skip-tls-verify: true\n    server:"), loopback, HubIdentity{}, gantry.ReasonInsecureKubeconfig},
		{"proxy", kc("    server:", "    proxy-url: "+server+"\n    server:"), loopback, HubIdentity{}, gantry.ReasonInsecureKubeconfig},
		{"impersonation", kc("    token: abc", "    token: abc\n    as: system:admin"), loopback, HubIdentity{}, gantry.ReasonInsecureKubeconfig},
		{"loopback", kc("", ""), Options{}, HubIdentity{}, gantry.ReasonInvalidKubeconfig},
		{"the hub's own server", kc("", ""), loopback, HubIdentity{Host: server, UID: "hub-uid"}, gantry.ReasonInvalidKubeconfig},
		{"malformed", kc("clusters:", "clusters: ["), loopback, HubIdentity{}, gantry.ReasonInvalidKubeconfig},
	}
	for _, tc := range cases {
		err := ensureFromSecret(t, tc.opts, tc.kubeconfig, tc.hub.Host)
		if ReasonOf(err) != tc.wantReason {
			t.Errorf("%s: error %v, want reason %s", tc.name, err, tc.wantReason)
		}
	}
	if n := l.Accepted(); n != 0 {
		t.Fatalf("refused kubeconfigs made %d connections", n)
	}
	if err := ensureFromSecret(t, loopback, kc("", ""), ""); ReasonOf(err) != gantry.ReasonUnreachable {
		t.Fatalf("control: error %v, want %s", err, gantry.ReasonUnreachable)
	}
	if l.Accepted() == 0 {
		t.Fatal("control: an accepted kubeconfig did not reach the listener, so the test proves nothing")
	}
}

// ensureFromSecret connects a Manager to the worker of a kubeconfig Secret as the WorkerCluster
// controller does: Access makes the Target, Manager connects it.
func ensureFromSecret(t *testing.T, opts Options, kubeconfig []byte, hubHost string) error {
	t.Helper()
	if hubHost == "" {
		hubHost = "https://hub.example:6443"
	}
	a := &Access{Hub: hubReader(t, kubeconfigSecret(string(kubeconfig))), Namespace: "gantry-system", Policy: opts.Policy(), HubHost: hubHost}
	wc := &gantry.WorkerCluster{Spec: gantry.WorkerClusterSpec{KubeconfigSecretRef: &gantry.SecretReference{Name: "worker-1-kubeconfig"}}}
	target, err := a.For(context.Background(), wc)
	if err != nil {
		return err
	}
	return NewManager(runtime.NewScheme(), opts).Ensure(context.Background(), "w", target)
}

// An exec plugin is never run: the canary script would leave a marker file. The control, with insecure
// kubeconfigs allowed, shows the canary works.
func TestExecPluginIsNeverRun(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	script := filepath.Join(dir, "canary.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	l := workerconfigtest.Listen(t)
	noCA := strings.Replace(workerconfigtest.WithServer(l.Server()), "    certificate-authority-data: ZmFrZQ==\n", "", 1)
	kubeconfig := []byte(strings.Replace(noCA, "    token: abc",
		"    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: "+script+"\n      interactiveMode: Never", 1))

	err := ensureFromSecret(t, Options{AllowLoopback: true}, kubeconfig, "")
	if ReasonOf(err) != gantry.ReasonInsecureKubeconfig {
		t.Fatalf("error %v, want %s", err, gantry.ReasonInsecureKubeconfig)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the exec plugin ran (marker: %v)", err)
	}
	if l.Accepted() != 0 {
		t.Fatal("the refused kubeconfig was dialed")
	}

	err = ensureFromSecret(t, Options{AllowLoopback: true, AllowInsecureKubeconfigs: true}, kubeconfig, "")
	if _, statErr := os.Stat(marker); statErr != nil {
		t.Logf("control's error: %v", err)
		t.Fatalf("control: the allowed exec plugin did not run, so the test proves nothing: %v", err)
	}
}

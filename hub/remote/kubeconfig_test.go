package remote

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
)

const (
	baseServer = "https://worker.example:6443"
	base       = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://worker.example:6443
    certificate-authority-data: ZmFrZQ==
users:
- name: u
  user:
    token: abc
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`
)

// with returns the base kubeconfig with old replaced by new.
func with(old, new string) string { return strings.Replace(base, old, new, 1) }

// withUser returns the base kubeconfig with the user's token replaced by the given lines.
func withUser(lines string) string { return with("    token: abc", lines) }

// withServer returns the base kubeconfig with another server URL.
func withServer(server string) string { return with(baseServer, server) }

const execUser = "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      interactiveMode: Never"

func TestRESTConfig(t *testing.T) {
	oneMiB := base + "#" + strings.Repeat("x", MaxKubeconfigBytes-len(base)-2) + "\n"
	cases := map[string]struct {
		kubeconfig  string
		policy      Policy
		wantHost    string // when accepted; baseServer if empty
		wantReason  string // empty: accepted
		wantMessage string
	}{
		"embedded token":             {kubeconfig: base},
		"embedded client cert":       {kubeconfig: withUser("    client-certificate-data: ZmFrZQ==\n    client-key-data: ZmFrZQ==")},
		"private address":            {kubeconfig: withServer("https://10.1.2.3:6443"), wantHost: "https://10.1.2.3:6443"},
		"exactly 1 MiB":              {kubeconfig: oneMiB},
		"empty":                      {kubeconfig: "", wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "the kubeconfig is empty"},
		"blank":                      {kubeconfig: " \n\t\n", wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "the kubeconfig is empty"},
		"not yaml":                   {kubeconfig: "{nope: [", wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "parsing kubeconfig"},
		"plain text":                 {kubeconfig: "just some text", wantReason: gantry.ReasonInvalidKubeconfig},
		"yaml but no kubeconfig":     {kubeconfig: "hello: world\n", wantReason: gantry.ReasonInvalidKubeconfig},
		"over 1 MiB":                 {kubeconfig: oneMiB + "#\n", wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "more than the 1048576 the hub reads"},
		"over 1 MiB, not parsed":     {kubeconfig: strings.Repeat("{", MaxKubeconfigBytes+1), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "more than the 1048576"},
		"dangling current context":   {kubeconfig: with("current-context: c", "current-context: x"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "specified context: x"},
		"no current context":         {kubeconfig: with("current-context: c", "current-context: \"\""), wantReason: gantry.ReasonInvalidKubeconfig},
		"context without cluster":    {kubeconfig: with("{cluster: c, user: u}", "{cluster: nope, user: u}"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "nope"},
		"context without user":       {kubeconfig: with("{cluster: c, user: u}", "{cluster: c, user: nope}"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "nope"},
		"no server":                  {kubeconfig: with("    server: "+baseServer+"\n", ""), wantReason: gantry.ReasonInvalidKubeconfig},
		"exec plugin":                {kubeconfig: withUser(execUser), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "user u runs an exec plugin"},
		"exec plugin allowed":        {kubeconfig: withUser(execUser), policy: Policy{AllowInsecure: true}},
		"auth provider":              {kubeconfig: withUser("    auth-provider:\n      name: oidc"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "auth provider plugin"},
		"token file":                 {kubeconfig: withUser("    tokenFile: /var/run/token"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "reads tokenFile /var/run/token"},
		"client cert file":           {kubeconfig: withUser("    client-certificate: /etc/cert.pem\n    client-key: /etc/key.pem"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "client certificate or key file"},
		"ca file":                    {kubeconfig: with("certificate-authority-data: ZmFrZQ==", "certificate-authority: /etc/ca.pem"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "certificate-authority file /etc/ca.pem"},
		"unused user reads a file":   {kubeconfig: with("contexts:", "- name: other\n  user:\n    tokenFile: /etc/shadow\ncontexts:"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "user other reads tokenFile"},
		"skip tls verify":            {kubeconfig: with("certificate-authority-data: ZmFrZQ==", "insecure-skip-tls-verify: true"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "skips TLS verification"},
		"basic auth":                 {kubeconfig: withUser("    username: admin\n    password: s3cret"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "basic authentication"},
		"http server":                {kubeconfig: withServer("http://worker.example:8080"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "is http"},
		"http server allowed":        {kubeconfig: withServer("http://worker.example:8080"), policy: Policy{AllowInsecure: true}, wantHost: "http://worker.example:8080"},
		"user info in the URL":       {kubeconfig: withServer("https://admin:s3cret@worker.example:6443"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "user information in its server URL"},
		"proxy url":                  {kubeconfig: with("    certificate-authority-data", "    proxy-url: http://proxy.example:3128\n    certificate-authority-data"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "proxy-url"},
		"impersonate user":           {kubeconfig: withUser("    token: abc\n    as: system:admin"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "impersonates"},
		"impersonate groups":         {kubeconfig: withUser("    token: abc\n    as-groups: [system:masters]"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "impersonates"},
		"impersonate uid":            {kubeconfig: withUser("    token: abc\n    as-uid: \"0\""), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "impersonates"},
		"impersonate extra":          {kubeconfig: withUser("    token: abc\n    as-user-extra: {scopes: [all]}"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "impersonates"},
		"not https":                  {kubeconfig: withServer("ftp://worker.example"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "must be an https:// URL"},
		"no scheme":                  {kubeconfig: withServer("worker.example:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "must be an https:// URL"},
		"link-local":                 {kubeconfig: withServer("https://169.254.169.254"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "169.254.169.254 is a link-local address"},
		"link-local v6":              {kubeconfig: withServer("https://[fe80::1%25eth0]:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "link-local"},
		"link-local despite flags":   {kubeconfig: withServer("https://169.254.169.254"), policy: Policy{AllowInsecure: true, AllowLoopback: true}, wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "link-local"},
		"unspecified":                {kubeconfig: withServer("https://0.0.0.0:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "unspecified address"},
		"unspecified v6":             {kubeconfig: withServer("https://[::]:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "unspecified address"},
		"multicast":                  {kubeconfig: withServer("https://224.0.0.1"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "multicast"},
		"loopback":                   {kubeconfig: withServer("https://127.0.0.1:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "127.0.0.1 is a loopback address (--allow-loopback-workers"},
		"loopback 127/8":             {kubeconfig: withServer("https://127.8.9.10:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "loopback address"},
		"loopback v6":                {kubeconfig: withServer("https://[::1]:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "loopback address"},
		"loopback v4-mapped":         {kubeconfig: withServer("https://[::ffff:127.0.0.1]:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "loopback address"},
		"localhost":                  {kubeconfig: withServer("https://localhost:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "loopback name"},
		"localhost, fully":           {kubeconfig: withServer("https://LocalHost.:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "loopback name"},
		"below localhost":            {kubeconfig: withServer("https://api.localhost:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "loopback name"},
		"loopback allowed":           {kubeconfig: withServer("https://127.0.0.1:6443"), policy: Policy{AllowLoopback: true}, wantHost: "https://127.0.0.1:6443"},
		"localhost allowed":          {kubeconfig: withServer("https://localhost:6443"), policy: Policy{AllowLoopback: true}, wantHost: "https://localhost:6443"},
		"loopback, insecure only":    {kubeconfig: withServer("https://[::1]:6443"), policy: Policy{AllowInsecure: true}, wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "loopback"},
		"short address":              {kubeconfig: withServer("https://127.1:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "not an IP address in canonical form"},
		"decimal address":            {kubeconfig: withServer("https://2130706433:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "canonical form"},
		"octal address":              {kubeconfig: withServer("https://0177.0.0.1:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "canonical form"},
		"hex address":                {kubeconfig: withServer("https://0x7f.0.0.0x1:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "canonical form"},
		"hex-looking name is fine":   {kubeconfig: withServer("https://cafe.example:6443"), wantHost: "https://cafe.example:6443"},
		"numeric label, name TLD":    {kubeconfig: withServer("https://10.example:6443"), wantHost: "https://10.example:6443"},
		"unused cluster at loopback": {kubeconfig: with("users:", "- name: other\n  cluster:\n    server: https://127.0.0.1\nusers:"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "cluster other"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := RESTConfig([]byte(tc.kubeconfig), tc.policy)
			if tc.wantReason == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				want := tc.wantHost
				if want == "" {
					want = baseServer
				}
				if cfg.Host != want {
					t.Fatalf("host %q, want %q", cfg.Host, want)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Reason != tc.wantReason {
				t.Fatalf("error %v, want reason %s", err, tc.wantReason)
			}
			if !strings.Contains(ce.Message, tc.wantMessage) {
				t.Fatalf("message %q lacks %q", ce.Message, tc.wantMessage)
			}
			if strings.Contains(ce.Message, "s3cret") {
				t.Fatalf("message %q shows the password", ce.Message)
			}
		})
	}
}

func TestKubeconfigFrom(t *testing.T) {
	cases := map[string]struct {
		data        map[string][]byte
		wantMessage string // empty: the kubeconfig comes back
	}{
		"present":     {data: map[string][]byte{KubeconfigKey: []byte(base)}},
		"key missing": {data: map[string][]byte{"config": []byte(base)}, wantMessage: "Secret gantry-system/w has no data key kubeconfig"},
		"no data":     {wantMessage: "has no data key kubeconfig"},
		"empty":       {data: map[string][]byte{KubeconfigKey: {}}, wantMessage: "data key kubeconfig of Secret gantry-system/w is empty"},
		"blank":       {data: map[string][]byte{KubeconfigKey: []byte("\n  \n")}, wantMessage: "is empty"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gantry-system", Name: "w"}, Data: tc.data}
			data, err := KubeconfigFrom(secret)
			if tc.wantMessage == "" {
				if err != nil || string(data) != base {
					t.Fatalf("got %q, %v", data, err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Reason != gantry.ReasonInvalidKubeconfig || !strings.Contains(ce.Message, tc.wantMessage) {
				t.Fatalf("error %v, want InvalidKubeconfig with %q", err, tc.wantMessage)
			}
		})
	}
}

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

// countingListener accepts connections, counts them and answers in plain text, which a TLS client
// gives up on at once.
type countingListener struct {
	net.Listener
	accepted atomic.Int32
}

func listen(t *testing.T) *countingListener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: l}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			// Counted before the answer, so a client that got it sees the count.
			cl.accepted.Add(1)
			_, _ = conn.Write([]byte("HTTP/1.0 400 no TLS here\r\n\r\n"))
			_ = conn.Close()
		}
	}()
	return cl
}

func (l *countingListener) server() string { return "https://" + l.Addr().String() }

func TestGuardDial(t *testing.T) {
	cases := map[string]struct {
		host          string // empty: the listener's
		allowLoopback bool
		wantReason    string // empty: the dial goes through
	}{
		"server resolves to loopback": {wantReason: gantry.ReasonInvalidKubeconfig},
		"loopback allowed":            {allowLoopback: true},
		"other hosts are not guarded": {host: "https://worker.example:6443"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := listen(t)
			if tc.host == "" {
				tc.host = l.server()
			}
			cfg := &rest.Config{Host: tc.host}
			guardDial(cfg, tc.allowLoopback)
			conn, err := cfg.Dial(context.Background(), "tcp", l.Addr().String())
			if tc.wantReason == "" {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				_ = conn.Close()
				return
			}
			if ReasonOf(err) != tc.wantReason || !strings.Contains(err.Error(), "resolves to 127.0.0.1, a loopback address") {
				t.Fatalf("dial error %v, want %s", err, tc.wantReason)
			}
			if l.accepted.Load() != 0 {
				t.Fatal("the refused address was connected to")
			}
		})
	}
}

// A refused kubeconfig goes nowhere: the connect path dials nothing. The last case is the control: an
// accepted kubeconfig does reach the listener.
func TestRefusedKubeconfigsAreNeverDialed(t *testing.T) {
	l := listen(t)
	server := l.server()
	// No CA data: the fake one would fail before anything is dialed, and the control must dial.
	noCA := strings.Replace(withServer(server), "    certificate-authority-data: ZmFrZQ==\n", "", 1)
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
	if n := l.accepted.Load(); n != 0 {
		t.Fatalf("refused kubeconfigs made %d connections", n)
	}
	if err := ensureFromSecret(t, loopback, kc("", ""), ""); ReasonOf(err) != gantry.ReasonUnreachable {
		t.Fatalf("control: error %v, want %s", err, gantry.ReasonUnreachable)
	}
	if l.accepted.Load() == 0 {
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
	l := listen(t)
	noCA := strings.Replace(withServer(l.server()), "    certificate-authority-data: ZmFrZQ==\n", "", 1)
	kubeconfig := []byte(strings.Replace(noCA, "    token: abc",
		"    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: "+script+"\n      interactiveMode: Never", 1))

	err := ensureFromSecret(t, Options{AllowLoopback: true}, kubeconfig, "")
	if ReasonOf(err) != gantry.ReasonInsecureKubeconfig {
		t.Fatalf("error %v, want %s", err, gantry.ReasonInsecureKubeconfig)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the exec plugin ran (marker: %v)", err)
	}
	if l.accepted.Load() != 0 {
		t.Fatal("the refused kubeconfig was dialed")
	}

	err = ensureFromSecret(t, Options{AllowLoopback: true, AllowInsecureKubeconfigs: true}, kubeconfig, "")
	if _, statErr := os.Stat(marker); statErr != nil {
		t.Logf("control's error: %v", err)
		t.Fatalf("control: the allowed exec plugin did not run, so the test proves nothing: %v", err)
	}
}

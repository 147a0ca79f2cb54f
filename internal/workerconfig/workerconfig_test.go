package workerconfig_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
	"github.com/gantry-dev/gantry/internal/workerconfig/workerconfigtest"
)

func TestRESTConfig(t *testing.T) {
	oneMiB := workerconfigtest.Base + "#" + strings.Repeat("x", workerconfig.MaxBytes-len(workerconfigtest.Base)-2) + "\n"
	cases := map[string]struct {
		kubeconfig  string
		policy      workerconfig.Policy
		wantHost    string // when accepted; workerconfigtest.BaseServer if empty
		wantReason  string // empty: accepted
		wantMessage string
	}{
		"embedded token":             {kubeconfig: workerconfigtest.Base},
		"embedded client cert":       {kubeconfig: workerconfigtest.WithUser("    client-certificate-data: ZmFrZQ==\n    client-key-data: ZmFrZQ==")},
		"private address":            {kubeconfig: workerconfigtest.WithServer("https://10.1.2.3:6443"), wantHost: "https://10.1.2.3:6443"},
		"exactly 1 MiB":              {kubeconfig: oneMiB},
		"empty":                      {kubeconfig: "", wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "the kubeconfig is empty"},
		"blank":                      {kubeconfig: " \n\t\n", wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "the kubeconfig is empty"},
		"not yaml":                   {kubeconfig: "{nope: [", wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "parsing kubeconfig"},
		"plain text":                 {kubeconfig: "just some text", wantReason: gantry.ReasonInvalidKubeconfig},
		"yaml but no kubeconfig":     {kubeconfig: "hello: world\n", wantReason: gantry.ReasonInvalidKubeconfig},
		"over 1 MiB":                 {kubeconfig: oneMiB + "#\n", wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "more than the 1048576 the hub reads"},
		"over 1 MiB, not parsed":     {kubeconfig: strings.Repeat("{", workerconfig.MaxBytes+1), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "more than the 1048576"},
		"dangling current context":   {kubeconfig: workerconfigtest.With("current-context: c", "current-context: x"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "specified context: x"},
		"no current context":         {kubeconfig: workerconfigtest.With("current-context: c", "current-context: \"\""), wantReason: gantry.ReasonInvalidKubeconfig},
		"context without cluster":    {kubeconfig: workerconfigtest.With("{cluster: c, user: u}", "{cluster: nope, user: u}"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "nope"},
		"context without user":       {kubeconfig: workerconfigtest.With("{cluster: c, user: u}", "{cluster: c, user: nope}"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "nope"},
		"no server":                  {kubeconfig: workerconfigtest.With("    server: "+workerconfigtest.BaseServer+"\n", ""), wantReason: gantry.ReasonInvalidKubeconfig},
		"exec plugin":                {kubeconfig: workerconfigtest.WithUser(workerconfigtest.ExecUser), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "user u runs an exec plugin"},
		"exec plugin allowed":        {kubeconfig: workerconfigtest.WithUser(workerconfigtest.ExecUser), policy: workerconfig.Policy{AllowInsecure: true}},
		"auth provider":              {kubeconfig: workerconfigtest.WithUser("    auth-provider:\n      name: oidc"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "auth provider plugin"},
		"token file":                 {kubeconfig: workerconfigtest.WithUser("    tokenFile: /var/run/token"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "reads tokenFile /var/run/token"},
		"client cert file":           {kubeconfig: workerconfigtest.WithUser("    client-certificate: /etc/cert.pem\n    client-key: /etc/key.pem"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "client certificate or key file"},
		"ca file":                    {kubeconfig: workerconfigtest.With("certificate-authority-data: ZmFrZQ==", "certificate-authority: /etc/ca.pem"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "certificate-authority file /etc/ca.pem"},
		"unused user reads a file":   {kubeconfig: workerconfigtest.With("contexts:", "- name: other\n  user:\n    tokenFile: /etc/shadow\ncontexts:"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "user other reads tokenFile"},
		"skip tls verify":            {kubeconfig: workerconfigtest.With("certificate-authority-data: ZmFrZQ==", "insecure-skip-tls-verify: true"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "skips TLS verification"},
		"basic auth":                 {kubeconfig: workerconfigtest.WithUser("    username: admin\n    password: s3cret"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "basic authentication"},
		"http server":                {kubeconfig: workerconfigtest.WithServer("http://worker.example:8080"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "is http"},
		"http server allowed":        {kubeconfig: workerconfigtest.WithServer("http://worker.example:8080"), policy: workerconfig.Policy{AllowInsecure: true}, wantHost: "http://worker.example:8080"},
		"user info in the URL":       {kubeconfig: workerconfigtest.WithServer("https://admin:s3cret@worker.example:6443"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "user information in its server URL"},
		"proxy url":                  {kubeconfig: workerconfigtest.With("    certificate-authority-data", "    proxy-url: http://proxy.example:3128\n    certificate-authority-data"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "proxy-url"},
		"impersonate user":           {kubeconfig: workerconfigtest.WithUser("    token: abc\n    as: system:admin"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "impersonates"},
		"impersonate groups":         {kubeconfig: workerconfigtest.WithUser("    token: abc\n    as-groups: [system:masters]"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "impersonates"},
		"impersonate uid":            {kubeconfig: workerconfigtest.WithUser("    token: abc\n    as-uid: \"0\""), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "impersonates"},
		"impersonate extra":          {kubeconfig: workerconfigtest.WithUser("    token: abc\n    as-user-extra: {scopes: [all]}"), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "impersonates"},
		"not https":                  {kubeconfig: workerconfigtest.WithServer("ftp://worker.example"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "must be an https:// URL"},
		"no scheme":                  {kubeconfig: workerconfigtest.WithServer("worker.example:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "must be an https:// URL"},
		"link-local":                 {kubeconfig: workerconfigtest.WithServer("https://169.254.169.254"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "169.254.169.254 is a link-local address"},
		"link-local v6":              {kubeconfig: workerconfigtest.WithServer("https://[fe80::1%25eth0]:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "link-local"},
		"link-local despite flags":   {kubeconfig: workerconfigtest.WithServer("https://169.254.169.254"), policy: workerconfig.Policy{AllowInsecure: true, AllowLoopback: true}, wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "link-local"},
		"unspecified":                {kubeconfig: workerconfigtest.WithServer("https://0.0.0.0:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "unspecified address"},
		"unspecified v6":             {kubeconfig: workerconfigtest.WithServer("https://[::]:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "unspecified address"},
		"multicast":                  {kubeconfig: workerconfigtest.WithServer("https://224.0.0.1"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "multicast"},
		"loopback":                   {kubeconfig: workerconfigtest.WithServer("https://127.0.0.1:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "127.0.0.1 is a loopback address (--allow-loopback-workers"},
		"loopback 127/8":             {kubeconfig: workerconfigtest.WithServer("https://127.8.9.10:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "loopback address"},
		"loopback v6":                {kubeconfig: workerconfigtest.WithServer("https://[::1]:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "loopback address"},
		"loopback v4-mapped":         {kubeconfig: workerconfigtest.WithServer("https://[::ffff:127.0.0.1]:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "loopback address"},
		"localhost":                  {kubeconfig: workerconfigtest.WithServer("https://localhost:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "loopback name"},
		"localhost, fully":           {kubeconfig: workerconfigtest.WithServer("https://LocalHost.:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "loopback name"},
		"below localhost":            {kubeconfig: workerconfigtest.WithServer("https://api.localhost:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "loopback name"},
		"loopback allowed":           {kubeconfig: workerconfigtest.WithServer("https://127.0.0.1:6443"), policy: workerconfig.Policy{AllowLoopback: true}, wantHost: "https://127.0.0.1:6443"},
		"localhost allowed":          {kubeconfig: workerconfigtest.WithServer("https://localhost:6443"), policy: workerconfig.Policy{AllowLoopback: true}, wantHost: "https://localhost:6443"},
		"loopback, insecure only":    {kubeconfig: workerconfigtest.WithServer("https://[::1]:6443"), policy: workerconfig.Policy{AllowInsecure: true}, wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "loopback"},
		"short address":              {kubeconfig: workerconfigtest.WithServer("https://127.1:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "not an IP address in canonical form"},
		"decimal address":            {kubeconfig: workerconfigtest.WithServer("https://2130706433:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "canonical form"},
		"octal address":              {kubeconfig: workerconfigtest.WithServer("https://0177.0.0.1:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "canonical form"},
		"hex address":                {kubeconfig: workerconfigtest.WithServer("https://0x7f.0.0.0x1:6443"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "canonical form"},
		"hex-looking name is fine":   {kubeconfig: workerconfigtest.WithServer("https://cafe.example:6443"), wantHost: "https://cafe.example:6443"},
		"numeric label, name TLD":    {kubeconfig: workerconfigtest.WithServer("https://10.example:6443"), wantHost: "https://10.example:6443"},
		"unused cluster at loopback": {kubeconfig: workerconfigtest.With("users:", "- name: other\n  cluster:\n    server: https://127.0.0.1\nusers:"), wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "cluster other"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := workerconfig.RESTConfig([]byte(tc.kubeconfig), tc.policy)
			if tc.wantReason == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				want := tc.wantHost
				if want == "" {
					want = workerconfigtest.BaseServer
				}
				if cfg.Host != want {
					t.Fatalf("host %q, want %q", cfg.Host, want)
				}
				return
			}
			var ce *workerconfig.ConfigError
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

func TestFromSecret(t *testing.T) {
	cases := map[string]struct {
		data        map[string][]byte
		wantMessage string // empty: the kubeconfig comes back
	}{
		"present":     {data: map[string][]byte{workerconfig.SecretKey: []byte(workerconfigtest.Base)}},
		"key missing": {data: map[string][]byte{"config": []byte(workerconfigtest.Base)}, wantMessage: "Secret gantry-system/w has no data key kubeconfig"},
		"no data":     {wantMessage: "has no data key kubeconfig"},
		"empty":       {data: map[string][]byte{workerconfig.SecretKey: {}}, wantMessage: "data key kubeconfig of Secret gantry-system/w is empty"},
		"blank":       {data: map[string][]byte{workerconfig.SecretKey: []byte("\n  \n")}, wantMessage: "is empty"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "gantry-system", Name: "w"}, Data: tc.data}
			data, err := workerconfig.FromSecret(secret)
			if tc.wantMessage == "" {
				if err != nil || string(data) != workerconfigtest.Base {
					t.Fatalf("got %q, %v", data, err)
				}
				return
			}
			var ce *workerconfig.ConfigError
			if !errors.As(err, &ce) || ce.Reason != gantry.ReasonInvalidKubeconfig || !strings.Contains(ce.Message, tc.wantMessage) {
				t.Fatalf("error %v, want InvalidKubeconfig with %q", err, tc.wantMessage)
			}
		})
	}
}

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
			l := workerconfigtest.Listen(t)
			if tc.host == "" {
				tc.host = l.Server()
			}
			cfg := &rest.Config{Host: tc.host}
			workerconfig.GuardDial(cfg, tc.allowLoopback)
			conn, err := cfg.Dial(context.Background(), "tcp", l.Addr().String())
			if tc.wantReason == "" {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				_ = conn.Close()
				return
			}
			var ce *workerconfig.ConfigError
			if !errors.As(err, &ce) || ce.Reason != tc.wantReason || !strings.Contains(err.Error(), "resolves to 127.0.0.1, a loopback address") {
				t.Fatalf("dial error %v, want %s", err, tc.wantReason)
			}
			if l.Accepted() != 0 {
				t.Fatal("the refused address was connected to")
			}
		})
	}
}

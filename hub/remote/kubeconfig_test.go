package remote

import (
	"errors"
	"strings"
	"testing"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
)

const base = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
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

func TestRESTConfig(t *testing.T) {
	cases := map[string]struct {
		kubeconfig    string
		allowInsecure bool
		wantReason    string
		wantMessage   string
	}{
		"embedded token":      {kubeconfig: base},
		"empty":               {kubeconfig: "", wantReason: gantry.ReasonInvalidKubeconfig, wantMessage: "no data key kubeconfig"},
		"not yaml":            {kubeconfig: "{nope: [", wantReason: gantry.ReasonInvalidKubeconfig},
		"no current context":  {kubeconfig: strings.Replace(base, "current-context: c", "current-context: x", 1), wantReason: gantry.ReasonInvalidKubeconfig},
		"exec plugin":         {kubeconfig: strings.Replace(base, "    token: abc", "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh", 1), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "runs an exec plugin"},
		"exec plugin allowed": {kubeconfig: strings.Replace(base, "    token: abc", "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      interactiveMode: Never", 1), allowInsecure: true},
		"token file":          {kubeconfig: strings.Replace(base, "    token: abc", "    tokenFile: /var/run/token", 1), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "reads tokenFile /var/run/token"},
		"client cert file":    {kubeconfig: strings.Replace(base, "    token: abc", "    client-certificate: /etc/cert.pem\n    client-key: /etc/key.pem", 1), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "client certificate or key file"},
		"ca file":             {kubeconfig: strings.Replace(base, "certificate-authority-data: ZmFrZQ==", "certificate-authority: /etc/ca.pem", 1), wantReason: gantry.ReasonInsecureKubeconfig, wantMessage: "certificate-authority file /etc/ca.pem"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := RESTConfig([]byte(tc.kubeconfig), tc.allowInsecure)
			if tc.wantReason == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if cfg.Host != "https://127.0.0.1:6443" {
					t.Fatalf("host %q", cfg.Host)
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
		})
	}
}

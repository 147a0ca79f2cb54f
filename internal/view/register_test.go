package view

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
)

const testCA = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"

// kubeconfig is a kubeconfig with one context "w" whose cluster is c and whose user is a client certificate.
func kubeconfig(c clientcmdapi.Cluster) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["wc"] = &c
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key")}
	cfg.Contexts["w"] = &clientcmdapi.Context{Cluster: "wc", AuthInfo: "admin"}
	cfg.CurrentContext = "w"
	return cfg
}

func TestWorkerEndpoint(t *testing.T) {
	files := map[string]string{"/etc/w/ca.crt": testCA, "/etc/w/junk": "not a certificate"}
	readFile := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, errors.New("no such file")
	}
	https := "https://w.example:6443"
	for name, tc := range map[string]struct {
		cfg     *clientcmdapi.Config
		context string
		want    Endpoint
		err     string
	}{
		"embedded CA": {cfg: kubeconfig(clientcmdapi.Cluster{Server: https, CertificateAuthorityData: []byte(testCA), TLSServerName: "api.w"}),
			want: Endpoint{Server: https, CAData: []byte(testCA), TLSServerName: "api.w"}},
		"CA file read and embedded": {cfg: kubeconfig(clientcmdapi.Cluster{Server: https, CertificateAuthority: "/etc/w/ca.crt"}),
			want: Endpoint{Server: https, CAData: []byte(testCA)}},
		"CA file unreadable": {cfg: kubeconfig(clientcmdapi.Cluster{Server: https, CertificateAuthority: "/etc/w/gone"}),
			err: "reading the CA file of cluster wc of w.kubeconfig: no such file"},
		"CA not PEM":        {cfg: kubeconfig(clientcmdapi.Cluster{Server: https, CertificateAuthority: "/etc/w/junk"}), err: "is not PEM"},
		"no CA":             {cfg: kubeconfig(clientcmdapi.Cluster{Server: https}), err: "cluster wc of w.kubeconfig has no CA"},
		"http":              {cfg: kubeconfig(clientcmdapi.Cluster{Server: "http://w.example:8080"}), err: "is not https"},
		"CA file over http": {cfg: kubeconfig(clientcmdapi.Cluster{Server: "http://w.example", CertificateAuthority: "/etc/w/ca.crt"}), err: "is not https"},
		"no server":         {cfg: kubeconfig(clientcmdapi.Cluster{CertificateAuthorityData: []byte(testCA)}), err: "has no server URL"},
		"skips TLS verification": {cfg: kubeconfig(clientcmdapi.Cluster{Server: https, InsecureSkipTLSVerify: true}),
			err: "skips TLS verification"},
		"another context": {cfg: func() *clientcmdapi.Config {
			cfg := kubeconfig(clientcmdapi.Cluster{Server: "https://other:6443"})
			cfg.Clusters["w3"] = &clientcmdapi.Cluster{Server: https, CertificateAuthorityData: []byte(testCA)}
			cfg.Contexts["w3"] = &clientcmdapi.Context{Cluster: "w3", AuthInfo: "admin"}
			return cfg
		}(), context: "w3", want: Endpoint{Server: https, CAData: []byte(testCA)}},
		"unknown context": {cfg: kubeconfig(clientcmdapi.Cluster{Server: https}), context: "w9", err: `has no context "w9": pass one of w to --worker-context`},
		"no current context": {cfg: func() *clientcmdapi.Config {
			cfg := kubeconfig(clientcmdapi.Cluster{Server: https})
			cfg.CurrentContext = ""
			return cfg
		}(), err: "has no current context: pass --worker-context (contexts: w)"},
		"context without its cluster": {cfg: func() *clientcmdapi.Config {
			cfg := kubeconfig(clientcmdapi.Cluster{Server: https})
			cfg.Contexts["w"].Cluster = "gone"
			return cfg
		}(), err: `names cluster "gone"`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := WorkerEndpoint(tc.cfg, tc.context, "w.kubeconfig", readFile)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
			}
		})
	}
}

// The hub's kubeconfig holds the endpoint and the token and nothing else, and the hub's own check takes it.
func TestHubKubeconfig(t *testing.T) {
	ep := Endpoint{Server: "https://w.example:6443", CAData: []byte(testCA), TLSServerName: "api.w"}
	data, err := HubKubeconfig("worker-3", "gantry-hub-remote", ep, "tok")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	want := clientcmdapi.NewConfig()
	want.Clusters["worker-3"] = &clientcmdapi.Cluster{Server: ep.Server, CertificateAuthorityData: ep.CAData, TLSServerName: "api.w"}
	want.AuthInfos["gantry-hub-remote"] = &clientcmdapi.AuthInfo{Token: "tok"}
	want.Contexts["worker-3"] = &clientcmdapi.Context{Cluster: "worker-3", AuthInfo: "gantry-hub-remote"}
	want.CurrentContext = "worker-3"
	if diff := cmp.Diff(want, cfg, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("kubeconfig (-want +got):\n%s", diff)
	}
	rest, err := workerconfig.RESTConfig(data, workerconfig.Policy{})
	if err != nil {
		t.Fatalf("the hub refuses it: %v", err)
	}
	if rest.BearerToken != "tok" || rest.Host != ep.Server || rest.CertFile != "" || rest.ExecProvider != nil {
		t.Errorf("rest config %+v", rest)
	}
	if server, token, err := HubKubeconfigParts(data); err != nil || server != ep.Server || token != "tok" {
		t.Errorf("parts: %q %q %v", server, token, err)
	}
}

func TestSameServer(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"https://w.example:6443", "https://W.example.:6443/", true},
		{"https://w.example", "https://w.example:443", true},
		{"https://w.example:6443", "https://w.example:6444", false},
		{"https://w.example", "http://w.example", false},
		{"https://10.0.0.1:6443", "https://10.0.0.2:6443", false},
		{"", "", false},
	} {
		if got := SameServer(tc.a, tc.b); got != tc.want {
			t.Errorf("SameServer(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

func TestTokenExpiry(t *testing.T) {
	jwt := func(payload string) string {
		return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".sig"
	}
	if got, ok := TokenExpiry(jwt(`{"exp":1767225600,"sub":"system:serviceaccount:gantry-system:gantry-hub-remote"}`)); !ok ||
		!got.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("expiry %v %v", got, ok)
	}
	for _, bad := range []string{"", "opaque", jwt(`{"sub":"x"}`), "a.!!!.c", jwt("not json")} {
		if got, ok := TokenExpiry(bad); ok {
			t.Errorf("TokenExpiry(%q) = %v, want none", bad, got)
		}
	}
}

func TestDecideRegistration(t *testing.T) {
	const server = "https://w3.example:6443"
	secret := func(server string) *corev1.Secret {
		data, _ := HubKubeconfig("worker-3", "gantry-hub-remote", Endpoint{Server: server, CAData: []byte(testCA)}, "old")
		return &corev1.Secret{Data: map[string][]byte{workerconfig.SecretKey: data}}
	}
	cluster := func(ref string) *gantry.WorkerCluster {
		return &gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "worker-3"},
			Spec: gantry.WorkerClusterSpec{KubeconfigSecretRef: &gantry.SecretReference{Name: ref}}}
	}
	deleting := cluster("worker-3-kubeconfig")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	ours := cluster("worker-3-kubeconfig")
	for name, tc := range map[string]struct {
		ex     Existing
		rotate bool
		want   RegistrationAction
		err    string
	}{
		"new":                           {want: Register},
		"a leftover Secret":             {ex: Existing{Secret: secret("https://elsewhere:6443")}, want: Register},
		"again, same cluster":           {ex: Existing{Cluster: ours, Secret: secret(server)}, want: Reregister},
		"again, Secret missing":         {ex: Existing{Cluster: ours}, want: Reregister},
		"again, Secret unreadable":      {ex: Existing{Cluster: ours, Secret: &corev1.Secret{}}, want: Reregister},
		"rotate":                        {ex: Existing{Cluster: ours, Secret: secret(server)}, rotate: true, want: Rotate},
		"again, another cluster":        {ex: Existing{Cluster: ours, Secret: secret("https://w1.example:6443")}, err: "WorkerCluster worker-3 reaches https://w1.example:6443, not https://w3.example:6443"},
		"rotate, another cluster":       {ex: Existing{Cluster: ours, Secret: secret("https://w1.example:6443")}, rotate: true, err: "unregister worker-3 first"},
		"points at another Secret":      {ex: Existing{Cluster: cluster("hand-made")}, err: "reads its kubeconfig from Secret hand-made, not worker-3-kubeconfig"},
		"Secret read by another":        {ex: Existing{SecretUsers: []string{"old-3"}}, err: "is the kubeconfig of WorkerCluster old-3"},
		"being deleted":                 {ex: Existing{Cluster: deleting, Secret: secret(server)}, err: "is being deleted"},
		"rotate, nothing registered":    {rotate: true, err: "has no token to rotate: register it without --rotate"},
		"rotate, no Secret":             {ex: Existing{Cluster: ours}, rotate: true, err: "has no Secret worker-3-kubeconfig to rotate"},
		"rotate, at another Secret":     {ex: Existing{Cluster: cluster("hand-made")}, rotate: true, err: "reads its kubeconfig from Secret hand-made"},
		"again, port spelled otherwise": {ex: Existing{Cluster: ours, Secret: secret("https://W3.example:6443/")}, want: Reregister},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := DecideRegistration("worker-3", "worker-3-kubeconfig", server, tc.ex, tc.rotate)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestConnectedHint(t *testing.T) {
	for reason, want := range map[string]string{
		gantry.ReasonMissingAPI:         "install Gantry's CRDs",
		gantry.ReasonInvalidKubeconfig:  "--allow-loopback-workers",
		gantry.ReasonUnauthorized:       "without --rotate",
		gantry.ReasonUnreachable:        "reachable from where the hub runs",
		gantry.ReasonDuplicateCluster:   "unregister one of them",
		gantry.ReasonSecretNotFound:     "namespace",
		gantry.ReasonInsecureKubeconfig: "refuses the kubeconfig",
		gantry.ReasonConnected:          "",
	} {
		if got := ConnectedHint(reason); !strings.Contains(got, want) || (want == "") != (got == "") {
			t.Errorf("ConnectedHint(%s) = %q, want it to say %q", reason, got, want)
		}
	}
}

func TestLeftovers(t *testing.T) {
	queues := []gantry.GlobalQueue{
		{ObjectMeta: metav1.ObjectMeta{Name: "gpus"}, Spec: gantry.GlobalQueueSpec{Clusters: []gantry.ClusterQuota{{Name: "w1"}, {Name: "w3"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cpus"}, Spec: gantry.GlobalQueueSpec{Clusters: []gantry.ClusterQuota{{Name: "w1"}}}},
	}
	got := Leftovers("w3", true, queues, nil)
	want := []string{
		"on w3: namespace gantry-system, Gantry's CRDs, the agent, and the Jobs and Workload copies Gantry left there; the hub's tokens stopped working with its ServiceAccount",
		"globalqueue/gpus still lists w3 in spec.clusters: remove it there",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("leftovers (-want +got):\n%s", diff)
	}
	got = Leftovers("w3", false, nil, []string{"team/a"})
	if len(got) != 2 || !strings.Contains(got[0], "whose token stays valid until it expires") ||
		!strings.Contains(got[1], "Workloads that still ran on w3 (team/a)") {
		t.Errorf("leftovers without the worker, after --force:\n%s", strings.Join(got, "\n"))
	}
}

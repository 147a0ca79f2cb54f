package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gantry-dev/gantry/internal/view"
	"github.com/gantry-dev/gantry/jobkind"
)

// kubeconfigFile writes a kubeconfig for the hub whose user has the given lines, and returns its path.
func kubeconfigFile(t *testing.T, user string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	data := `apiVersion: v1
kind: Config
clusters:
- name: hub
  cluster: {server: "https://hub.example:6443"}
users:
- name: me
  user:
` + user + `
contexts:
- name: hub
  context: {cluster: hub, user: me, namespace: team-a}
current-context: hub
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeEndpoint answers log requests with a bearer token tok as the hub's endpoint does; it records
// the last request.
type fakeEndpoint struct {
	*httptest.Server
	last    *http.Request
	omitted string
}

func newFakeEndpoint(t *testing.T) *fakeEndpoint {
	t.Helper()
	f := &fakeEndpoint{}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.last = r
		switch r.Header.Get("Authorization") {
		case "Bearer tok":
		case "":
			http.Error(w, "no bearer token", http.StatusUnauthorized)
			return
		default:
			http.Error(w, "me may not get pods/log in namespace team-a on the hub", http.StatusForbidden)
			return
		}
		if f.omitted != "" {
			w.Header().Set(omittedHeader, f.omitted)
		}
		fmt.Fprint(w, "[train-0/train] epoch 1\n[train-1/train] epoch 1\n")
	}))
	// Handshakes that the cases make fail on purpose are not worth a line.
	f.Config.ErrorLog = log.New(io.Discard, "", 0)
	f.StartTLS()
	t.Cleanup(f.Close)
	return f
}

// anotherCA is a CA that did not sign the endpoint's certificate (httptest's servers all share one).
func anotherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "another CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func (f *fakeEndpoint) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw})
}

func (f *fakeEndpoint) configMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gantry-system", Name: endpointConfigMap},
		Data: map[string]string{endpointURLKey: f.URL, endpointCAKey: string(f.caPEM())}}
}

// runLogs runs kubectl gantry with args against a hub that holds objs; it returns stdout and stderr.
func runLogs(t *testing.T, objs []client.Object, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut})
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).Build()
	o.NewClient = func() (client.WithWatch, error) { return c, nil }
	cmd := NewRootCommand(o)
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func TestLogsCommand(t *testing.T) {
	ep := newFakeEndpoint(t)
	token := kubeconfigFile(t, "    token: tok")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ep.caPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	lines := "[train-0/train] epoch 1\n[train-1/train] epoch 1\n"
	advertised := []client.Object{ep.configMap()}
	wrongCA := ep.configMap()
	wrongCA.Data[endpointCAKey] = string(anotherCA(t))
	cases := map[string]struct {
		objs      []client.Object
		args      []string
		want      string // stdout
		wantQuery string
		wantErr   string
	}{
		"advertised by the hub": {objs: advertised, args: []string{"logs", "train", "--kubeconfig", token}, want: lines},
		"with every option": {objs: advertised, args: []string{"logs", "train", "-n", "team-a", "--kubeconfig", token, "-f", "--tail", "5", "-c", "train", "--pod-set", "main"},
			want: lines, wantQuery: "container=train&follow=true&podSet=main&tailLines=5"},
		"a token file":   {objs: advertised, args: []string{"logs", "train", "--kubeconfig", kubeconfigFile(t, "    tokenFile: "+tokenFile)}, want: lines},
		"named by flags": {args: []string{"logs", "train", "--kubeconfig", token, "--hub-endpoint", ep.URL, "--hub-endpoint-ca", caFile}, want: lines},
		"a client certificate only": {objs: advertised, args: []string{"logs", "train", "--kubeconfig", kubeconfigFile(t, "    client-certificate-data: ZmFrZQ==\n    client-key-data: ZmFrZQ==")},
			wantErr: "authenticates to the hub with a client certificate, and the hub's endpoint takes bearer tokens only"},
		"no credentials at all": {objs: advertised, args: []string{"logs", "train", "--kubeconfig", kubeconfigFile(t, "    {}")},
			wantErr: "the hub's endpoint answers 401 Unauthorized: no bearer token"},
		"refused by the endpoint": {objs: advertised, args: []string{"logs", "train", "--kubeconfig", kubeconfigFile(t, "    token: other")},
			wantErr: "answers 403 Forbidden: me may not get pods/log in namespace team-a on the hub"},
		"impersonation": {objs: advertised, args: []string{"logs", "train", "--kubeconfig", token, "--as", "alice"}, wantErr: "does not act for another"},
		"not advertised": {args: []string{"logs", "train", "--kubeconfig", token},
			wantErr: "the hub advertises no endpoint (no ConfigMap gantry-system/gantry-hub-endpoint): its administrator sets hub.endpoint.advertiseURL"},
		"another CA than the endpoint's": {objs: []client.Object{wrongCA}, args: []string{"logs", "train", "--kubeconfig", token},
			wantErr: "certificate signed by unknown authority"},
		"the system's CAs do not know it": {args: []string{"logs", "train", "--kubeconfig", token, "--hub-endpoint", ep.URL},
			wantErr: "certificate signed by unknown authority"},
		"http to another host": {args: []string{"logs", "train", "--kubeconfig", token, "--hub-endpoint", "http://hub.example:8080"},
			wantErr: "your token would cross the network in the clear"},
		"a CA without an endpoint": {args: []string{"logs", "train", "--kubeconfig", token, "--hub-endpoint-ca", caFile}, wantErr: "goes with --hub-endpoint"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ep.last = nil
			out, _, err := runLogs(t, tc.objs, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out != tc.want {
				t.Errorf("printed %q, want %q", out, tc.want)
			}
			if ep.last == nil || ep.last.URL.Path != "/logs/team-a/train" || ep.last.URL.RawQuery != tc.wantQuery {
				t.Errorf("asked for %v, want /logs/team-a/train?%s", ep.last.URL, tc.wantQuery)
			}
		})
	}
}

// A followed job whose logs the endpoint leaves out in part makes the command say so.
func TestLogsCommandWarnsOfLogsLeftOut(t *testing.T) {
	ep := newFakeEndpoint(t)
	ep.omitted = "3"
	out, errOut, err := runLogs(t, []client.Object{ep.configMap()}, "logs", "train", "-f", "--kubeconfig", kubeconfigFile(t, "    token: tok"))
	if err != nil || !strings.Contains(out, "[train-0/train] epoch 1") {
		t.Fatalf("%q %v", out, err)
	}
	if !strings.Contains(errOut, "3 of the job's containers are left out") {
		t.Errorf("no warning: %q", errOut)
	}
}

func TestEndpointURL(t *testing.T) {
	cases := map[string]struct{ url, wantErr string }{
		"https":             {url: "https://gantry.example.com:8443"},
		"https with a path": {url: "https://gantry.example.com/gantry"},
		"http on loopback":  {url: "http://127.0.0.1:18089"},
		"http on localhost": {url: "http://localhost:18089"},
		"http to a host":    {url: "http://gantry.example.com", wantErr: "in the clear"},
		"no scheme":         {url: "gantry.example.com:8443", wantErr: "not an http(s) URL"},
		"empty":             {url: "", wantErr: "not an http(s) URL"},
		"a user in it":      {url: "https://me:secret@gantry.example.com", wantErr: "no user, query or fragment"},
		"a query":           {url: "https://gantry.example.com/?x=1", wantErr: "no user, query or fragment"},
		"another scheme":    {url: "ftp://gantry.example.com", wantErr: "not an http(s) URL"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := endpointURL(tc.url)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}

func TestLogsURL(t *testing.T) {
	base, _ := url.Parse("https://gantry.example.com/prefix/")
	train := view.JobRef{Name: "train"}
	cases := map[string]struct {
		job  view.JobRef
		f    logsFlags
		want string
	}{
		"all lines":  {job: train, f: logsFlags{tail: -1}, want: "https://gantry.example.com/prefix/logs/team-a/train"},
		"no lines":   {job: train, f: logsFlags{tail: 0}, want: "https://gantry.example.com/prefix/logs/team-a/train?tailLines=0"},
		"everything": {job: train, f: logsFlags{tail: 3, follow: true, container: "c", podSet: "main"}, want: "https://gantry.example.com/prefix/logs/team-a/train?container=c&follow=true&podSet=main&tailLines=3"},
		"a kind named": {job: view.JobRef{Kind: jobkind.JobSet{}, Name: "train"}, f: logsFlags{tail: -1, podSet: "workers"},
			want: "https://gantry.example.com/prefix/logs/team-a/train?kind=JobSet&podSet=workers"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := logsURL(base, "team-a", tc.job, tc.f).String(); got != tc.want {
				t.Errorf("%s, want %s", got, tc.want)
			}
		})
	}
}

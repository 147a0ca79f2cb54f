package remote

import (
	"context"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	profileaccess "sigs.k8s.io/cluster-inventory-api/pkg/access"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
)

const argsExtension = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args"

func plugin(name, command string, args ...string) profileaccess.Provider {
	return profileaccess.Provider{Name: name, ProfileSourcedCLIArgsPolicy: profileaccess.ProfileSourcedCLIArgsPolicyAppend,
		ExecConfig: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: command, Args: args}}
}

// profile is a ClusterProfile in gantry-system offering the named access providers at server.
func profile(server string, providers ...string) *inventory.ClusterProfile {
	p := &inventory.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Namespace: "gantry-system"}}
	for _, name := range providers {
		p.Status.AccessProviders = append(p.Status.AccessProviders, inventory.AccessProvider{Name: name,
			Cluster: clientcmdv1.Cluster{Server: server, CertificateAuthorityData: []byte("ca")}})
	}
	return p
}

func withArgs(p *inventory.ClusterProfile, args string) *inventory.ClusterProfile {
	for i := range p.Status.AccessProviders {
		p.Status.AccessProviders[i].Cluster.Extensions = append(p.Status.AccessProviders[i].Cluster.Extensions,
			clientcmdv1.NamedExtension{Name: argsExtension, Extension: runtime.RawExtension{Raw: []byte(args)}})
	}
	return p
}

func TestNewProvidersRefusesWhatCannotWork(t *testing.T) {
	good := plugin("p", "/bin/creds")
	cases := map[string]struct {
		list    []profileaccess.Provider
		wantErr string
	}{
		"one":        {list: []profileaccess.Provider{good}},
		"none":       {list: nil},
		"no name":    {list: []profileaccess.Provider{plugin("", "/bin/creds")}, wantErr: "no name"},
		"twice":      {list: []profileaccess.Provider{good, good}, wantErr: "named twice"},
		"no exec":    {list: []profileaccess.Provider{{Name: "p"}}, wantErr: "no execConfig.command"},
		"no command": {list: []profileaccess.Provider{plugin("p", "")}, wantErr: "no execConfig.command"},
		"bad version": {list: []profileaccess.Provider{func() profileaccess.Provider {
			p := plugin("p", "/bin/creds")
			p.ExecConfig.APIVersion = "v2"
			return p
		}()}, wantErr: "apiVersion"},
		"bad args policy": {list: []profileaccess.Provider{func() profileaccess.Provider {
			p := plugin("p", "/bin/creds")
			p.ProfileSourcedCLIArgsPolicy = "Prepend"
			return p
		}()}, wantErr: "profileSourcedCLIArgsPolicy"},
		"bad env policy": {list: []profileaccess.Provider{func() profileaccess.Provider {
			p := plugin("p", "/bin/creds")
			p.ProfileSourcedEnvVarsPolicy = "Merge"
			return p
		}()}, wantErr: "profileSourcedEnvVarsPolicy"},
	}
	for name, tc := range cases {
		_, err := NewProviders(tc.list)
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: error %v, want %q", name, err, tc.wantErr)
		}
	}
}

func TestLoadProviders(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"providers":[{"name":"ocm","execConfig":{"apiVersion":"client.authentication.k8s.io/v1","command":"/bin/cp-creds","provideClusterInfo":true}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := LoadProviders(good)
	if err != nil || !slices.Equal(p.Names(), []string{"ocm"}) {
		t.Fatalf("providers %v, %v", p, err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"providers":[{"name":"ocm"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadProviders(bad); err == nil || !strings.Contains(err.Error(), "bad.json: provider ocm has no execConfig.command") {
		t.Fatalf("error %v", err)
	}
	if _, err := LoadProviders(filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("a missing file was accepted")
	}
}

func TestConfigFor(t *testing.T) {
	providers, err := NewProviders([]profileaccess.Provider{plugin("first", "/bin/first"), plugin("second", "/bin/second", "--flag")})
	if err != nil {
		t.Fatal(err)
	}
	server := "https://worker.example:6443"
	cases := map[string]struct {
		profile     *inventory.ClusterProfile
		policy      workerconfig.Policy
		wantCommand string
		wantArgs    []string
		wantReason  string
		wantMessage string
	}{
		"the file's order decides": {profile: profile(server, "second", "first"), wantCommand: "/bin/first"},
		"the one offered":          {profile: profile(server, "other", "second"), wantCommand: "/bin/second", wantArgs: []string{"--flag"}},
		"profile arguments appended": {profile: withArgs(profile(server, "second"), `["--cluster=worker-1"]`),
			wantCommand: "/bin/second", wantArgs: []string{"--flag", "--cluster=worker-1"}},
		"deprecated credentialProviders": {profile: func() *inventory.ClusterProfile {
			p := profile(server, "first")
			p.Status.CredentialProviders, p.Status.AccessProviders = p.Status.AccessProviders, nil
			return p
		}(), wantCommand: "/bin/first"},
		"nothing in common": {profile: profile(server, "other"), wantReason: gantry.ReasonNoAccessProvider,
			wantMessage: "offers access providers [other]; the hub's provider file names [first, second]"},
		"no providers at all": {profile: profile(server), wantReason: gantry.ReasonNoAccessProvider, wantMessage: "offers access providers []"},
		"loopback":            {profile: profile("https://127.0.0.1:6443", "first"), wantReason: gantry.ReasonInvalidClusterProfile, wantMessage: "loopback"},
		"loopback allowed":    {profile: profile("https://127.0.0.1:6443", "first"), policy: workerconfig.Policy{AllowLoopback: true}, wantCommand: "/bin/first"},
		"cloud metadata":      {profile: profile("https://169.254.169.254", "first"), wantReason: gantry.ReasonInvalidClusterProfile, wantMessage: "link-local"},
		"odd address form":    {profile: profile("https://2130706433", "first"), wantReason: gantry.ReasonInvalidClusterProfile, wantMessage: "canonical form"},
		"no URL":              {profile: profile("worker.example", "first"), wantReason: gantry.ReasonInvalidClusterProfile, wantMessage: "not an https:// URL"},
		"user info":           {profile: profile("https://u:p@worker.example", "first"), wantReason: gantry.ReasonInvalidClusterProfile, wantMessage: "user information"},
		"http":                {profile: profile("http://worker.example", "first"), wantReason: gantry.ReasonInvalidClusterProfile, wantMessage: "in the clear"},
		"http allowed":        {profile: profile("http://worker.example", "first"), policy: workerconfig.Policy{AllowInsecure: true}, wantCommand: "/bin/first"},
		"proxy": {profile: func() *inventory.ClusterProfile {
			p := profile(server, "first")
			p.Status.AccessProviders[0].Cluster.ProxyURL = "http://proxy.example:3128"
			return p
		}(), wantReason: gantry.ReasonInvalidClusterProfile, wantMessage: "proxy"},
		"bad extension data": {profile: withArgs(profile(server, "second"), `{not a list`),
			wantReason: gantry.ReasonInvalidClusterProfile, wantMessage: "additional CLI args"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, _, err := providers.ConfigFor(tc.profile, tc.policy)
			if tc.wantReason != "" {
				if ReasonOf(err) != tc.wantReason || !strings.Contains(err.Error(), tc.wantMessage) {
					t.Fatalf("error %v (%s), want %s saying %q", err, ReasonOf(err), tc.wantReason, tc.wantMessage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ExecProvider == nil || cfg.ExecProvider.Command != tc.wantCommand || !slices.Equal(cfg.ExecProvider.Args, tc.wantArgs) {
				t.Fatalf("exec %+v, want %s %v", cfg.ExecProvider, tc.wantCommand, tc.wantArgs)
			}
			if want := append(tc.profile.Status.AccessProviders, tc.profile.Status.CredentialProviders...)[0].Cluster.Server; cfg.Host != want {
				t.Errorf("host %s, want %s", cfg.Host, want)
			}
			if cfg.Proxy != nil {
				t.Error("a profile without proxy got a proxy function that ignores the hub's environment")
			}
		})
	}
}

// Building configs for many profiles leaves the provider file's exec config as it was: the library
// appends a profile's arguments in place.
func TestConfigForDoesNotPileUpArguments(t *testing.T) {
	providers, err := NewProviders([]profileaccess.Provider{plugin("p", "/bin/creds", "--base")})
	if err != nil {
		t.Fatal(err)
	}
	for _, cluster := range []string{"a", "b", "c"} {
		cfg, _, err := providers.ConfigFor(withArgs(profile("https://worker.example", "p"), `["--cluster=`+cluster+`"]`), workerconfig.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"--base", "--cluster=" + cluster}; !slices.Equal(cfg.ExecProvider.Args, want) {
			t.Fatalf("args %v, want %v", cfg.ExecProvider.Args, want)
		}
	}
}

// The version of a profile's config changes with what it reaches and how it authenticates, and only then.
func TestConfigForVersion(t *testing.T) {
	providers, err := NewProviders([]profileaccess.Provider{plugin("p", "/bin/creds")})
	if err != nil {
		t.Fatal(err)
	}
	version := func(p *inventory.ClusterProfile) string {
		t.Helper()
		_, v, err := providers.ConfigFor(p, workerconfig.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	base := version(profile("https://worker.example", "p"))
	relabelled := profile("https://worker.example", "p")
	relabelled.Labels = map[string]string{"team": "a"}
	relabelled.Status.Conditions = []metav1.Condition{{Type: "Joined", Status: "True"}}
	if v := version(relabelled); v != base {
		t.Errorf("labels and conditions changed the version: %s, was %s", v, base)
	}
	otherCA := profile("https://worker.example", "p")
	otherCA.Status.AccessProviders[0].Cluster.CertificateAuthorityData = []byte("other")
	for name, p := range map[string]*inventory.ClusterProfile{
		"server": profile("https://other.example", "p"),
		"CA":     otherCA,
		"args":   withArgs(profile("https://worker.example", "p"), `["--x"]`),
	} {
		if v := version(p); v == base {
			t.Errorf("another %s kept the version %s", name, v)
		}
	}
}

// credentialScript writes a credential plugin that prints token, or fails when token is empty.
func credentialScript(t *testing.T, token string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "creds.sh")
	body := "#!/bin/sh\necho 'no credential for you' >&2\nexit 3\n"
	if token != "" {
		body = "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"" + token + "\"}}'\n"
	}
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func profileHub(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gantry.AddToScheme, inventory.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: "hub-uid"}},
		&gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"},
			Spec: gantry.WorkerClusterSpec{ClusterProfileRef: &gantry.ClusterProfileReference{Name: "worker-1"}}})
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

// A profile's credential plugin, named by the provider file, gives the hub the token the worker takes:
// PodLogs reads the worker through it.
func TestPodLogsThroughAClusterProfile(t *testing.T) {
	worker := newFakeWorkerAPI(t, "worker-uid")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: worker.Certificate().Raw})
	p := profile(worker.URL, "test")
	p.Status.AccessProviders[0].Cluster.CertificateAuthorityData = ca
	providers, err := NewProviders([]profileaccess.Provider{plugin("test", credentialScript(t, "hub-token"))})
	if err != nil {
		t.Fatal(err)
	}
	hub := profileHub(t, p)
	logs := &PodLogs{Hub: hub, Access: &Access{Hub: hub, Namespace: "gantry-system", Policy: workerconfig.Policy{AllowLoopback: true},
		Providers: providers, HubHost: "https://hub.example:6443"}}
	pods, err := logs.Pods(context.Background(), "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	list, err := pods.List(context.Background(), "team-a", labels.Everything())
	if err != nil || len(list) != 1 {
		t.Fatalf("pods %v, %v", list, err)
	}
}

// Each way a profile-registered WorkerCluster cannot connect has its reason.
func TestAccessForAClusterProfile(t *testing.T) {
	worker := newFakeWorkerAPI(t, "worker-uid")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: worker.Certificate().Raw})
	reachable := profile(worker.URL, "test")
	reachable.Status.AccessProviders[0].Cluster.CertificateAuthorityData = ca
	unhealthy := reachable.DeepCopy()
	unhealthy.Status.Conditions = []metav1.Condition{{Type: inventory.ClusterConditionControlPlaneHealthy, Status: metav1.ConditionFalse,
		Reason: "APIServerDown", Message: "the API server does not answer"}}
	failing, err := NewProviders([]profileaccess.Provider{plugin("test", credentialScript(t, ""))})
	if err != nil {
		t.Fatal(err)
	}
	working, err := NewProviders([]profileaccess.Provider{plugin("test", credentialScript(t, "hub-token"))})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		hub         client.Reader
		providers   *Providers
		wantReason  string
		wantMessage string
	}{
		"connected":         {hub: profileHub(t, reachable), providers: working},
		"no profile":        {hub: profileHub(t), providers: working, wantReason: gantry.ReasonClusterProfileNotFound, wantMessage: "ClusterProfile gantry-system/worker-1 not found"},
		"API not served":    {hub: hubReader(t), providers: working, wantReason: gantry.ReasonClusterProfileNotFound, wantMessage: "does not serve ClusterProfiles"},
		"unhealthy":         {hub: profileHub(t, unhealthy), providers: working, wantReason: gantry.ReasonClusterUnhealthy, wantMessage: "APIServerDown: the API server does not answer"},
		"no provider file":  {hub: profileHub(t, reachable), wantReason: gantry.ReasonNoAccessProvider, wantMessage: "--clusterprofile-provider-file"},
		"the plugin fails":  {hub: profileHub(t, reachable), providers: failing, wantReason: gantry.ReasonCredentialPluginFailed, wantMessage: "exit code 3"},
		"wrong token given": {hub: profileHub(t, reachable), providers: mustProviders(t, credentialScript(t, "stolen")), wantReason: gantry.ReasonUnauthorized},
	}
	wc := &gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"},
		Spec: gantry.WorkerClusterSpec{ClusterProfileRef: &gantry.ClusterProfileReference{Name: "worker-1"}}}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := &Access{Hub: tc.hub, Namespace: "gantry-system", Policy: workerconfig.Policy{AllowLoopback: true}, Providers: tc.providers, HubHost: "https://hub.example:6443"}
			target, err := a.For(context.Background(), wc)
			if err == nil {
				// Only the identity read: the fake serves no more, so the connection stops short after it.
				cfg := rest.CopyConfig(target.Config)
				workerconfig.GuardDial(cfg, true)
				_, err = identify(context.Background(), cfg, target.Hub)
				err = pluginFailure(unauthorized(err))
			}
			if tc.wantReason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || ReasonOf(err) != tc.wantReason || !strings.Contains(err.Error(), tc.wantMessage) {
				t.Fatalf("error %v (%s), want %s saying %q", err, ReasonOf(err), tc.wantReason, tc.wantMessage)
			}
		})
	}
}

func mustProviders(t *testing.T, command string) *Providers {
	t.Helper()
	p, err := NewProviders([]profileaccess.Provider{plugin("test", command)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"k8s.io/utils/ptr"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	profileaccess "sigs.k8s.io/cluster-inventory-api/pkg/access"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub"
	"github.com/gantry-dev/gantry/hub/remote"
)

// credentialPluginEnv makes the test binary act as a credential plugin (see TestMain).
const credentialPluginEnv = "GANTRY_TEST_CREDENTIAL_PLUGIN"

// tokenFileEnv is the variable, set by the ClusterProfile, that names the plugin's token file.
const tokenFileEnv = "GANTRY_TEST_TOKEN_FILE"

// actAsCredentialPlugin is the test binary run by the hub as an access provider's credential plugin:
// it prints an ExecCredential with the token in the file $GANTRY_TEST_TOKEN_FILE names, or fails when
// there is none, and appends a line per run to that file's ".calls" log.
func actAsCredentialPlugin(args []string, stdout, stderr io.Writer) int {
	tokenFile := os.Getenv(tokenFileEnv)
	if tokenFile == "" {
		fmt.Fprintln(stderr, "credential plugin: no "+tokenFileEnv)
		return 2
	}
	if f, err := os.OpenFile(tokenFile+".calls", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		fmt.Fprintf(f, "args=%q\n", args)
		_ = f.Close()
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "credential plugin: no token: %v\n", err)
		return 1
	}
	cred := map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
		"status": map[string]any{"token": strings.TrimSpace(string(token))}}
	if err := json.NewEncoder(stdout).Encode(cred); err != nil {
		return 1
	}
	return 0
}

// testProviders is the hub's provider file of these tests: provider "test" runs this test binary as its
// credential plugin, with the variables the profile adds.
func testProviders(t *testing.T) *remote.Providers {
	t.Helper()
	p, err := remote.NewProviders([]profileaccess.Provider{{
		Name: "test", ProfileSourcedEnvVarsPolicy: profileaccess.ProfileSourcedEnvVarsPolicyAppendIfNotExists,
		ExecConfig: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: os.Args[0],
			Env: []clientcmdapi.ExecEnvVar{{Name: credentialPluginEnv, Value: "1"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A WorkerCluster registered through a ClusterProfile: without the ClusterProfile API, without the
// profile, without a provider in common, with a failing plugin, each says why it is not connected;
// then it connects through the plugin, runs jobs, takes a new token from the plugin without a restart
// of the hub, and stops taking jobs while its profile says the control plane is unhealthy.
func TestAWorkerClusterFromAClusterProfile(t *testing.T) {
	ctx := context.Background()
	const name = "worker-2"
	rh := startHub(t)
	registerThroughProfile(t, name)
	connectedReason(t, name, gantry.ReasonClusterProfileNotFound, "does not serve ClusterProfiles")
	rh.stop()

	installClusterProfileAPI(t)
	startHubWith(t, hub.Options{Providers: testProviders(t)}, "worker-1")
	connectedReason(t, name, gantry.ReasonClusterProfileNotFound, "ClusterProfile gantry-system/worker-2 not found")
	tokenFile := filepath.Join(t.TempDir(), name+"-token")
	profile := createProfile(t, name, "other", tokenFile)
	connectedReason(t, name, gantry.ReasonNoAccessProvider, "offers access providers [other]; the hub's provider file names [test]")
	profile.Status.AccessProviders[0].Name = "test"
	updateProfileStatus(t, profile)
	connectedReason(t, name, gantry.ReasonCredentialPluginFailed, "failed with exit code 1")

	w := workers[name]
	installHubAccess(t, w)
	writeFile(t, tokenFile, revocableToken(t, w, "hub-token-a"))
	connected(t, name, gantry.ReasonAllowlistOnly)

	newGlobalQueue(t, "inventory", map[string]int64{name: 8})
	ns := newNamespace(t, "inventory")
	dumpOnFailure(t, ns)
	first := gpuJob(ns, "first", 1, 1)
	submit(t, first)
	if where := runsOn(t, first); where != name {
		t.Fatalf("the job runs on %s", where)
	}
	completeRemote(t, name, first)
	hubJobComplete(t, first)

	// The plugin now gives another token and the one it gave is revoked: the hub takes the new one up.
	callsBefore := pluginCalls(t, tokenFile)
	tokenA, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, tokenFile, revocableToken(t, w, "hub-token-b"))
	if err := w.client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: gantry.GantryNamespace, Name: "hub-token-a"}}); err != nil {
		t.Fatal(err)
	}
	refused(t, w, string(tokenA))
	second := gpuJob(ns, "second", 1, 1)
	submit(t, second)
	eventuallyWithin(t, waitTimeout*2, "the second job on "+name, func() error {
		if where, err := remoteJobs(second); err != nil || len(where) != 1 || where[0] != name {
			return fmt.Errorf("on %v, %v", where, err)
		}
		return nil
	})
	connected(t, name, gantry.ReasonAllowlistOnly)
	calls := pluginCalls(t, tokenFile)
	if len(calls) <= len(callsBefore) {
		t.Fatalf("the plugin ran %d times before the token changed and %d times after", len(callsBefore), len(calls))
	}
	for _, c := range calls {
		if c != "args=[]" {
			t.Fatalf("the plugin was run with %s, not as the provider file says", c)
		}
	}

	// The inventory says the control plane is unhealthy: the hub stops sending it jobs until it is well.
	setControlPlaneHealthy(t, profile, metav1.ConditionFalse)
	connectedReason(t, name, gantry.ReasonClusterUnhealthy, "APIServerDown")
	setControlPlaneHealthy(t, profile, metav1.ConditionTrue)
	connected(t, name, gantry.ReasonAllowlistOnly)
}

// registerThroughProfile makes the WorkerCluster reach its cluster through the ClusterProfile of its
// name; at cleanup it reads its kubeconfig Secret again.
func registerThroughProfile(t *testing.T, name string) {
	t.Helper()
	setRegistration(t, name, func(s *gantry.WorkerClusterSpec) {
		s.KubeconfigSecretRef, s.ClusterProfileRef = nil, &gantry.ClusterProfileReference{Name: name}
	})
	t.Cleanup(func() {
		setRegistration(t, name, func(s *gantry.WorkerClusterSpec) {
			s.KubeconfigSecretRef, s.ClusterProfileRef = &gantry.SecretReference{Name: name + "-kubeconfig"}, nil
		})
	})
}

func setRegistration(t *testing.T, name string, set func(*gantry.WorkerClusterSpec)) {
	t.Helper()
	eventually(t, "changing the registration of "+name, func() error {
		var wc gantry.WorkerCluster
		if err := hubEnv.client.Get(context.Background(), types.NamespacedName{Name: name}, &wc); err != nil {
			return err
		}
		set(&wc.Spec)
		return hubEnv.client.Update(context.Background(), &wc)
	})
}

// connectedReason waits until the WorkerCluster is not connected for the reason, saying what.
func connectedReason(t *testing.T, name, reason, says string) {
	t.Helper()
	eventually(t, name+" not connected with "+reason, func() error {
		c := workerCondition(t, name, gantry.ClusterConnected)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || !strings.Contains(c.Message, says) {
			return fmt.Errorf("connected condition %+v", c)
		}
		return nil
	})
}

// installClusterProfileAPI installs the ClusterProfile CRD shipped in the cluster-inventory-api module
// on the hub, for the test.
func installClusterProfileAPI(t *testing.T) {
	t.Helper()
	dir, err := moduleDir("sigs.k8s.io/cluster-inventory-api")
	if err != nil {
		t.Fatal(err)
	}
	crd := filepath.Join(dir, "config", "crd", "bases", "multicluster.x-k8s.io_clusterprofiles.yaml")
	if err := applyFile(context.Background(), hubEnv.client, crd); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ClusterProfile API served", func() error {
		return hubEnv.client.List(context.Background(), &inventory.ClusterProfileList{})
	})
	// Gone again at the end, so that each test starts from a hub without it.
	t.Cleanup(func() {
		ctx := context.Background()
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "clusterprofiles.multicluster.x-k8s.io"}}
		if err := hubEnv.client.Delete(ctx, crd); err != nil {
			t.Errorf("removing the ClusterProfile CRD: %v", err)
			return
		}
		eventually(t, "the ClusterProfile CRD gone", func() error {
			err := hubEnv.client.Get(ctx, client.ObjectKeyFromObject(crd), crd)
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there: %v", err)
		})
	})
}

// createProfile creates the ClusterProfile of a worker as an inventory publishes it: the worker's
// server and CA under an access provider, with the plugin's token file as a profile-sourced variable.
func createProfile(t *testing.T, name, provider, tokenFile string) *inventory.ClusterProfile {
	t.Helper()
	ctx := context.Background()
	p := &inventory.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubNamespace, Labels: map[string]string{inventory.LabelClusterManagerKey: "test"}},
		Spec:       inventory.ClusterProfileSpec{DisplayName: name, ClusterManager: inventory.ClusterManager{Name: "test"}},
	}
	if err := hubEnv.client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, p) })
	// Variables, not arguments: the CRD's schema takes only objects as extension data.
	envs, _ := json.Marshal(map[string]string{tokenFileEnv: tokenFile})
	w := workers[name]
	p.Status.AccessProviders = []inventory.AccessProvider{{Name: provider, Cluster: clientcmdv1.Cluster{
		Server: w.cfg.Host, CertificateAuthorityData: w.cfg.CAData,
		Extensions: []clientcmdv1.NamedExtension{{Name: "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs",
			Extension: runtime.RawExtension{Raw: envs}}},
	}}}
	updateProfileStatus(t, p)
	return p
}

func updateProfileStatus(t *testing.T, p *inventory.ClusterProfile) {
	t.Helper()
	status := p.Status.DeepCopy()
	eventually(t, "updating the status of ClusterProfile "+p.Name, func() error {
		if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Status = *status
		return hubEnv.client.Status().Update(context.Background(), p)
	})
}

func setControlPlaneHealthy(t *testing.T, p *inventory.ClusterProfile, status metav1.ConditionStatus) {
	t.Helper()
	reason := map[metav1.ConditionStatus]string{metav1.ConditionTrue: "APIServerHealthy", metav1.ConditionFalse: "APIServerDown"}[status]
	p.Status.Conditions = []metav1.Condition{{Type: inventory.ClusterConditionControlPlaneHealthy, Status: status,
		Reason: reason, Message: "as the inventory sees it", LastTransitionTime: metav1.Now()}}
	updateProfileStatus(t, p)
}

// revocableToken is a token of the hub's ServiceAccount on the worker bound to a Secret of that name:
// deleting the Secret revokes it.
func revocableToken(t *testing.T, w *cluster, secret string) string {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: gantry.GantryNamespace, Name: secret}}
	if err := w.client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.client.Delete(ctx, s) })
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "gantry-hub-remote", Namespace: gantry.GantryNamespace}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: secret, UID: s.UID}}}
	if err := w.client.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// refused waits until the worker refuses the token (its API server remembers tokens for a while).
func refused(t *testing.T, w *cluster, token string) {
	t.Helper()
	cfg := rest.AnonymousClientConfig(w.cfg)
	cfg.BearerToken = token
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the revoked token refused", func() error {
		err := c.Get(context.Background(), types.NamespacedName{Name: metav1.NamespaceSystem}, &corev1.Namespace{})
		if apierrors.IsUnauthorized(err) {
			return nil
		}
		return fmt.Errorf("reading with the revoked token: %v", err)
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// pluginCalls lists the arguments of every run of the plugin for the token file.
func pluginCalls(t *testing.T, tokenFile string) []string {
	t.Helper()
	data, err := os.ReadFile(tokenFile + ".calls")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/internal/hubtest"
	"github.com/gantry-dev/gantry/internal/manifest"
	"github.com/gantry-dev/gantry/internal/workerconfig"
	"github.com/gantry-dev/gantry/test/testcluster"
)

// registerRefusedWorker creates a kubeconfig Secret and a WorkerCluster of that name on the hub, removed at
// the end of the test, and returns the WorkerCluster's Connected condition once it is False.
func registerRefusedWorker(t *testing.T, name string, kubeconfig []byte) *metav1.Condition {
	t.Helper()
	registerWithSecret(t, name, map[string][]byte{workerconfig.SecretKey: kubeconfig})
	var cond *metav1.Condition
	eventually(t, name+" refused", func() error {
		var wc gantry.WorkerCluster
		if err := hubEnv.client.Get(context.Background(), types.NamespacedName{Name: name}, &wc); err != nil {
			return err
		}
		cond = apimeta.FindStatusCondition(wc.Status.Conditions, gantry.ClusterConnected)
		if cond == nil || cond.Status != metav1.ConditionFalse {
			return fmt.Errorf("connected condition %+v", cond)
		}
		return nil
	})
	return cond
}

// The hub registered as its own worker is refused, whether its kubeconfig names the address the hub
// uses or another one: then the cluster's identity (the UID of kube-system) gives it away.
func TestTheHubIsRefusedAsAWorker(t *testing.T) {
	rh := startHub(t)
	kc, err := testcluster.Kubeconfig(hubEnv.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(hubEnv.cfg.Host, "127.0.0.1") {
		t.Fatalf("the hub's API server is at %s, not on 127.0.0.1", hubEnv.cfg.Host)
	}
	otherAddress := bytes.Replace(kc, []byte("127.0.0.1"), []byte("localhost"), 1)
	for name, kubeconfig := range map[string][]byte{"hub-same-address": kc, "hub-other-address": otherAddress} {
		t.Run(name, func(t *testing.T) {
			cond := registerRefusedWorker(t, name, kubeconfig)
			if cond.Reason != gantry.ReasonInvalidKubeconfig || !strings.Contains(cond.Message, "is the hub's own API server") {
				t.Fatalf("connected condition %s %q, want %s saying it is the hub", cond.Reason, cond.Message, gantry.ReasonInvalidKubeconfig)
			}
			if rh.hub.Connections.IsConnected(name) {
				t.Fatal("the hub holds a connection to itself")
			}
		})
	}
}

// A worker registered a second time, under another name and another address, is refused: one cluster
// under two names would hold two copies of each job and count its quota twice. The first registration
// goes on working.
func TestAClusterRegisteredTwiceIsRefused(t *testing.T) {
	rh := startHub(t)
	kc, err := testcluster.Kubeconfig(workers["worker-1"].cfg)
	if err != nil {
		t.Fatal(err)
	}
	otherAddress := bytes.Replace(kc, []byte("127.0.0.1"), []byte("localhost"), 1)
	if bytes.Equal(otherAddress, kc) {
		t.Fatal("the kubeconfig does not name 127.0.0.1")
	}
	cond := registerRefusedWorker(t, "worker-1-again", otherAddress)
	if cond.Reason != gantry.ReasonDuplicateCluster || !strings.Contains(cond.Message, "already registered as WorkerCluster worker-1") {
		t.Fatalf("connected condition %s %q, want %s naming worker-1", cond.Reason, cond.Message, gantry.ReasonDuplicateCluster)
	}
	if rh.hub.Connections.IsConnected("worker-1-again") || !rh.hub.Connections.IsConnected("worker-1") {
		t.Fatalf("connected: worker-1 %v, worker-1-again %v; want only worker-1",
			rh.hub.Connections.IsConnected("worker-1"), rh.hub.Connections.IsConnected("worker-1-again"))
	}
}

// Kubeconfigs that would weaken the transport, act as someone else or point the hub at its own host
// are refused with a reason, while the hub serves the good clusters.
func TestUnsafeKubeconfigsAreRefused(t *testing.T) {
	startHub(t)
	good, err := testcluster.Kubeconfig(workers["worker-1"].cfg)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) []byte { return bytes.Replace(good, []byte(old), []byte(new), 1) }
	server := workers["worker-1"].cfg.Host
	cases := map[string]struct {
		kubeconfig []byte
		reason     string
		message    string
	}{
		"unsafe-proxy":         {edit("    server:", "    proxy-url: http://proxy.example:3128\n    server:"), gantry.ReasonInsecureKubeconfig, "proxy-url"},
		"unsafe-impersonation": {edit("  user:\n", "  user:\n    as: system:admin\n"), gantry.ReasonInsecureKubeconfig, "impersonates"},
		"unsafe-basic-auth":    {edit("  user:\n", "  user:\n    username: admin\n    password: s3cret\n"), gantry.ReasonInsecureKubeconfig, "basic authentication"},
		"unsafe-http":          {edit(server, strings.Replace(server, "https://", "http://", 1)), gantry.ReasonInsecureKubeconfig, "is http"},
		"unsafe-link-local":    {edit(server, "https://169.254.169.254"), gantry.ReasonInvalidKubeconfig, "link-local"},
		"unsafe-unspecified":   {edit(server, strings.Replace(server, "127.0.0.1", "0.0.0.0", 1)), gantry.ReasonInvalidKubeconfig, "unspecified"},
		"unsafe-dangling":      {edit("current-context: c", "current-context: gone"), gantry.ReasonInvalidKubeconfig, "gone"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if bytes.Equal(tc.kubeconfig, good) {
				t.Fatal("the case did not change the kubeconfig")
			}
			cond := registerRefusedWorker(t, name, tc.kubeconfig)
			if cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.message) || strings.Contains(cond.Message, "s3cret") {
				t.Fatalf("connected condition %s %q, want %s with %q", cond.Reason, cond.Message, tc.reason, tc.message)
			}
		})
	}
}

// The suite's workers are registered with admin certificates: connected, with a warning that names
// what the hub holds beyond its allowlist.
func TestWorkersWithAdminRightsAreFlagged(t *testing.T) {
	startHub(t)
	for _, n := range names {
		eventually(t, n+" flagged", func() error {
			var wc gantry.WorkerCluster
			if err := hubEnv.client.Get(context.Background(), types.NamespacedName{Name: n}, &wc); err != nil {
				return err
			}
			if !apimeta.IsStatusConditionTrue(wc.Status.Conditions, gantry.ClusterConnected) {
				return fmt.Errorf("%s not connected", n)
			}
			c := apimeta.FindStatusCondition(wc.Status.Conditions, gantry.ClusterLeastPrivilege)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != gantry.ReasonExcessRights || !strings.Contains(c.Message, "*.*: *") {
				return fmt.Errorf("least privilege condition %+v", c)
			}
			return nil
		})
	}
}

// The hub's ServiceAccount of deploy/worker/hub-access.yaml holds the allowlist and nothing more, on a
// real API server with Kubernetes' default roles, and its rights suffice to connect.
func TestTheHubAccessServiceAccountHoldsTheAllowlistOnly(t *testing.T) {
	ctx := context.Background()
	w := workers["worker-1"]
	installHubAccess(t, w)
	kc, err := serviceAccountKubeconfig(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	var hubSystem corev1.Namespace
	if err := hubEnv.client.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, &hubSystem); err != nil {
		t.Fatal(err)
	}
	// A manager of its own, with no handler: nothing of the hub acts on this second view of worker-1.
	m := remote.NewManager(scheme, remote.Options{AllowLoopback: true, QPS: 50, Burst: 100})
	cfg, err := workerconfig.RESTConfig(kc, workerconfig.Policy{AllowLoopback: true})
	if err != nil {
		t.Fatal(err)
	}
	target := remote.Target{Config: cfg, Version: "1", Hub: remote.HubIdentity{Host: hubEnv.cfg.Host, UID: hubSystem.UID}}
	if err := m.Ensure(ctx, "worker-1-least-privilege", target); err != nil {
		t.Fatal(err)
	}
	defer m.DisconnectAll()
	c, _ := m.Get("worker-1-least-privilege")
	status, reason, msg := remote.LeastPrivilege(c.Rights())
	if status != metav1.ConditionTrue || reason != gantry.ReasonAllowlistOnly {
		t.Fatalf("least privilege %s/%s: %s", status, reason, msg)
	}
}

// installHubAccess applies deploy/namespace and deploy/worker/hub-access.yaml to the worker; what it
// created goes at the end of the test, but the namespace stays (no namespace controller runs here to
// finish its deletion).
func installHubAccess(t *testing.T, w *cluster) {
	t.Helper()
	var data []byte
	for _, f := range []string{filepath.Join("namespace", "namespace.yaml"), filepath.Join("worker", "hub-access.yaml")} {
		b, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		data = append(append(data, b...), "\n---\n"...)
	}
	ctx := context.Background()
	objs, err := manifest.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		err := w.client.Create(ctx, u)
		switch {
		case apierrors.IsAlreadyExists(err):
		case err != nil:
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		case u.GetKind() != "Namespace":
			t.Cleanup(func() { _ = w.client.Delete(ctx, u) })
		}
	}
}

// serviceAccountKubeconfig is a kubeconfig with a token of the hub's ServiceAccount on the worker, as
// hack/dev-up.sh registers the testbed's workers.
func serviceAccountKubeconfig(ctx context.Context, w *cluster) ([]byte, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "gantry-hub-remote", Namespace: gantry.GantryNamespace}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := w.client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, fmt.Errorf("requesting a token of %s: %w", sa.Name, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: w.cfg.Host, CertificateAuthorityData: w.cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	return clientcmd.Write(*kc)
}

// A tenant cannot put its Jobs into a GlobalQueue that selects namespaces by name, however it labels
// its own namespace: its Job waits with NamespaceNotSelected and goes nowhere, while the selected
// tenant's Job runs.
func TestATenantCannotJoinAnotherTenantsGlobalQueue(t *testing.T) {
	startHub(t)
	ctx := context.Background()
	// Both namespaces carry the same label and a Queue "q" naming GlobalQueue "tenant-a".
	nsA := newNamespace(t, "tenant-a")
	nsB := newNamespace(t, "tenant-a")
	dumpOnFailure(t, nsB)
	gq := hubtest.MakeGlobalQueue("tenant-a").SelectNamespaces(nsA).Strategy(gantry.BestEffortFIFO).
		Cluster("worker-1", gantry.GPUResource, "8").Obj()
	if err := hubEnv.client.Create(ctx, gq); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, gq) })

	intruder := gpuJob(nsB, "intruder", 1, 1)
	submit(t, intruder)
	cond := pendingReason(t, intruder, gantry.ReasonNamespaceNotSelected)
	if !strings.Contains(cond.Message, nsB) || !strings.Contains(cond.Message, `"tenant-a"`) {
		t.Errorf("pending message %q does not name the namespace and the GlobalQueue", cond.Message)
	}
	owner := gpuJob(nsA, "owner", 1, 1)
	submit(t, owner)
	runsOn(t, owner)
	// The owner's job ran through the same dispatcher passes; the intruder's still went nowhere.
	if where, err := remoteJobs(intruder); err != nil || len(where) > 0 {
		t.Fatalf("intruder's job on %v (%v)", where, err)
	}
	if wl := hubWorkload(t, intruder); len(wl.Status.Nominated()) > 0 || wl.Status.Winner() != "" {
		t.Fatalf("intruder's workload was dispatched: %+v", wl.Status)
	}
}

package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
)

const testCA = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"

// workerKubeconfig writes an admin kubeconfig for a worker at server and returns its path.
func workerKubeconfig(t *testing.T, server string, ca []byte) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["w"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key")}
	cfg.Contexts["w"] = &clientcmdapi.Context{Cluster: "w", AuthInfo: "admin"}
	cfg.CurrentContext = "w"
	path := filepath.Join(t.TempDir(), "worker.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// fakeWorker makes the commands reach c as the worker, and poll fast.
func fakeWorker(t *testing.T, c client.Client) {
	t.Helper()
	was, interval := workerClient, pollInterval
	workerClient = func(*rest.Config) (client.Client, error) { return c, nil }
	pollInterval = 5 * time.Millisecond
	t.Cleanup(func() { workerClient, pollInterval = was, interval })
}

func newWorker(objs ...client.Object) client.WithWatch {
	return fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).Build()
}

func newHub(objs ...client.Object) client.WithWatch {
	return fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(append(fleet(), objs...)...).
		WithStatusSubresource(&gantry.WorkerCluster{}).Build()
}

func get[T client.Object](t *testing.T, c client.Client, ns, name string, obj T) T {
	t.Helper()
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("getting %T %s: %v", obj, name, err)
	}
	return obj
}

func hubSecret(t *testing.T, hub client.Client, name string) *corev1.Secret {
	return get(t, hub, gantry.GantryNamespace, name, &corev1.Secret{})
}

// register-cluster applies the hub's access on the worker, writes a kubeconfig the hub takes with the
// token and nothing else of the worker kubeconfig's credentials, and creates the WorkerCluster.
func TestRegisterCluster(t *testing.T) {
	worker, hub := newWorker(), newHub()
	fakeWorker(t, worker)
	file := workerKubeconfig(t, "https://127.0.0.1:6443", []byte(testCA))
	out, err := runOn(hub, "register-cluster", "worker-3", "--worker-kubeconfig", file, "--wait", "0")
	if err != nil {
		t.Fatalf("register-cluster: %v\n%s", err, out)
	}
	for _, want := range []string{
		"worker: namespace/gantry-system applied\n",
		"worker: serviceaccount/gantry-hub-remote -n gantry-system applied\n",
		"worker: clusterrole/gantry-hub-remote applied\n",
		"worker: clusterrolebinding/gantry-hub-remote applied\n",
		"worker: role/gantry-hub-remote -n gantry-system applied\n",
		"worker: rolebinding/gantry-hub-remote -n gantry-system applied\n",
		"worker: token of serviceaccount/gantry-hub-remote -n gantry-system expires 6041-01-01T00:00:00Z",
		"a hub started without --allow-loopback-workers refuses this kubeconfig",
		"worker: the token works with the hub's rights\n",
		"hub: secret/worker-3-kubeconfig -n gantry-system created\n",
		"hub: workercluster/worker-3 created\n",
		"not waiting for workercluster/worker-3 to connect (--wait 0)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	ns := get(t, worker, "", gantry.GantryNamespace, &corev1.Namespace{})
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace labels %v", ns.Labels)
	}
	get(t, worker, gantry.GantryNamespace, "gantry-hub-remote", &corev1.ServiceAccount{})
	if cr := get(t, worker, "", "gantry-hub-remote", &rbacv1.ClusterRole{}); len(cr.Rules) == 0 {
		t.Errorf("ClusterRole without rules")
	}
	wc := get(t, hub, "", "worker-3", &gantry.WorkerCluster{})
	if wc.Spec.KubeconfigSecretRef.Name != "worker-3-kubeconfig" {
		t.Errorf("WorkerCluster spec %+v", wc.Spec)
	}
	data, err := workerconfig.FromSecret(hubSecret(t, hub, "worker-3-kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := workerconfig.RESTConfig(data, workerconfig.Policy{AllowLoopback: true})
	if err != nil {
		t.Fatalf("the hub refuses the kubeconfig: %v", err)
	}
	if cfg.BearerToken != "fake-token" || cfg.Host != "https://127.0.0.1:6443" || string(cfg.CAData) != testCA ||
		len(cfg.CertData) > 0 || len(cfg.KeyData) > 0 {
		t.Errorf("the hub's kubeconfig carries %+v", cfg)
	}
}

// Registering a name again keeps the WorkerCluster and writes a new token; --rotate touches nothing but
// the Secret, and waits for Connected.
func TestRegisterAgainAndRotate(t *testing.T) {
	worker, hub := newWorker(), newHub()
	fakeWorker(t, worker)
	file := workerKubeconfig(t, "https://w3.example:6443", []byte(testCA))
	if out, err := runOn(hub, "register-cluster", "worker-3", "--worker-kubeconfig", file, "--wait", "0"); err != nil {
		t.Fatalf("register-cluster: %v\n%s", err, out)
	}
	wc := get(t, hub, "", "worker-3", &gantry.WorkerCluster{})
	wc.Spec.Cordoned = true
	if err := hub.Update(context.Background(), wc); err != nil {
		t.Fatal(err)
	}
	out, err := runOn(hub, "register-cluster", "worker-3", "--worker-kubeconfig", file, "--wait", "0")
	if err != nil || !strings.Contains(out, "worker: clusterrole/gantry-hub-remote applied") ||
		!strings.Contains(out, "secret/worker-3-kubeconfig -n gantry-system updated") || !strings.Contains(out, "workercluster/worker-3 kept") {
		t.Errorf("register-cluster again: %v\n%s", err, out)
	}
	if !get(t, hub, "", "worker-3", &gantry.WorkerCluster{}).Spec.Cordoned {
		t.Errorf("registering again changed the WorkerCluster's spec")
	}

	wc = get(t, hub, "", "worker-3", &gantry.WorkerCluster{})
	wc.Status.Conditions = []metav1.Condition{{Type: gantry.ClusterConnected, Status: "True", Reason: gantry.ReasonConnected,
		LastTransitionTime: metav1.Now()}}
	if err := hub.Status().Update(context.Background(), wc); err != nil {
		t.Fatal(err)
	}
	before := hubSecret(t, hub, "worker-3-kubeconfig")
	applies := 0
	fakeWorker(t, interceptor.NewClient(worker, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			applies++
			return c.Apply(ctx, obj, opts...)
		}}))
	out, err = runOn(hub, "register-cluster", "worker-3", "--worker-kubeconfig", file, "--rotate", "--wait", "1s")
	if err != nil || applies != 0 || !strings.Contains(out, "updated with the new token") ||
		!strings.Contains(out, "hub: workercluster/worker-3 Connected") {
		t.Errorf("--rotate: %v, %d applies on the worker\n%s", err, applies, out)
	}
	after := hubSecret(t, hub, "worker-3-kubeconfig")
	if after.ResourceVersion == before.ResourceVersion || !equalLabels(after.Labels, before.Labels) {
		t.Errorf("--rotate: Secret %+v, was %+v", after.ObjectMeta, before.ObjectMeta)
	}
}

func equalLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// What register-cluster refuses, it refuses before it writes anything.
func TestRegisterRefuses(t *testing.T) {
	https := "https://w3.example:6443"
	elsewhere := &gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "worker-3"},
		Spec: gantry.WorkerClusterSpec{KubeconfigSecretRef: &gantry.SecretReference{Name: "hand-made"}}}
	for name, tc := range map[string]struct {
		hub  []client.Object
		file string
		args []string
		err  string
	}{
		"a WorkerCluster that points elsewhere": {hub: []client.Object{elsewhere}, err: "reads its kubeconfig from Secret hand-made"},
		"no CA":                                 {file: "no-ca", err: "has no CA"},
		"rotate without a registration":         {args: []string{"--rotate"}, err: "has no token to rotate"},
		"a token TTL too short":                 {args: []string{"--token-ttl", "5m"}, err: "shorter than the 10m"},
		"an unknown worker context":             {args: []string{"--worker-context", "nope"}, err: `context "nope"`},
	} {
		t.Run(name, func(t *testing.T) {
			worker, hub := newWorker(), newHub(tc.hub...)
			fakeWorker(t, worker)
			ca := []byte(testCA)
			if tc.file == "no-ca" {
				ca = nil
			}
			args := append([]string{"register-cluster", "worker-3", "--worker-kubeconfig", workerKubeconfig(t, https, ca), "--wait", "0"}, tc.args...)
			out, err := runOn(hub, args...)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q\n%s", err, tc.err, out)
			}
			if err := worker.Get(context.Background(), types.NamespacedName{Name: gantry.GantryNamespace}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
				t.Errorf("something was applied on the worker: %v", err)
			}
			if err := hub.Get(context.Background(), types.NamespacedName{Namespace: gantry.GantryNamespace, Name: "worker-3-kubeconfig"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
				t.Errorf("the Secret was written: %v", err)
			}
		})
	}
}

// The wait prints why the cluster is not connected, once per change, and ends once it is; it gives up
// after --wait.
func TestRegisterWaitsForConnected(t *testing.T) {
	worker := newWorker()
	fakeWorker(t, worker)
	gets := 0
	hub := interceptor.NewClient(newHub(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if wc, ok := obj.(*gantry.WorkerCluster); ok && key.Name == "worker-3" {
				gets++
				status, reason := metav1.ConditionFalse, gantry.ReasonMissingAPI
				if gets > 3 {
					status, reason = metav1.ConditionTrue, gantry.ReasonConnected
				}
				wc.Status.Conditions = []metav1.Condition{{Type: gantry.ClusterConnected, Status: status, Reason: reason, Message: "no workloads.gantry.dev"}}
			}
			return nil
		}})
	file := workerKubeconfig(t, "https://w3.example:6443", []byte(testCA))
	out, err := runOn(hub, "register-cluster", "worker-3", "--worker-kubeconfig", file, "--wait", "10s")
	if err != nil {
		t.Fatalf("register-cluster: %v\n%s", err, out)
	}
	want := "waiting up to 10s for workercluster/worker-3 to be Connected\n" +
		"  Connected=False (MissingAPI): no workloads.gantry.dev; install Gantry's CRDs and agent on the worker (the chart with role agent)\n" +
		"hub: workercluster/worker-3 Connected\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("output ends\n%s\nwant\n%s", out, want)
	}

	worker2 := newWorker()
	fakeWorker(t, worker2)
	out, err = runOn(newHub(), "register-cluster", "worker-4", "--worker-kubeconfig", workerKubeconfig(t, "https://w4.example:6443", []byte(testCA)),
		"--wait", "50ms")
	if err == nil || !strings.Contains(err.Error(), "workercluster/worker-4 is not Connected after 50ms: the hub has not reported on it yet") {
		t.Errorf("a wait that ends: %v\n%s", err, out)
	}
}

// unregister-cluster waits for the jobs on the cluster, or with --force does not, and says what stays.
func TestUnregisterCluster(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: gantry.GantryNamespace, Name: "worker-1-kubeconfig"}}
	hub := newHub(secret)
	for _, name := range []string{"worker-1", "worker-2"} {
		wc := get(t, hub, "", name, &gantry.WorkerCluster{})
		wc.Spec.KubeconfigSecretRef = &gantry.SecretReference{Name: name + "-kubeconfig"}
		if err := hub.Update(context.Background(), wc); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runOn(hub, "unregister-cluster", "worker-1", "--wait", "30ms")
	if err == nil || !strings.Contains(err.Error(), "1 Workload still needs worker-1 (running team-a/job-a): wait longer with --wait, or pass --force") {
		t.Errorf("unregister with a job running: %v\n%s", err, out)
	}
	if wc := get(t, hub, "", "worker-1", &gantry.WorkerCluster{}); !wc.Spec.Cordoned {
		t.Errorf("not cordoned after a wait that ended: %+v", wc.Spec)
	}
	out, err = runOn(hub, "unregister-cluster", "worker-1", "--force")
	if err != nil {
		t.Fatalf("--force: %v\n%s", err, out)
	}
	for _, want := range []string{"--force: not waiting for 1 Workload on worker-1", "hub: workercluster/worker-1 deleted",
		"hub: secret/worker-1-kubeconfig -n gantry-system deleted", "what stays:", "globalqueue/gpus still lists worker-1",
		"Workloads that still ran on worker-1 (team-a/job-a)", "whose token stays valid until it expires"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if err := hub.Get(context.Background(), types.NamespacedName{Name: "worker-1"}, &gantry.WorkerCluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("WorkerCluster after unregister: %v", err)
	}
	// Again: nothing left to delete is not an error.
	if out, err := runOn(hub, "unregister-cluster", "worker-1"); err != nil || !strings.Contains(out, "workercluster/worker-1 not found") {
		t.Errorf("unregister again: %v\n%s", err, out)
	}
}

// With --worker-kubeconfig, unregister-cluster removes the hub's access from the worker, and only from
// the worker the registration reaches.
func TestUnregisterRemovesTheHubsAccess(t *testing.T) {
	worker, hub := newWorker(), newHub()
	fakeWorker(t, worker)
	file := workerKubeconfig(t, "https://w3.example:6443", []byte(testCA))
	if out, err := runOn(hub, "register-cluster", "worker-3", "--worker-kubeconfig", file, "--wait", "0"); err != nil {
		t.Fatalf("register-cluster: %v\n%s", err, out)
	}
	other := workerKubeconfig(t, "https://w1.example:6443", []byte(testCA))
	if out, err := runOn(hub, "unregister-cluster", "worker-3", "--worker-kubeconfig", other); err == nil ||
		!strings.Contains(err.Error(), "reaches https://w1.example:6443, but WorkerCluster worker-3 reaches https://w3.example:6443") {
		t.Errorf("unregister with another worker's kubeconfig: %v\n%s", err, out)
	}
	if wc := get(t, hub, "", "worker-3", &gantry.WorkerCluster{}); wc.Spec.Cordoned {
		t.Errorf("a refused unregister cordoned the cluster")
	}
	out, err := runOn(hub, "unregister-cluster", "worker-3", "--worker-kubeconfig", file)
	if err != nil {
		t.Fatalf("unregister-cluster: %v\n%s", err, out)
	}
	for _, want := range []string{"worker: rolebinding/gantry-hub-remote -n gantry-system deleted", "worker: serviceaccount/gantry-hub-remote -n gantry-system deleted",
		"worker: clusterrole/gantry-hub-remote deleted", "the hub's tokens stopped working"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if err := worker.Get(context.Background(), types.NamespacedName{Namespace: gantry.GantryNamespace, Name: "gantry-hub-remote"}, &corev1.ServiceAccount{}); !apierrors.IsNotFound(err) {
		t.Errorf("ServiceAccount after unregister: %v", err)
	}
	get(t, worker, "", gantry.GantryNamespace, &corev1.Namespace{})
}

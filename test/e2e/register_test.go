package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/manifest"
	"github.com/gantry-dev/gantry/internal/view"
	"github.com/gantry-dev/gantry/internal/workerconfig"
	"github.com/gantry-dev/gantry/jobkind"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// l40s is the GPU product only worker-3 has.
const l40s = "NVIDIA-L40S"

// TestRegisterClusterAddsAWorkerAndUnregisterRemovesIt brings up a third kwok worker with an L40S node,
// Gantry's CRDs and its own agent, and registers it with kubectl gantry register-cluster from its admin
// kubeconfig (whose CA is a file). The hub connects; a job that only an L40S can run runs there. The
// token is rotated while it runs. unregister-cluster waits for the job, then removes the WorkerCluster,
// its Secret and the hub's access on the worker; the finished job's Workload then goes with its Job.
func TestRegisterClusterAddsAWorkerAndUnregisterRemovesIt(t *testing.T) {
	start := time.Now()
	w3, kubeconfig := kwokWorker(t, "worker-3", l40s)
	t.Logf("worker-3 up with CRDs in %s", time.Since(start).Round(time.Second))

	out := registerCLI(t, "register-cluster", "worker-3", "--worker-kubeconfig", kubeconfig, "--token-ttl", "1h", "--wait", "1m")
	for _, want := range []string{"worker: clusterrole/gantry-hub-remote applied", "worker: the token works with the hub's rights",
		"hub: secret/worker-3-kubeconfig -n gantry-system created", "hub: workercluster/worker-3 created", "hub: workercluster/worker-3 Connected"} {
		if !strings.Contains(out, want) {
			t.Errorf("register-cluster says nothing of %q:\n%s", want, out)
		}
	}
	// The rotation and the unregistration below check the token too.
	first := hubToken(t, "worker-3")
	if exp, ok := view.TokenExpiry(first); !ok || exp.Before(time.Now().Add(50*time.Minute)) || exp.After(time.Now().Add(70*time.Minute)) {
		t.Errorf("the hub's token expires %v (%v), want in an hour", exp, ok)
	}
	startAgent(t, w3, kubeconfig)
	eventually(t, "worker-3's agent ready on the hub", time.Minute, poll, func() error { return agentReady("worker-3") })

	ns := registerNamespace(t)
	dumpOnFailure(t, ns)
	job := makeJob(ns, "l40s").gpus(4).gpuProducts(l40s).runsFor("15s").obj()
	submit(t, job)
	eventually(t, job.Name+" admitted", time.Minute, poll, func() error {
		at, err := winnerOf(job)
		if err == nil && at != "worker-3" {
			t.Fatalf("%s won %s, which has no %s", job.Name, at, l40s)
		}
		return err
	})

	out = registerCLI(t, "register-cluster", "worker-3", "--worker-kubeconfig", kubeconfig, "--rotate", "--token-ttl", "1h", "--wait", "30s")
	if strings.Contains(out, "applied") || !strings.Contains(out, "updated with the new token") || !strings.Contains(out, "Connected") {
		t.Errorf("register-cluster --rotate:\n%s", out)
	}
	if hubToken(t, "worker-3") == first {
		t.Errorf("--rotate left the token as it was")
	}

	out = registerCLI(t, "unregister-cluster", "worker-3", "--worker-kubeconfig", kubeconfig, "--wait", "1m")
	for _, want := range []string{"workercluster/worker-3 cordoned", "1 Workload still needs worker-3: running " + ns + "/" + jobkind.WorkloadName(jobkind.Job{}, job.Name),
		"hub: workercluster/worker-3 deleted", "hub: secret/worker-3-kubeconfig -n gantry-system deleted",
		"worker: serviceaccount/gantry-hub-remote -n gantry-system deleted", "globalqueue/e2e-register still lists worker-3"} {
		if !strings.Contains(out, want) {
			t.Errorf("unregister-cluster says nothing of %q:\n%s", want, out)
		}
	}
	checkUnregistered(t, w3, job)
	t.Logf("registered, ran a job, rotated and unregistered in %s", time.Since(start).Round(time.Second))
}

// kwokWorker creates a kwok cluster for the worker name, as hack/dev-up.sh creates the testbed's, with one
// kwok node of 8 GPUs of product and Gantry's CRDs, and deletes it when the test ends. It returns the
// cluster and its admin kubeconfig as kwokctl writes it.
func kwokWorker(t *testing.T, name, product string) (*testbed.Cluster, string) {
	t.Helper()
	kwokName := "gantry-" + name
	kwokctl(t, 3*time.Minute, "create", "cluster", "--name", kwokName, "--runtime", "binary",
		"--config", filepath.Join(tb.Dir, "kwokctl-config.yaml"), "--timeout", "120s", "--wait", "120s")
	t.Cleanup(func() { kwokctl(t, 2*time.Minute, "delete", "cluster", "--name", kwokName) })
	kubeconfig := filepath.Join(tb.Dir, "kwok", "clusters", kwokName, "kubeconfig.yaml")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := testbed.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	w := &testbed.Cluster{Name: name, Config: cfg, Client: c}
	ctx := context.Background()
	node := gpuNode(t, name+"-"+strings.ToLower(product)+"-0", product)
	eventually(t, name+"'s API server taking a node", time.Minute, poll, func() error {
		return client.IgnoreAlreadyExists(c.Create(ctx, node))
	})
	crds, err := filepath.Glob(filepath.Join("..", "..", "deploy", "crd", "gantry.dev_*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("Gantry's CRDs in deploy/crd: %v %v", crds, err)
	}
	for _, f := range crds {
		if err := applyFile(w, f); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "Gantry's CRDs Established on "+name, time.Minute, poll, func() error {
		return crdsEstablished(c, len(crds))
	})
	return w, kubeconfig
}

// kwokctl runs kwokctl of GANTRY_TOOLS on the testbed's kwok workdir, its output appended to the
// testbed's kwokctl log.
func kwokctl(t *testing.T, timeout time.Duration, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args = append(args, "--kubeconfig", filepath.Join(tb.Dir, "kwokctl.kubeconfig"))
	cmd := exec.CommandContext(ctx, filepath.Join(os.Getenv("GANTRY_TOOLS"), "kwokctl"), args...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+filepath.Join(tb.Dir, "kwok"), "KUBECACHEDIR="+filepath.Join(tb.Dir, "kube-cache"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if f, ferr := os.OpenFile(filepath.Join(tb.Dir, "logs", "kwokctl.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); ferr == nil {
		_, _ = f.Write(out.Bytes())
		_ = f.Close()
	}
	if err != nil {
		t.Errorf("kwokctl %s: %v\n%s", strings.Join(args, " "), err, tailLines(out.String(), 20))
	}
}

// gpuNode is hack/testbed/gpu-node.yaml for one node.
func gpuNode(t *testing.T, name, product string) *corev1.Node {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "hack", "testbed", "gpu-node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("${NODE_NAME}"), []byte(name)), []byte("${GPU_PRODUCT}"), []byte(product))
	objs, err := manifest.Decode(data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("hack/testbed/gpu-node.yaml: %d objects, %v", len(objs), err)
	}
	var node corev1.Node
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, &node); err != nil {
		t.Fatal(err)
	}
	return &node
}

func crdsEstablished(c client.Client, want int) error {
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(context.Background(), &list); err != nil {
		return err
	}
	n := 0
	for _, crd := range list.Items {
		for _, cond := range crd.Status.Conditions {
			if crd.Spec.Group == gantry.GroupVersion.Group && cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				n++
			}
		}
	}
	if n != want {
		return fmt.Errorf("%d of %d Established", n, want)
	}
	return nil
}

// registerCLI runs bin/kubectl-gantry against the hub and returns its output; it fails the test when
// the command fails.
func registerCLI(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args = append([]string{"--kubeconfig", filepath.Join(tb.Dir, "hub.kubeconfig")}, args...)
	cmd := exec.CommandContext(ctx, binary(t, "kubectl-gantry"), args...)
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(tb.Dir, "kube-cache"))
	out, err := cmd.CombinedOutput()
	t.Logf("kubectl gantry %s:\n%s", strings.Join(args[2:], " "), out)
	if err != nil {
		t.Fatalf("kubectl gantry %s: %v (bin/kubectl-gantry is built by make build)", args[2], err)
	}
	return string(out)
}

// binary is the path of a Gantry program that make build wrote to bin/.
func binary(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%v: run make build first", err)
	}
	return path
}

// startAgent runs bin/gantry-agent for the worker as a testbed process, so that hack/dev-down.sh stops
// it too, and stops it when the test ends.
func startAgent(t *testing.T, w *testbed.Cluster, kubeconfig string) {
	t.Helper()
	addr := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	p, err := tb.Start("gantry-agent-"+strings.TrimPrefix(w.Name, "worker-"), []string{
		binary(t, "gantry-agent"), "--kubeconfig", kubeconfig, "--cluster-name", w.Name,
		"--namespace", gantry.GantryNamespace, "--metrics-bind-address", addr(), "--metrics-secure=false", "--health-probe-bind-address", addr(),
		"--placement-timeout", testbed.PlacementTimeout.String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
		_ = os.Remove(filepath.Join(tb.Dir, "pids", p.Name+".pid"))
	})
}

func agentReady(name string) error {
	var wc gantry.WorkerCluster
	if err := tb.Hub.Client.Get(context.Background(), types.NamespacedName{Name: name}, &wc); err != nil {
		return err
	}
	if !apimeta.IsStatusConditionTrue(wc.Status.Conditions, gantry.ClusterAgentReady) {
		return fmt.Errorf("%s: %s", name, conditions(wc.Status.Conditions))
	}
	return nil
}

// registerNamespace creates namespace e2e-register with a Queue of GlobalQueue e2e-register, which
// spans the testbed's workers and worker-3.
func registerNamespace(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	const name = "e2e-register"
	quota := corev1.ResourceList{gantry.GPUResource: resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("64")}
	gq := &gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gantry.GlobalQueueSpec{
		NamespaceSelector: &metav1.LabelSelector{},
		Clusters:          []gantry.ClusterQuota{{Name: "worker-1", Quota: quota}, {Name: "worker-2", Quota: quota}, {Name: "worker-3", Quota: quota}}}}
	for _, obj := range []client.Object{gq, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&gantry.Queue{ObjectMeta: metav1.ObjectMeta{Name: queueName, Namespace: name}, Spec: gantry.QueueSpec{GlobalQueue: name}}} {
		if err := tb.Hub.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = tb.Hub.Client.DeleteAllOf(context.Background(), &batchv1.Job{}, client.InNamespace(name),
			client.PropagationPolicy(metav1.DeletePropagationBackground))
		_ = tb.Hub.Client.Delete(context.Background(), gq)
	})
	return name
}

func hubToken(t *testing.T, worker string) string {
	t.Helper()
	var s corev1.Secret
	if err := tb.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: gantry.GantryNamespace, Name: worker + "-kubeconfig"}, &s); err != nil {
		t.Fatal(err)
	}
	cfg, err := workerconfig.RESTConfig(s.Data[workerconfig.SecretKey], workerconfig.Policy{AllowLoopback: true})
	if err != nil {
		t.Fatalf("the hub refuses the kubeconfig register-cluster wrote: %v", err)
	}
	if cfg.BearerToken == "" || len(cfg.CAData) == 0 || len(cfg.CertData) > 0 || cfg.ExecProvider != nil {
		t.Errorf("the hub's kubeconfig: token %t, CA %t, client certificate %t, exec %t", cfg.BearerToken != "", len(cfg.CAData) > 0,
			len(cfg.CertData) > 0, cfg.ExecProvider != nil)
	}
	return cfg.BearerToken
}

// checkUnregistered checks that the job completed on the worker, that its registration and the hub's
// access there are gone, and that deleting the hub Job lets its finished Workload go.
func checkUnregistered(t *testing.T, w *testbed.Cluster, job *batchv1.Job) {
	t.Helper()
	ctx := context.Background()
	var hubJob batchv1.Job
	if err := tb.Hub.Client.Get(ctx, client.ObjectKeyFromObject(job), &hubJob); err != nil || !jobCondition(&hubJob, batchv1.JobComplete) {
		t.Errorf("hub job %s after unregister-cluster waited for it: %v %+v", job.Name, err, hubJob.Status)
	}
	var ran batchv1.Job
	if err := w.Client.Get(ctx, client.ObjectKeyFromObject(job), &ran); err != nil || !jobCondition(&ran, batchv1.JobComplete) {
		t.Errorf("job %s on %s: %v %+v", job.Name, w.Name, err, ran.Status)
	}
	gone := func(c client.Client, obj client.Object, ns, name string) {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after unregister-cluster: %v", obj, name, err)
		}
	}
	gone(tb.Hub.Client, &gantry.WorkerCluster{}, "", w.Name)
	gone(tb.Hub.Client, &corev1.Secret{}, gantry.GantryNamespace, w.Name+"-kubeconfig")
	gone(w.Client, &corev1.ServiceAccount{}, gantry.GantryNamespace, "gantry-hub-remote")
	if err := tb.Hub.Client.Delete(ctx, &hubJob, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the finished Workload gone with its Job", 30*time.Second, poll, func() error {
		var wl gantry.Workload
		err := tb.Hub.Client.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}, &wl)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("workload %s: %v %s", wl.Name, err, conditions(wl.Status.Conditions))
	})
	if err := audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := testbed.CheckHubHistory(audit.Hub(job.Namespace)); err != nil {
		t.Errorf("the hub's etcd ledger shows a broken promise:\n%v", err)
	}
}

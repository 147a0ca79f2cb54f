package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/helmchart"
	"github.com/gantry-dev/gantry/internal/manifest"
	"github.com/gantry-dev/gantry/internal/ociarchive"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// chartProcess is a Gantry process of the testbed, the ServiceAccount the chart gives it, the Lease its
// replicas elect a leader with, and the image it runs from under the chart (none: the host's binary).
type chartProcess struct{ name, serviceAccount, lease, image string }

var chartProcesses = []chartProcess{
	{"gantry-hub", "gantry-hub", "gantry-hub", "gantry-hub"},
	{"gantry-agent-1", "gantry-agent", "gantry-agent.gantry.dev", ""},
	{"gantry-agent-2", "gantry-agent", "gantry-agent.gantry.dev", "gantry-agent"},
}

// TestTheChartInstallsUpgradesAndUninstalls makes a release of the checkout as make release does
// (untagged), for the version of CHANGELOG.md's latest section, and installs from it only: its
// install-hub.yaml and install-worker.yaml must apply to the hub and a worker (server-side, dry run),
// and its packaged chart is installed into the hub (role hub) and each worker (role agent) with the
// Helm SDK, no image tag set; kwok runs the Deployments' pods, which become Available. The real
// gantry-hub and gantry-agent then run under tokens of the chart's ServiceAccounts: the hub and
// worker-2's agent from the release's image archives, which must hold the very images the chart's
// Deployments name, under runc, as the chart's pods would run (its arguments, security context and
// memory limit), worker-1's agent on the host. The workers are
// registered with tokens of the chart's gantry-hub-remote, and jobs run to completion:
// the API servers' audit logs must show no request of those identities refused, so the chart's rights
// are enough. An upgrade while a job runs keeps the job, the WorkerClusters and the queues; uninstalling
// removes the chart's objects and rights and keeps the CRDs and every object of Gantry's kinds.
func TestTheChartInstallsUpgradesAndUninstalls(t *testing.T) {
	ns := newNamespace(t, "e2e-chart")
	dumpOnFailure(t, ns)
	since := time.Now().Add(-time.Second)
	rel := tryRelease(t)
	ch, err := helmchart.Load(filepath.Join(rel.dir, "gantry-"+strings.TrimPrefix(rel.version, "v")+".tgz"))
	if err != nil {
		t.Fatal(err)
	}
	for file, c := range map[string]*testbed.Cluster{"install-hub.yaml": tb.Hub, "install-worker.yaml": tb.Workers[0]} {
		if err := applyFile(c, filepath.Join(rel.dir, file), client.DryRunAll); err != nil {
			t.Errorf("the release's %s does not apply to %s: %v", file, c.Name, err)
		}
	}
	releases := installChart(t, ch)
	// Before the testbed is restored, and also when a refusal left a job stuck.
	t.Cleanup(func() { checkNothingRefused(t, since) })
	runUnderChartIdentities(t, rel)
	for _, w := range testbed.WorkerNames {
		eventually(t, w+" Connected under the chart's identity", 2*time.Minute, poll, func() error { return connected(w) })
	}

	long := makeJob(ns, "long").gpus(2).runsFor("40s").obj()
	submit(t, long)
	at := runningOn(t, long)
	kept := userObjects(t)
	upgradeChart(t, ch, releases)
	checkStayed(t, long, at)
	if now := userObjects(t); !slices.Equal(now, kept) {
		t.Errorf("the upgrade changed the user objects:\n%v\nwas\n%v", now, kept)
	}
	submitted := []*batchv1.Job{long}
	priority := priorityClass(t)
	for i := range 3 {
		job := makeJob(ns, fmt.Sprintf("after-upgrade-%d", i)).gpus(4).runsFor("3s").obj()
		if i == 0 {
			// A gang on the worker that serves PodGroups: its agent makes one under the chart's identity.
			job = makeJob(ns, "after-upgrade-gang").pods(2).gpus(2).gpuProducts(h100).runsFor("3s").obj()
		}
		// The hub reads a job's PriorityClass: its rights must cover that too.
		job.Spec.Template.Spec.PriorityClassName = priority
		submit(t, job)
		submitted = append(submitted, job)
	}
	allComplete(t, submitted, 3*time.Minute)
	checkPromiseKept(t, submitted)

	stopChartProcesses(t)
	for c, r := range releases {
		if err := r.Uninstall(); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
	}
	checkUninstalled(t, kept)
}

// priorityClass creates a PriorityClass on every cluster, for the rest of the test.
func priorityClass(t *testing.T) string {
	t.Helper()
	for _, c := range tb.All() {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-chart-high"}, Value: 1000}
		if err := c.Client.Create(context.Background(), pc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Client.Delete(context.Background(), pc) })
	}
	return "e2e-chart-high"
}

// installChart installs role hub into the hub and role agent into each worker, on a kwok node of the
// hub's for the hub's pods. The objects hack/dev-up.sh applied from deploy/ are taken over, as an
// administrator who applied the kustomize overlays before would. The testbed as it was comes back at
// the end (restoreTestbed).
func installChart(t *testing.T, ch *helmchart.Chart) map[*testbed.Cluster]*helmchart.Releases {
	t.Helper()
	ctx := context.Background()
	node := systemNode()
	if err := tb.Hub.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	originals := map[string][]string{}
	for _, p := range chartProcesses {
		proc, err := tb.Process(p.name)
		if err != nil {
			t.Fatal(err)
		}
		originals[p.name] = proc.Args
	}
	releases := map[*testbed.Cluster]*helmchart.Releases{}
	t.Cleanup(func() { restoreTestbed(t, releases, originals, node) })
	for _, c := range tb.All() {
		r, err := helmchart.NewReleases(filepath.Join(tb.Dir, c.Name+".kubeconfig"), helmchart.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		releases[c] = r
		if err := r.Install(ctx, ch, chartValues(c, nil), true); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
	}
	for c := range releases {
		checkAvailable(t, c, deploymentOf(c), 0)
	}
	return releases
}

// chartValues are the values each cluster is installed with, over extra. The Deployments' pods start
// on kwok as the jobs' pods do (kwokStart), so that an install or upgrade waits less for them.
func chartValues(c *testbed.Cluster, extra map[string]any) map[string]any {
	annotations := map[string]any{}
	for k, v := range kwokStart() {
		annotations[k] = v
	}
	v := map[string]any{"role": "hub", "hub": map[string]any{"allowLoopbackWorkers": true, "podAnnotations": annotations}}
	if c != tb.Hub {
		v = map[string]any{"role": "agent", "agent": map[string]any{"clusterName": c.Name, "podAnnotations": annotations}}
	}
	for k, e := range extra {
		if m, ok := v[k].(map[string]any); ok {
			for kk, ee := range e.(map[string]any) {
				m[kk] = ee
			}
			continue
		}
		v[k] = e
	}
	return v
}

func deploymentOf(c *testbed.Cluster) string {
	if c == tb.Hub {
		return "gantry-hub"
	}
	return "gantry-agent"
}

// systemNode is a kwok node without GPUs for the pods of the hub's Deployment.
func systemNode() *corev1.Node {
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "hub-system-0",
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"type": "kwok", "kubernetes.io/os": "linux", "kubernetes.io/hostname": "hub-system-0"}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity, Phase: corev1.NodeRunning},
	}
}

// checkAvailable checks that the Deployment is Available with all its replicas (want of them, unless 0).
func checkAvailable(t *testing.T, c *testbed.Cluster, name string, want int32) {
	t.Helper()
	eventually(t, name+" Available on "+c.Name, 2*time.Minute, poll, func() error {
		var d appsv1.Deployment
		if err := c.Client.Get(context.Background(), types.NamespacedName{Namespace: helmchart.Namespace, Name: name}, &d); err != nil {
			return err
		}
		if want != 0 && *d.Spec.Replicas != want {
			return fmt.Errorf("%d replicas, want %d", *d.Spec.Replicas, want)
		}
		if d.Status.AvailableReplicas != *d.Spec.Replicas || d.Status.UpdatedReplicas != *d.Spec.Replicas {
			return fmt.Errorf("%d of %d available, %d updated", d.Status.AvailableReplicas, *d.Spec.Replicas, d.Status.UpdatedReplicas)
		}
		return nil
	})
}

// runUnderChartIdentities restarts the hub and the agents under the chart's ServiceAccounts, and
// registers each worker with a token of the chart's gantry-hub-remote. The processes with an image run
// from it as the chart's pod (runChartPod); the others on the host with a kubeconfig of a token. Each is
// stopped as a Deployment stops its pods, with SIGTERM, which releases its lease.
func runUnderChartIdentities(t *testing.T, rel madeRelease) {
	t.Helper()
	for _, p := range chartProcesses {
		c := clusterOf(p.name)
		proc, err := tb.Process(p.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := proc.Stop(); err != nil {
			t.Fatal(err)
		}
		// SIGTERM hands the lease on: the next leader need not wait for it to expire.
		if holder, err := leaseHolder(c, p.lease); err != nil || holder != "" {
			t.Errorf("%s stopped with SIGTERM: its lease is held by %q (%v), want it released", p.name, holder, err)
		}
		if p.image != "" {
			runChartPod(t, c, p, proc.Args, rel)
			continue
		}
		kubeconfig := filepath.Join(tb.Dir, c.Name+".chart-"+p.serviceAccount+".kubeconfig")
		if err := writeTokenKubeconfig(c, p.serviceAccount, kubeconfig); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Start(p.name, withFlag(proc.Args, "--kubeconfig", kubeconfig)); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range tb.Workers {
		token, err := serviceAccountToken(w, "gantry-hub-remote")
		if err != nil {
			t.Fatal(err)
		}
		setHubToken(t, w.Name, token)
	}
}

// runChartPod runs the process from the release's image under runc, with the pod template of the
// chart's Deployment on that cluster, which must name that image. The container shares the host's
// network (the API servers listen on loopback), so it listens where the host process did, the one flag
// it takes from hostArgs. The kernel must then see the process as the chart describes it.
func runChartPod(t *testing.T, c *testbed.Cluster, p chartProcess, hostArgs []string, rel madeRelease) {
	t.Helper()
	var d appsv1.Deployment
	if err := c.Client.Get(context.Background(), types.NamespacedName{Namespace: helmchart.Namespace, Name: deploymentOf(c)}, &d); err != nil {
		t.Fatal(err)
	}
	flags := map[string]string{}
	for _, f := range []string{"metrics-bind-address", "health-probe-bind-address"} {
		if i := slices.Index(hostArgs, "--"+f); i >= 0 && i+1 < len(hostArgs) {
			flags[f] = hostArgs[i+1]
		}
	}
	archive, ref := imageArchive(t, rel, p.image)
	container := d.Spec.Template.Spec.Containers[0]
	if container.Image != ref {
		t.Errorf("the chart's %s runs the image %s; the release's %s holds %s", d.Name, container.Image, filepath.Base(archive), ref)
	}
	pod := testbed.Pod{Cluster: c, Template: d.Spec.Template, Namespace: helmchart.Namespace, Image: archive, Flags: flags}
	if _, err := tb.StartPod(context.Background(), p.name, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, p.name+" running from its image as the chart says", time.Minute, poll, func() error {
		got, err := tb.InspectPod(p.name)
		if err != nil {
			return err
		}
		want := testbed.ContainerProcess{UID: 65532, GID: 65532, NoNewPrivs: true, ReadOnlyRoot: true,
			Executable: "/" + p.image, MemoryLimit: container.Resources.Limits.Memory().Value()}
		if got != want {
			return fmt.Errorf("the kernel sees %+v, want %+v", got, want)
		}
		t.Logf("%s runs from %s under runc: %+v", p.name, pod.Image, got)
		return nil
	})
}

// madeRelease is a release the test made: its directory and version.
type madeRelease struct{ dir, version string }

// tryRelease makes a release of the checkout into a directory of the test's, as make release VERSION=...
// UNTAGGED=1 does, for the version of CHANGELOG.md's latest section.
func tryRelease(t *testing.T) madeRelease {
	t.Helper()
	root := filepath.Join("..", "..")
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	var version string
	for _, line := range strings.Split(string(changelog), "\n") {
		if v, ok := strings.CutPrefix(line, "## v"); ok {
			version = "v" + strings.Fields(v)[0]
			break
		}
	}
	if version == "" {
		t.Fatal("CHANGELOG.md has no section of a version")
	}
	out := t.TempDir()
	start := time.Now()
	cmd := exec.Command("go", "run", "./hack/release", "-version", version, "-out", out, "-untagged")
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release VERSION=%s UNTAGGED=1: %v\n%s", version, err, output)
	}
	t.Logf("made release %s in %s", version, time.Since(start).Round(time.Second))
	return madeRelease{dir: filepath.Join(out, version), version: version}
}

// imageArchive is the path of the release's archive of the image, which must be of the commit checked
// out (an older image would test older code), and the reference it is tagged with.
func imageArchive(t *testing.T, rel madeRelease, image string) (path, ref string) {
	t.Helper()
	path = filepath.Join(rel.dir, "images", image+".tar")
	idx, named, err := ociarchive.Open(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	if built := m.Annotations["org.opencontainers.image.revision"]; built != strings.TrimSpace(string(head)) {
		t.Fatalf("%s is of commit %s, the checkout is at %s", path, built, head)
	}
	if named.Annotations["io.containerd.image.name"] == "" {
		t.Fatalf("%s names no image", path)
	}
	return path, named.Annotations["io.containerd.image.name"]
}

func clusterOf(process string) *testbed.Cluster {
	if w, ok := strings.CutPrefix(process, "gantry-agent-"); ok {
		return tb.Worker("worker-" + w)
	}
	return tb.Hub
}

func withFlag(args []string, flag, value string) []string {
	args = slices.Clone(args)
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		args[i+1] = value
	}
	return args
}

func serviceAccountToken(c *testbed.Cluster, sa string) (string, error) {
	tr, err := c.Clientset.CoreV1().ServiceAccounts(helmchart.Namespace).CreateToken(context.Background(), sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}},
		metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token of %s on %s: %w", sa, c.Name, err)
	}
	return tr.Status.Token, nil
}

// writeTokenKubeconfig writes a kubeconfig for the cluster's API server with a token of the
// ServiceAccount and nothing else.
func writeTokenKubeconfig(c *testbed.Cluster, sa, path string) error {
	token, err := serviceAccountToken(c, sa)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: sa}
	cfg.CurrentContext = c.Name
	return clientcmd.WriteToFile(*cfg, path)
}

// upgradeChart upgrades every release with other values: three hub replicas, two agent replicas.
func upgradeChart(t *testing.T, ch *helmchart.Chart, releases map[*testbed.Cluster]*helmchart.Releases) {
	t.Helper()
	for c, r := range releases {
		component := strings.TrimPrefix(deploymentOf(c), "gantry-")
		replicas := map[string]int32{"hub": 3, "agent": 2}[component]
		extra := map[string]any{component: map[string]any{"replicas": replicas}, "logLevel": "debug"}
		if err := r.Upgrade(context.Background(), ch, chartValues(c, extra)); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		checkAvailable(t, c, deploymentOf(c), replicas)
	}
}

// userObjects names, with their UIDs, what users and administrators created: WorkerClusters, their
// Secrets, GlobalQueues, Queues, and the agents' CapacityReports.
func userObjects(t *testing.T) []string {
	t.Helper()
	var out []string
	add := func(c *testbed.Cluster, list client.ObjectList) {
		if err := c.Client.List(context.Background(), list); err != nil {
			t.Fatal(err)
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			o := item.(client.Object)
			out = append(out, fmt.Sprintf("%s %T %s/%s %s", c.Name, o, o.GetNamespace(), o.GetName(), o.GetUID()))
		}
	}
	add(tb.Hub, &gantry.WorkerClusterList{})
	add(tb.Hub, &gantry.GlobalQueueList{})
	add(tb.Hub, &gantry.QueueList{})
	for _, w := range testbed.WorkerNames {
		var s corev1.Secret
		if err := tb.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: helmchart.Namespace, Name: w + "-kubeconfig"}, &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("hub Secret %s %s", s.Name, s.UID))
	}
	for _, w := range tb.Workers {
		add(w, &gantry.CapacityReportList{})
	}
	slices.Sort(out)
	return out
}

// checkNothingRefused fails the test for each request of the chart's identities an API server refused.
func checkNothingRefused(t *testing.T, since time.Time) {
	t.Helper()
	for _, c := range tb.All() {
		refused, err := tb.Refused(c.Name, "system:serviceaccount:"+helmchart.Namespace+":", since)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range refused {
			t.Errorf("%s refused %s %s of %s: %d", c.Name, e.Verb, e.RequestURI, e.User.Username, e.Response.Code)
		}
	}
}

func stopChartProcesses(t *testing.T) {
	t.Helper()
	for _, p := range chartProcesses {
		if proc, err := tb.Process(p.name); err == nil {
			if err := proc.Stop(); err != nil {
				t.Error(err)
			}
		}
	}
}

// chartCRDs counts the CRDs the chart ships.
func chartCRDs(t *testing.T) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "deploy", "charts", "gantry", "crds", "gantry.dev_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("listing the chart's CRDs: %v (%d)", err, len(files))
	}
	return len(files)
}

// checkUninstalled checks that the chart's objects are gone from every cluster, and that the CRDs and
// the objects of Gantry's kinds are all still there.
func checkUninstalled(t *testing.T, kept []string) {
	t.Helper()
	ctx := context.Background()
	gone := func(c *testbed.Cluster, obj client.Object, name string) {
		key := types.NamespacedName{Name: name}
		if _, clusterScoped := obj.(*rbacv1.ClusterRole); !clusterScoped {
			key.Namespace = helmchart.Namespace
		}
		if err := c.Client.Get(ctx, key, obj); !apierrors.IsNotFound(err) {
			t.Errorf("%s: %T %s after uninstall: %v", c.Name, obj, name, err)
		}
	}
	for _, c := range tb.All() {
		component := deploymentOf(c)
		gone(c, &appsv1.Deployment{}, component)
		gone(c, &corev1.ServiceAccount{}, component)
		gone(c, &rbacv1.ClusterRole{}, component)
		var crds apiextensionsv1.CustomResourceDefinitionList
		if err := c.Client.List(ctx, &crds); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, crd := range crds.Items {
			if crd.Spec.Group == gantry.GroupVersion.Group {
				n++
			}
		}
		if want := chartCRDs(t); n != want {
			t.Errorf("%s: %d of Gantry's CRDs after uninstall, want the chart's %d", c.Name, n, want)
		}
	}
	for _, w := range tb.Workers {
		gone(w, &corev1.ServiceAccount{}, "gantry-hub-remote")
	}
	if now := userObjects(t); !slices.Equal(now, kept) {
		t.Errorf("uninstall changed the user objects:\n%v\nwas\n%v", now, kept)
	}
}

// restoreTestbed puts back what the other tests run on: the objects of deploy/ as hack/dev-up.sh
// applies them, fresh tokens for the hub on the workers, and the original processes.
func restoreTestbed(t *testing.T, releases map[*testbed.Cluster]*helmchart.Releases, originals map[string][]string, node *corev1.Node) {
	stopChartProcesses(t)
	for c, r := range releases {
		if err := r.Uninstall(); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
	files := map[*testbed.Cluster][]string{tb.Hub: {"namespace/namespace.yaml", "hub/rbac.yaml", "hub/job-admission-policy.yaml"}}
	for _, w := range tb.Workers {
		files[w] = []string{"namespace/namespace.yaml", "worker/hub-access.yaml", "agent/pod-group-policy.yaml"}
	}
	for c, fs := range files {
		for _, f := range fs {
			if err := applyFile(c, filepath.Join("..", "..", "deploy", f)); err != nil {
				t.Errorf("restoring %s on %s: %v", f, c.Name, err)
			}
		}
	}
	for _, w := range tb.Workers {
		if token, err := serviceAccountToken(w, "gantry-hub-remote"); err != nil {
			t.Error(err)
		} else {
			setHubToken(t, w.Name, token)
		}
	}
	for _, p := range chartProcesses {
		if _, err := tb.Start(p.name, originals[p.name]); err != nil {
			t.Error(err)
		}
	}
	_ = tb.Hub.Client.Delete(context.Background(), node)
	for _, w := range testbed.WorkerNames {
		eventually(t, w+" Connected again", 2*time.Minute, poll, func() error { return connected(w) })
	}
	waitForJobPolicy(t)
}

// applyFile applies every object of a YAML file with server-side apply, as kubectl apply --server-side
// (with client.DryRunAll, as its --dry-run=server).
func applyFile(c *testbed.Cluster, path string, opts ...client.ApplyOption) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	objs, err := manifest.Decode(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, u := range objs {
		if err := c.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
			append([]client.ApplyOption{client.FieldOwner("kubectl"), client.ForceOwnership}, opts...)...); err != nil {
			return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// waitForJobPolicy waits until the hub's API server applies the restored admission policy: a queued
// Job created in a dry run comes back suspended and managed by Gantry.
func waitForJobPolicy(t *testing.T) {
	t.Helper()
	eventually(t, "the job admission policy in force", time.Minute, poll, func() error {
		job := makeJob("default", "policy-probe").obj()
		job.Spec.Suspend = nil
		if err := tb.Hub.Client.Create(context.Background(), job, client.DryRunAll); err != nil {
			return err
		}
		if !ptr.Deref(job.Spec.Suspend, false) || ptr.Deref(job.Spec.ManagedBy, "") != "gantry.dev/hub" {
			return fmt.Errorf("a queued Job is created with suspend %v, managedBy %v", job.Spec.Suspend, job.Spec.ManagedBy)
		}
		return nil
	})
}

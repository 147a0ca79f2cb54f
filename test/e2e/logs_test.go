package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// TestLogsOfAJobStreamFromItsWorkerThroughTheHub runs a job of two pods on a worker and reads their
// logs with kubectl gantry logs as a tenant whose kubeconfig holds nothing but a token of a
// ServiceAccount allowed to read pod logs and get Jobs in its namespace on the hub: every line of the worker's kwok
// log file comes out prefixed by pod and container. Another tenant's token gets 403, no token 401, a
// token the hub does not know 401; with -f, a line appended to the log file comes out within seconds;
// a standby hub replica serves the same logs.
func TestLogsOfAJobStreamFromItsWorkerThroughTheHub(t *testing.T) {
	ns := newNamespace(t, "e2e-logs")
	other := newNamespace(t, "e2e-logs-other")
	dumpOnFailure(t, ns)
	tenant := logsTenant(t, ns, "reader")
	stranger := logsTenant(t, other, "stranger")

	job := makeJob(ns, "trainer").pods(2).gpus(1).runsFor("10m").obj()
	submit(t, job)
	pods := runningPods(t, job.Name, ns)

	want := map[string][]string{}
	for _, p := range pods {
		want["["+p+"/train] "] = logFileLines(t)
	}
	out, stderr, err := kubectlGantryAs(t, tenant, "logs", job.Name, "-n", ns)
	if err != nil {
		t.Fatalf("kubectl gantry logs as the tenant: %v\n%s", err, stderr)
	}
	if got := linesByPrefix(t, out); !mapsEqual(got, want) {
		t.Errorf("kubectl gantry logs printed\n%s\nwant the log file's lines from each of %v", out, pods)
	}
	out, stderr, err = kubectlGantryAs(t, tenant, "logs", job.Name, "-n", ns, "--tail", "1", "-c", "train")
	if err != nil || strings.Count(out, "\n") != len(pods) {
		t.Errorf("--tail 1: %v %q\n%s", err, out, stderr)
	}

	if _, stderr, err := kubectlGantryAs(t, stranger, "logs", job.Name, "-n", ns); err == nil ||
		!strings.Contains(stderr, "403 Forbidden: system:serviceaccount:"+other+":stranger may not get pods/log in namespace "+ns) {
		t.Errorf("another tenant's token: %v\n%s", err, stderr)
	}
	// Without a token the ConfigMap is not readable either (it is every authenticated user's): the flag
	// names the endpoint.
	if _, stderr, err := kubectlGantryAs(t, "", "logs", job.Name, "-n", ns, "--hub-endpoint", logsEndpoint(t)); err == nil ||
		!strings.Contains(stderr, "401 Unauthorized: no bearer token") {
		t.Errorf("no token: %v\n%s", err, stderr)
	}
	if code := logsStatus(t, ns, job.Name, "not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("a token the hub does not know: %d, want 401", code)
	}

	followAppendedLine(t, tenant, job.Name, ns, pods)
	standbyServesLogs(t, tenant, job.Name, ns, pods)
}

// TestLogsOfAJobSetStreamFromItsWorkerThroughTheHub reads the logs of a JobSet's pods (a driver and
// two workers, each in a Job the JobSet controller made) as a tenant who may read pod logs and get
// JobSets in its namespace: every pod's lines come out, those of one pod set alone with --pod-set; a
// tenant who may read pod logs and get Jobs, but not JobSets, gets 403.
func TestLogsOfAJobSetStreamFromItsWorkerThroughTheHub(t *testing.T) {
	ns := newNamespace(t, "e2e-logs-jobset")
	dumpOnFailure(t, ns)
	reader := tokenWithRules(t, ns, "reader", false,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{"jobset.x-k8s.io"}, Resources: []string{"jobsets"}, Verbs: []string{"get"}})
	jobsReader := logsTenant(t, ns, "jobs-reader")
	submitJobSet(t, ns, "train", "10m")
	pods := runningPodsOf(t, ns, "train", 3)

	lines := logFileLines(t)
	want := func(podSet string) map[string][]string {
		out := map[string][]string{}
		for name, set := range pods {
			if podSet == "" || set == podSet {
				out["["+name+"/train] "] = lines
			}
		}
		return out
	}
	for _, args := range [][]string{{"jobset/train"}, {"train"}, {"jobset/train", "--pod-set", "workers"}} {
		podSet := ""
		if len(args) == 3 {
			podSet = args[2]
		}
		out, stderr, err := kubectlGantryAs(t, reader, append([]string{"logs", "-n", ns}, args...)...)
		if err != nil {
			t.Fatalf("kubectl gantry logs %v: %v\n%s", args, err, stderr)
		}
		if got := linesByPrefix(t, out); !mapsEqual(got, want(podSet)) {
			t.Errorf("kubectl gantry logs %v printed\n%s\nwant the log file's lines from each of %v", args, out, want(podSet))
		}
	}
	if _, stderr, err := kubectlGantryAs(t, jobsReader, "logs", "jobset/train", "-n", ns); err == nil ||
		!strings.Contains(stderr, "403 Forbidden: system:serviceaccount:"+ns+":jobs-reader may not get jobsets.jobset.x-k8s.io train in namespace "+ns) {
		t.Errorf("a tenant who may not get JobSets: %v\n%s", err, stderr)
	}
}

// runningPodsOf waits until the n pods of the job's Workload run on its winner, and returns their pod
// sets by pod name: the pods are found as the hub finds them, by the Workload's UID.
func runningPodsOf(t *testing.T, ns, job string, n int) map[string]string {
	t.Helper()
	pods := map[string]string{}
	eventually(t, "the pods of "+job+" running on its worker", 2*time.Minute, poll, func() error {
		var wl gantry.WorkloadList
		if err := tb.Hub.Client.List(context.Background(), &wl, client.InNamespace(ns), client.MatchingLabels{gantry.JobNameLabel: job}); err != nil {
			return err
		}
		if len(wl.Items) != 1 || wl.Items[0].Status.ClusterName == "" {
			return fmt.Errorf("no winner yet")
		}
		var list corev1.PodList
		if err := tb.Worker(wl.Items[0].Status.ClusterName).Client.List(context.Background(), &list, client.InNamespace(ns),
			client.MatchingLabels{gantry.WorkloadUIDLabel: string(wl.Items[0].UID)}); err != nil {
			return err
		}
		clear(pods)
		for _, p := range list.Items {
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s is %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
			}
			pods[p.Name] = p.Labels[gantry.PodSetLabel]
		}
		if len(pods) != n {
			return fmt.Errorf("%d pods, want %d", len(pods), n)
		}
		return nil
	})
	return pods
}

// standbyServesLogs starts a second hub replica, a standby, which holds no connection to the workers,
// and reads the logs from its endpoint: every replica serves them, as the chart's Service spreads
// requests over both.
func standbyServesLogs(t *testing.T, token, job, ns string, pods []string) {
	t.Helper()
	_, leader := twoHubs(t)
	want := map[string][]string{}
	for _, p := range pods {
		want["["+p+"/train] "] = logFileLines(t)
	}
	standby, err := tb.Process("gantry-hub-2")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(standby.Args, "--endpoint-bind-address")
	if i < 0 || i+1 >= len(standby.Args) {
		t.Fatalf("the second replica serves no endpoint: %v", standby.Args)
	}
	url := "http://" + standby.Args[i+1]
	eventually(t, "the standby's endpoint serving the job's logs", time.Minute, poll, func() error {
		out, stderr, err := kubectlGantryAs(t, token, "logs", job, "-n", ns, "--hub-endpoint", url)
		if err != nil {
			return fmt.Errorf("%v: %s", err, stderr)
		}
		if got := linesByPrefix(t, out); !mapsEqual(got, want) {
			return fmt.Errorf("printed %q", out)
		}
		return nil
	})
	if now, err := hubLeader(); err != nil || now != leader {
		t.Errorf("the lease went from %q to %q (%v): the logs did not come from a standby", leader, now, err)
	}
}

// followAppendedLine follows the job's logs and appends a line to the log file the workers' kwok serves:
// each pod's log shows it within seconds.
func followAppendedLine(t *testing.T, token, job, ns string, pods []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlGantryBinary(t), "--kubeconfig", logsKubeconfig(t, token), "logs", job, "-n", ns, "-f")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			mu.Lock()
			seen = append(seen, s.Text())
			mu.Unlock()
		}
	}()
	has := func(line string) error {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range pods {
			if !slices.Contains(seen, "["+p+"/train] "+line) {
				return fmt.Errorf("no %q from %s yet; seen %q (stderr %q)", line, p, seen, stderr.String())
			}
		}
		return nil
	}
	// Following: the file's lines came, and the stream stays open.
	existing := logFileLines(t)
	eventually(t, "the followed logs' first lines", 30*time.Second, 100*time.Millisecond, func() error { return has(existing[len(existing)-1]) })
	appended := fmt.Sprintf("followed at %s", time.Now().UTC().Format(time.RFC3339Nano))
	f, err := os.OpenFile(filepath.Join(tb.Dir, "job-logs.log"), os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fmt.Fprintf(f, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), appended)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually(t, "the appended line in each pod's followed log", 15*time.Second, 100*time.Millisecond, func() error { return has(appended) })
	t.Logf("the appended line came through the hub in %s", time.Since(start).Round(10*time.Millisecond))
	cancel()
	_ = cmd.Wait()
}

// logsTenant creates a ServiceAccount in ns that may read pod logs and get Jobs there (the logs of a
// job are for those who may read it), and returns a token of it.
func logsTenant(t *testing.T, ns, name string) string {
	t.Helper()
	return tokenWithRules(t, ns, name, false, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get"}})
}

// logsKubeconfig writes a kubeconfig for the hub whose user has only the token (none when empty).
func logsKubeconfig(t *testing.T, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["hub"] = &clientcmdapi.Cluster{Server: tb.Hub.Config.Host, CertificateAuthorityData: tb.Hub.Config.CAData}
	cfg.AuthInfos["tenant"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "tenant"}
	cfg.CurrentContext = "hub"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func kubectlGantryBinary(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "bin", "kubectl-gantry")
}

// kubectlGantryAs runs bin/kubectl-gantry with a kubeconfig that holds only the token.
func kubectlGantryAs(t *testing.T, token string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlGantryBinary(t), append([]string{"--kubeconfig", logsKubeconfig(t, token)}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// logsEndpoint is the URL of the hub's endpoint, as the ConfigMap that hack/dev-up.sh writes says.
func logsEndpoint(t *testing.T) string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := tb.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: gantry.GantryNamespace, Name: "gantry-hub-endpoint"}, &cm); err != nil {
		t.Fatalf("the hub's endpoint ConfigMap: %v", err)
	}
	return strings.TrimSuffix(cm.Data["url"], "/")
}

// logsStatus is the status of the endpoint's answer to a log request with the bearer token.
func logsStatus(t *testing.T, ns, job, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, logsEndpoint(t)+"/logs/"+ns+"/"+job, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// runningPods waits until the job's pods run on its winner, and returns their names, sorted.
func runningPods(t *testing.T, job, ns string) []string {
	t.Helper()
	var names []string
	eventually(t, "the pods of "+job+" running on its worker", 2*time.Minute, poll, func() error {
		var wl gantry.WorkloadList
		if err := tb.Hub.Client.List(context.Background(), &wl, client.InNamespace(ns), client.MatchingLabels{gantry.JobNameLabel: job}); err != nil {
			return err
		}
		if len(wl.Items) != 1 || wl.Items[0].Status.ClusterName == "" {
			return fmt.Errorf("no winner yet")
		}
		worker := tb.Worker(wl.Items[0].Status.ClusterName)
		var list corev1.PodList
		if err := worker.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"batch.kubernetes.io/job-name": job}); err != nil {
			return err
		}
		names = names[:0]
		for _, p := range list.Items {
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s is %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
			}
			names = append(names, p.Name)
		}
		if len(names) != 2 {
			return fmt.Errorf("%d pods", len(names))
		}
		return nil
	})
	slices.Sort(names)
	return names
}

// logFileLines are the lines of the log file the workers' kwok serves (hack/testbed/job-logs.log, in the
// CRI format "<time> <stream> <tag> <line>"), as a container's log shows them.
func logFileLines(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(tb.Dir, "job-logs.log"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(l, " ", 4)
		if len(parts) != 4 {
			t.Fatalf("log file line %q is not in the CRI format", l)
		}
		lines = append(lines, parts[3])
	}
	return lines
}

// linesByPrefix groups the printed lines by their "[pod/container] " prefix, in order.
func linesByPrefix(t *testing.T, out string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		prefix, text, ok := strings.Cut(l, "] ")
		if !ok || !strings.HasPrefix(prefix, "[") {
			t.Errorf("line %q has no [pod/container] prefix", l)
			continue
		}
		got[prefix+"] "] = append(got[prefix+"] "], text)
	}
	return got
}

func mapsEqual(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

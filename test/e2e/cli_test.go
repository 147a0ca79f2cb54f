package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// TestKubectlGantryExplainsWhyJobsWait runs the kubectl-gantry binary against the testbed's hub. A
// GlobalQueue "tight" allows 8 GPUs on worker-1, which a running job holds, and 64 on worker-2, whose
// H100 nodes are all taken. A job accepting only H100 waits for capacity on worker-2 (and for quota on
// worker-1), one accepting only A100 waits for quota on worker-1, and one naming a Queue that does not
// exist waits for it: explain names the blocking cluster and resource of each, and jobs lists them all.
func TestKubectlGantryExplainsWhyJobsWait(t *testing.T) {
	ns := newNamespace(t, "e2e-explain")
	dumpOnFailure(t, ns)
	createTightQueue(t, ns)
	w2 := tb.Worker("worker-2")
	for _, node := range gpuNodes(t, w2) {
		p := occupy(t, w2, node, 8)
		t.Cleanup(func() { release(t, w2, p) })
	}
	waitForReportedGPUs(t, "worker-2", h100, func(g gantry.GPUProductCapacity) error {
		if g.Free != 0 {
			return fmt.Errorf("free %d, want 0", g.Free)
		}
		return nil
	})

	holder := makeJob(ns, "holder").gpus(8).runsFor("10m").gpuProducts(a100).obj()
	holder.Labels[gantry.QueueLabel] = "tight"
	submit(t, holder)
	waitForPending(t, ns, "holder", "", gantry.WorkloadJobCreated)
	for _, job := range []struct{ name, queue, product string }{
		{"capacity", "tight", h100}, {"quota", "tight", a100}, {"missing", "nope", a100},
	} {
		j := makeJob(ns, job.name).gpus(8).runsFor(runTime).gpuProducts(job.product).obj()
		j.Labels[gantry.QueueLabel] = job.queue
		submit(t, j)
	}
	waitForPending(t, ns, "capacity", gantry.ReasonWaitingForCapacity, gantry.WorkloadPending)
	waitForPending(t, ns, "quota", gantry.ReasonWaitingForQuota, gantry.WorkloadPending)
	waitForPending(t, ns, "missing", gantry.ReasonQueueNotFound, gantry.WorkloadPending)
	// explain and queues read the usage the hub publishes on the GlobalQueue, at most a second behind.
	eventually(t, "GlobalQueue tight's published usage", 30*time.Second, poll, func() error {
		var gq gantry.GlobalQueue
		if err := tb.Hub.Client.Get(context.Background(), client.ObjectKey{Name: "tight"}, &gq); err != nil {
			return err
		}
		if gq.Status.PendingWorkloads != 2 || gq.Status.AdmittedWorkloads != 1 {
			return fmt.Errorf("status %+v, want 2 pending and 1 admitted", gq.Status)
		}
		return nil
	})

	for job, want := range map[string][]string{
		"capacity": {"State: Pending (WaitingForCapacity)",
			"worker-1  blocked by quota: needs nvidia.com/gpu 8, 0 left of 8 (8 used, 0 reserved)",
			"worker-2  blocked by capacity: quota allows it, but the last capacity report has no room",
			"capacity: needs 8 nvidia.com/gpu, 8 on one node; reported NVIDIA-H100-80GB-HBM3 0 free of 32, at most 0 on one node"},
		"quota": {"State: Pending (WaitingForQuota)",
			"worker-1  blocked by quota: needs nvidia.com/gpu 8, 0 left of 8 (8 used, 0 reserved)",
			"worker-2  rejected by its agent"},
		"missing": {"Queue:     nope (no such Queue in namespace " + ns + ")", "State: Pending (QueueNotFound)",
			"To do: create the Queue in this namespace, or fix the job's label gantry.dev/queue-name."},
		"holder": {"State: Running on worker-1", "Won by worker-1 in epoch 1", "GPU product " + a100},
	} {
		out := kubectlGantry(t, "explain", job, "-n", ns)
		for _, line := range want {
			if !strings.Contains(out, line) {
				t.Errorf("kubectl gantry explain %s says no %q:\n%s", job, line, out)
			}
		}
	}
	checkGolden(t, "jobs", kubectlGantry(t, "jobs", "-n", ns))
	if out := kubectlGantry(t, "queues"); !strings.Contains(out, "tight") || !strings.Contains(out, "nvidia.com/gpu 8/8") {
		t.Errorf("kubectl gantry queues shows no full quota of tight on worker-1:\n%s", out)
	}
}

// TestKubectlGantryListsAndExplainsJobsOfEveryKind runs a JobSet and a Job of the same name, train,
// through the hub: kubectl gantry jobs lists both with their kinds (and -o yaml prints both objects),
// explain asks which is meant and tells each one's story given its kind, the JobSet's as its mirrored
// status says; the dispatcher's Events are on the JobSet.
func TestKubectlGantryListsAndExplainsJobsOfEveryKind(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "e2e-cli-kinds")
	dumpOnFailure(t, ns)
	js := submitJobSet(t, ns, "train", "2s")
	submit(t, makeJob(ns, "train").gpus(1).runsFor("10m").obj())
	// Each kind's Workload: the Job's running, the JobSet's finished.
	eventually(t, "the Job running and the JobSet finished", 3*time.Minute, poll, func() error {
		for name, condition := range map[string]string{"job-train": gantry.WorkloadJobCreated, "jobset-train": gantry.WorkloadFinished} {
			var wl gantry.Workload
			if err := tb.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &wl); err != nil {
				return err
			}
			if !apimeta.IsStatusConditionTrue(wl.Status.Conditions, condition) {
				return fmt.Errorf("Workload %s: no %s yet: %s", name, condition, conditions(wl.Status.Conditions))
			}
		}
		return nil
	})

	rows := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(kubectlGantry(t, "jobs", "-n", ns)), "\n")[1:] {
		f := strings.Fields(l)
		rows[f[0]+" "+f[1]] = strings.Join(f[2:5], " ")
	}
	want := map[string]string{"train Job": "default Running " + gantry.ReasonAdmittedByCluster, "train JobSet": "default Finished " + gantry.ReasonJobSucceeded}
	if !maps.Equal(rows, want) {
		t.Errorf("kubectl gantry jobs: rows %v, want %v", rows, want)
	}
	if out := kubectlGantry(t, "jobs", "-n", ns, "-o", "yaml"); !strings.Contains(out, "kind: List") ||
		!strings.Contains(out, "kind: JobSet") || !strings.Contains(out, "kind: Job\n") {
		t.Errorf("kubectl gantry jobs -o yaml does not hold both jobs:\n%s", out)
	}

	if _, stderr, err := kubectlGantryResult("explain", "train", "-n", ns); err == nil || !strings.Contains(stderr, "name one, as job/train or jobset/train") {
		t.Errorf("kubectl gantry explain train: %v, want it to ask which kind's:\n%s", err, stderr)
	}
	for ref, lines := range map[string][]string{
		"jobset/train": {"JobSet " + ns + "/train (Workload jobset-train)", "State: Finished (" + gantry.ReasonJobSucceeded + ")", "  JobSet: succeeded",
			"  JobSet Completed ", "  JobSet created on worker-"},
		"job/train": {"Job " + ns + "/train (Workload job-train)", "  Job: running; 1 active"},
	} {
		out := kubectlGantry(t, "explain", ref, "-n", ns)
		for _, line := range lines {
			if !strings.Contains(out, line) {
				t.Errorf("kubectl gantry explain %s says no %q:\n%s", ref, line, out)
			}
		}
	}

	var events eventsv1.EventList
	if err := tb.Hub.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, e := range events.Items {
		if e.Regarding.Kind == "JobSet" && e.Regarding.Name == js.Name && e.Regarding.UID == js.UID {
			reasons[e.Reason] = true
		}
	}
	if !reasons["Admitted"] {
		t.Errorf("the dispatcher's Events on the JobSet: %v, want Admitted", reasons)
	}
}

// submitJobSet creates on the hub a queued JobSet name in ns: a driver of one pod and workers of two,
// each asking for a GPU and running for runsFor. It is deleted when the test ends.
func submitJobSet(t *testing.T, ns, name, runsFor string) *jobset.JobSet {
	t.Helper()
	replicated := func(rj string, pods int32) jobset.ReplicatedJob {
		tpl := makeJob(ns, rj).pods(pods).gpus(1).runsFor(runsFor).obj()
		return jobset.ReplicatedJob{Name: rj, Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: tpl.Spec}}
	}
	js := &jobset.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{gantry.QueueLabel: queueName}},
		Spec:       jobset.JobSetSpec{ReplicatedJobs: []jobset.ReplicatedJob{replicated("driver", 1), replicated("workers", 2)}},
	}
	if err := tb.Hub.Client.Create(context.Background(), js); err != nil {
		t.Fatalf("submitting JobSet %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = tb.Hub.Client.Delete(context.Background(), js, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	return js
}

// createTightQueue creates GlobalQueue tight (8 GPUs on worker-1, 64 on worker-2) for namespace ns only,
// and its Queue there.
func createTightQueue(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	gq := &gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: "tight"}, Spec: gantry.GlobalQueueSpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		Clusters: []gantry.ClusterQuota{
			{Name: "worker-1", Quota: corev1.ResourceList{gantry.GPUResource: resource.MustParse("8")}},
			{Name: "worker-2", Quota: corev1.ResourceList{gantry.GPUResource: resource.MustParse("64")}}}}}
	if err := tb.Hub.Client.Create(ctx, gq); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.Hub.Client.Delete(context.Background(), gq) })
	q := &gantry.Queue{ObjectMeta: metav1.ObjectMeta{Name: "tight", Namespace: ns}, Spec: gantry.QueueSpec{GlobalQueue: "tight"}}
	if err := tb.Hub.Client.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
}

// waitForPending waits until the hub Workload of job has condition typ True, with reason when given.
func waitForPending(t *testing.T, ns, job, reason, typ string) {
	t.Helper()
	eventually(t, job+" "+typ+" "+reason, 2*time.Minute, poll, func() error {
		var wls gantry.WorkloadList
		if err := tb.Hub.Client.List(context.Background(), &wls, client.InNamespace(ns), client.MatchingLabels{gantry.JobNameLabel: job}); err != nil {
			return err
		}
		if len(wls.Items) != 1 {
			return fmt.Errorf("%d Workloads", len(wls.Items))
		}
		c := apimeta.FindStatusCondition(wls.Items[0].Status.Conditions, typ)
		if c == nil || c.Status != metav1.ConditionTrue || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("condition %s is %+v", typ, c)
		}
		return nil
	})
}

// kubectlGantry runs bin/kubectl-gantry (make build) against the hub as its administrator.
func kubectlGantry(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := kubectlGantryResult(args...)
	if err != nil {
		t.Fatalf("kubectl gantry %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// kubectlGantryResult runs bin/kubectl-gantry as the hub's administrator, and says how it went.
func kubectlGantryResult(args ...string) (string, string, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", "", err
	}
	cmd := exec.Command(filepath.Join(root, "bin", "kubectl-gantry"), append([]string{"--kubeconfig", filepath.Join(tb.Dir, "hub.kubeconfig")}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	return string(out), stderr.String(), err
}

// checkGolden compares a table with testdata/NAME.golden, word by word and without its last column
// (the age). GANTRY_UPDATE_GOLDEN=1 rewrites the file.
func checkGolden(t *testing.T, name, table string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if os.Getenv("GANTRY_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if withoutAges(table) != withoutAges(string(want)) {
		t.Errorf("kubectl gantry %s:\n%s\nwant (%s, ages aside):\n%s", name, table, path, want)
	}
}

func withoutAges(table string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(table), "\n") {
		f := strings.Fields(l)
		lines = append(lines, strings.Join(f[:max(len(f)-1, 0)], " "))
	}
	return strings.Join(lines, "\n")
}

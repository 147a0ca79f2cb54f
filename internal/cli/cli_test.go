package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

func fleet() []client.Object {
	q := resource.MustParse
	return []client.Object{
		&gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{"region": "eu-west"}},
			Status: gantry.WorkerClusterStatus{
				Conditions: []metav1.Condition{
					{Type: gantry.ClusterConnected, Status: "True", Reason: "Connected"},
					{Type: gantry.ClusterAgentReady, Status: "True", Reason: "AgentReporting"}},
				Capacity: &gantry.CapacitySummary{GPUProducts: []gantry.GPUProductCapacity{
					{Product: "NVIDIA-A100-SXM4-80GB", Free: 24, Allocatable: 32}}}}},
		&gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "worker-2"},
			Spec: gantry.WorkerClusterSpec{Cordoned: true, Failover: gantry.Failover{Policy: gantry.FailoverFence}},
			Status: gantry.WorkerClusterStatus{Conditions: []metav1.Condition{
				{Type: gantry.ClusterConnected, Status: "False", Reason: gantry.ReasonUnauthorized}}}},
		&gantry.Queue{ObjectMeta: metav1.ObjectMeta{Name: "qa", Namespace: "team-a"}, Spec: gantry.QueueSpec{GlobalQueue: "gpus"}},
		job("a"), job("b"), job("c"),
		&gantry.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-a", Namespace: "team-a", CreationTimestamp: at(0),
			Labels: map[string]string{gantry.JobNameLabel: "a"}, OwnerReferences: []metav1.OwnerReference{jobOwner("a")}},
			Spec: gantry.WorkloadSpec{QueueName: "qa", PodSets: []gantry.PodSet{{Name: "main", Count: 1,
				Requests: corev1.ResourceList{gantry.GPUResource: q("8"), corev1.ResourceCPU: q("8")}}}},
			Status: gantry.WorkloadStatus{ClusterName: "worker-1", DispatchEpoch: 1, GlobalQueue: "gpus",
				NominatedClusters: []string{"worker-1"},
				Admission:         &gantry.Admission{PodSets: []gantry.PodSetAdmission{{Name: "main", GPUProduct: "NVIDIA-A100-SXM4-80GB"}}},
				Conditions: []metav1.Condition{
					{Type: gantry.WorkloadAdmitted, Status: "True", Reason: gantry.ReasonAdmittedByCluster, LastTransitionTime: at(1)},
					{Type: gantry.WorkloadJobCreated, Status: "True", Reason: gantry.ReasonJobCreated, LastTransitionTime: at(1)}}}},
		&gantry.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-b", Namespace: "team-a", CreationTimestamp: at(2),
			Labels: map[string]string{gantry.JobNameLabel: "b"}, OwnerReferences: []metav1.OwnerReference{jobOwner("b")}},
			Spec: gantry.WorkloadSpec{QueueName: "qa", PodSets: []gantry.PodSet{{Name: "main", Count: 4,
				Requests: corev1.ResourceList{gantry.GPUResource: q("8")}}}},
			Status: gantry.WorkloadStatus{Conditions: []metav1.Condition{{Type: gantry.WorkloadPending, Status: "True",
				Reason: gantry.ReasonWaitingForQuota, Message: "waiting for quota of GlobalQueue gpus", LastTransitionTime: at(3)}}}},
		&eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "c.1", Namespace: "team-a"}, Type: corev1.EventTypeWarning,
			Regarding: corev1.ObjectReference{Kind: "Job", Name: "c", Namespace: "team-a"}, Reason: "InvalidJob",
			Note: "gantry.dev/topology-key: not a label key", EventTime: metav1.NewMicroTime(at(4).Time)},
		&gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: "gpus"},
			Spec: gantry.GlobalQueueSpec{Clusters: []gantry.ClusterQuota{
				{Name: "worker-1", Quota: corev1.ResourceList{gantry.GPUResource: q("32"), corev1.ResourceCPU: q("256")}},
				{Name: "worker-2", Quota: corev1.ResourceList{gantry.GPUResource: q("16")}}}},
			Status: gantry.GlobalQueueStatus{PendingWorkloads: 2, AdmittedWorkloads: 1, Usage: []gantry.ClusterUsage{
				{Name: "worker-1", Admitted: corev1.ResourceList{gantry.GPUResource: q("8"), corev1.ResourceCPU: q("8")}}}}},
		&gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: "vision"},
			Spec: gantry.GlobalQueueSpec{Cohort: "research", FairSharing: gantry.FairSharing{Weight: ptr.To[int32](2)},
				Clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: corev1.ResourceList{gantry.GPUResource: q("16")}}}},
			Status: gantry.GlobalQueueStatus{AdmittedWorkloads: 3, Usage: []gantry.ClusterUsage{
				{Name: "worker-1", Admitted: corev1.ResourceList{gantry.GPUResource: q("24")}, Borrowed: corev1.ResourceList{gantry.GPUResource: q("8")}}}}},
	}
}

// start is when the fleet's first Workload was created; the commands count ages to an hour later.
var start = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func at(minutes int) metav1.Time {
	return metav1.NewTime(start.Add(time.Duration(minutes) * time.Minute))
}

func job(name string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID("uid-" + name),
		CreationTimestamp: at(0), Labels: map[string]string{gantry.QueueLabel: "qa"}},
		Status: batchv1.JobStatus{Active: 1, StartTime: ptr.To(at(1))}}
}

func jobOwner(name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}
}

// jobSets are a JobSet train running on worker-1 and its Workload, to add to the fleet.
func jobSets() []client.Object {
	q := resource.MustParse
	return []client.Object{jobSet("train"),
		&gantry.Workload{ObjectMeta: metav1.ObjectMeta{Name: "jobset-train", Namespace: "team-a", CreationTimestamp: at(5),
			Labels: map[string]string{gantry.JobNameLabel: "train"}, OwnerReferences: []metav1.OwnerReference{jobSetOwner("train")}},
			Spec: gantry.WorkloadSpec{JobKind: gantry.JobKindJobSet, QueueName: "qa", PodSets: []gantry.PodSet{
				{Name: "driver", Count: 1, Requests: corev1.ResourceList{corev1.ResourceCPU: q("1")}},
				{Name: "workers", Count: 2, Requests: corev1.ResourceList{gantry.GPUResource: q("8")}}}},
			Status: gantry.WorkloadStatus{ClusterName: "worker-1", DispatchEpoch: 1, GlobalQueue: "gpus", NominatedClusters: []string{"worker-1"},
				Conditions: []metav1.Condition{
					{Type: gantry.WorkloadAdmitted, Status: "True", Reason: gantry.ReasonAdmittedByCluster, LastTransitionTime: at(6)},
					{Type: gantry.WorkloadJobCreated, Status: "True", Reason: gantry.ReasonJobCreated, LastTransitionTime: at(6)}}}},
	}
}

// jobSet is a queued JobSet of team-a whose status came back from its worker: its driver and workers
// ready.
func jobSet(name string) *jobset.JobSet {
	return &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID("uid-jobset-" + name),
		CreationTimestamp: at(5), Labels: map[string]string{gantry.QueueLabel: "qa"}},
		Status: jobset.JobSetStatus{ReplicatedJobsStatus: []jobset.ReplicatedJobStatus{
			{Name: "driver", Active: 1, Ready: 1}, {Name: "workers", Active: 2, Ready: 2}}}}
}

func jobSetOwner(name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: name, UID: types.UID("uid-jobset-" + name), Controller: ptr.To(true)}
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runOn(fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(fleet()...).Build(), args...)
	if err != nil {
		t.Fatalf("kubectl gantry %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// runOn runs kubectl gantry with args against c.
func runOn(c client.WithWatch, args ...string) (string, error) {
	var out bytes.Buffer
	err := runIn(context.Background(), c, &out, args...)
	return out.String(), err
}

// runIn runs kubectl gantry with args against c until ctx ends, writing its output and errors to out.
func runIn(ctx context.Context, c client.WithWatch, out io.Writer, args ...string) error {
	o := NewOptions(genericiooptions.IOStreams{Out: out, ErrOut: out})
	o.NewClient = func() (client.WithWatch, error) { return c, nil }
	o.Now = func() time.Time { return start.Add(time.Hour) }
	cmd := NewRootCommand(o)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

// golden compares got with testdata/name.golden, or with -update writes it there.
func golden(t *testing.T, name, got string, args []string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("kubectl gantry %s:\n%s\nwant (%s):\n%s", strings.Join(args, " "), got, path, want)
	}
}

// Each command's output is its golden file's (go test ./internal/cli -update rewrites them).
func TestGoldenOutputs(t *testing.T) {
	for name, args := range map[string][]string{
		"clusters":               {"clusters"},
		"clusters-wide":          {"clusters", "-o", "wide"},
		"queues":                 {"queues"},
		"jobs":                   {"jobs", "-n", "team-a"},
		"workloads-all":          {"workloads", "-A", "-o", "wide"},
		"explain-a":              {"explain", "a", "-n", "team-a"},
		"explain-b":              {"explain", "b", "-n", "team-a"},
		"explain-c":              {"explain", "c", "-n", "team-a"},
		"explain-jobset":         {"explain", "jobset/train", "-n", "team-a"},
		"jobs-no-headers":        {"jobs", "-n", "team-a", "--no-headers"},
		"jobs-show-labels":       {"jobs", "-n", "team-a", "--show-labels"},
		"clusters-label-columns": {"clusters", "-L", "region"},
		"queues-sort-by":         {"queues", "--sort-by", ".status.pendingWorkloads"},
		"jobs-sort-by":           {"jobs", "-n", "team-a", "--sort-by={.status.startTime}"},
		"clusters-name":          {"clusters", "-o", "name"},
		"jobs-name":              {"jobs", "-n", "team-a", "-o", "name"},
		"queues-json":            {"queues", "-o", "json"},
		"workloads-yaml":         {"workloads", "-n", "team-a", "-l", gantry.JobNameLabel + "=b", "-o", "yaml"},
		"jobs-jsonpath":          {"jobs", "-n", "team-a", "-o", `jsonpath={range .items[*]}{.kind}/{.metadata.name} {.metadata.uid}{"\n"}{end}`},
		"clusters-custom-columns": {"clusters", "-o",
			"custom-columns=NAME:.metadata.name,CORDONED:.spec.cordoned,FAILOVER:.spec.failover.policy,REGION:.metadata.labels.region"},
		"queues-go-template": {"queues", "-o", `go-template={{range .items}}{{.metadata.name}}: {{.status.admittedWorkloads}} admitted{{"\n"}}{{end}}`},
		"explain-b-json":     {"explain", "b", "-n", "team-a", "-o", "json"},
		"explain-a-yaml":     {"explain", "a", "-n", "team-a", "-o", "yaml"},
		"explain-c-json":     {"explain", "c", "-n", "team-a", "-o", "json"},
		"explain-b-jsonpath": {"explain", "b", "-n", "team-a", "-o", `jsonpath={range .clusters[*]}{.name}: {.verdict}{"\n"}{end}`},
	} {
		out, err := runOn(fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(append(fleet(), jobSets()...)...).Build(), args...)
		if err != nil {
			t.Fatalf("kubectl gantry %s: %v", strings.Join(args, " "), err)
		}
		golden(t, name, out, args)
	}
}

func TestJSONAndYAMLAreTheObjects(t *testing.T) {
	if out := run(t, "clusters", "-o", "json"); !strings.Contains(out, `"kind": "WorkerClusterList"`) || !strings.Contains(out, `"name": "worker-2"`) {
		t.Errorf("clusters -o json:\n%s", out)
	}
	if out := run(t, "queues", "-o", "yaml"); !strings.Contains(out, "kind: GlobalQueueList") || !strings.Contains(out, "pendingWorkloads: 2") {
		t.Errorf("queues -o yaml:\n%s", out)
	}
}

// A bad flag or -o is refused as kubectl refuses it, before anything is asked of the hub.
func TestBadFlagsAreRefusedBeforeTheHubIsRead(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"clusters", "-o", "xml"}, `unable to match a printer suitable for the output format "xml", allowed formats are: ` +
			"custom-columns,custom-columns-file,go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,kyaml,name,template,templatefile,wide,yaml"},
		{[]string{"jobs", "-o", "jsonpath={.items[*"}, "error parsing jsonpath {.items[*"},
		{[]string{"queues", "-o", "custom-columns="}, "custom-columns format specified but no custom columns given"},
		{[]string{"queues", "-o", "jsonpath-file=/no/such/file"}, "error reading --template /no/such/file"},
		{[]string{"workloads", "-o", "go-template={{.items"}, "error parsing template {{.items"},
		{[]string{"jobs", "--sort-by", "{.metadata"}, `bad --sort-by "{.metadata"`},
		{[]string{"jobs", "-l", "team in (a"}, `bad --selector "team in (a"`},
		{[]string{"clusters", "--colour"}, "unknown flag: --colour"},
		{[]string{"queues", "-v"}, "flag needs an argument: 'v' in -v"},
		{[]string{"explain", "a", "-o", "wide"}, `unable to match a printer suitable for the output format "wide", allowed formats are: ` +
			"go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,kyaml,template,templatefile,yaml"},
		{[]string{"explain", "pods/a", "-o", "json"}, `"pods" is not a kind of job Gantry dispatches`},
		{[]string{"stop", "pods/a"}, `"pods" is not a kind of job Gantry dispatches`},
		{[]string{"stop", "Train_1"}, `"Train_1" is not the name of a job`},
		{[]string{"resume", "jobset/"}, `"jobset/": want NAME or KIND/NAME`},
		{[]string{"resume"}, "accepts 1 arg(s), received 0"},
		{[]string{"stop", "a", "b"}, "accepts 1 arg(s), received 2"},
		{[]string{"usage", "--since", "7x"}, `bad --since: "7x" is not a duration: want one such as 7d, 36h or 90m`},
		{[]string{"usage", "--since", "-3d"}, `bad --since: "-3d" is negative`},
		{[]string{"usage", "--by", "team"}, `bad --by "team": "team" is not a dimension: want some of namespace, queue, globalqueue, cluster, product`},
		{[]string{"usage", "--by", "queue,queue"}, `bad --by "queue,queue": queue is named twice`},
		{[]string{"usage", "-o", "wide"}, `bad --output "wide": want one of table, csv, json, yaml`},
		{[]string{"usage", "team-a"}, `unknown command "team-a" for "kubectl gantry usage"`},
	} {
		var out bytes.Buffer
		o := NewOptions(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
		o.NewClient = func() (client.WithWatch, error) {
			t.Errorf("kubectl gantry %s reached for the hub", strings.Join(tc.args, " "))
			return nil, errors.New("no hub here")
		}
		cmd := NewRootCommand(o)
		cmd.SetArgs(tc.args)
		if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("kubectl gantry %s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// cordon and uncordon set spec.cordoned; fence sets spec.fenced only with --confirm.
func TestCordonUncordonFence(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(fleet()...).Build()
	spec := func() gantry.WorkerClusterSpec {
		var wc gantry.WorkerCluster
		if err := c.Get(context.Background(), client.ObjectKey{Name: "worker-1"}, &wc); err != nil {
			t.Fatal(err)
		}
		return wc.Spec
	}
	if out, err := runOn(c, "cordon", "worker-1"); err != nil || out != "workercluster/worker-1 cordoned\n" || !spec().Cordoned {
		t.Errorf("cordon: %q %v %+v", out, err, spec())
	}
	if out, err := runOn(c, "uncordon", "worker-1"); err != nil || out != "workercluster/worker-1 uncordoned\n" || spec().Cordoned {
		t.Errorf("uncordon: %q %v %+v", out, err, spec())
	}
	if _, err := runOn(c, "fence", "worker-1"); err == nil || !strings.Contains(err.Error(), "--confirm") || spec().Fenced {
		t.Errorf("fence without --confirm: %v %+v", err, spec())
	}
	if _, err := runOn(c, "fence", "worker-1", "--confirm"); err != nil || !spec().Fenced {
		t.Errorf("fence --confirm: %v %+v", err, spec())
	}
	if _, err := runOn(c, "cordon", "worker-9"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("cordon of a cluster that does not exist: %v", err)
	}
}

// Shell completion: the completion command writes a script for the binary, and explain completes the
// namespace's job names (what kubectl_complete-gantry asks for when kubectl completes kubectl gantry).
func TestCompletion(t *testing.T) {
	if out := run(t, "completion", "bash"); !strings.Contains(out, "__kubectl-gantry_get_completion_results") {
		t.Errorf("completion bash does not name kubectl gantry:\n%.300s", out)
	}
	out := run(t, "__complete", "explain", "-n", "team-a", "")
	if !strings.HasPrefix(out, "a\nb\n:4\n") {
		t.Errorf("completing explain's argument: %q, want the jobs a and b, no file completion", out)
	}
}

// A job deleted and submitted again under its name while its earlier Workload is still there (held by
// an unreachable cluster) is told as such: the story shown is the earlier job's, and the new job's
// status is not read as the Workload's.
func TestExplainTellsAResubmittedJobFromTheEarlierOnesWorkload(t *testing.T) {
	objs := fleet()
	for i, o := range objs {
		if j, ok := o.(*batchv1.Job); ok && j.Name == "a" {
			again := job("a")
			again.UID, again.CreationTimestamp, again.Status = "uid-a-again", at(50), batchv1.JobStatus{}
			objs[i] = again
		}
	}
	out, err := runOn(fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).Build(), "explain", "a", "-n", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if want := "this is the story of an earlier Job of this name; the one on the hub now was submitted 10m ago"; !strings.Contains(out, want) {
		t.Errorf("explain a:\n%s\nwant it to say %q", out, want)
	}
	if strings.Contains(out, "  Job: ") {
		t.Errorf("explain a shows the new job's status as the earlier one's:\n%s", out)
	}
}

// -v is klog's verbosity, as kubectl's: -v=6 logs each request to the hub. The version is --version.
func TestVerbosityIsKlogsAndTheVersionIsLong(t *testing.T) {
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not now", http.StatusServiceUnavailable)
	}))
	defer hub.Close()
	var logged bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&logged)
	defer func() {
		var quiet klog.Level
		_ = quiet.Set("0")
		klog.LogToStderr(true)
	}()
	var out bytes.Buffer
	cmd := NewRootCommand(NewOptions(genericiooptions.IOStreams{Out: &out, ErrOut: &out}))
	cmd.SetArgs([]string{"queues", "-v=6", "--kubeconfig", kubeconfigFile(t, "    token: t"), "--server", hub.URL})
	if err := cmd.ExecuteContext(context.Background()); err == nil {
		t.Errorf("queues against a hub that answers 503: no error\n%s", out.String())
	}
	klog.Flush()
	if want := `"Response" verb="GET" url="` + hub.URL + `/api`; !strings.Contains(logged.String(), want) {
		t.Errorf("-v=6 logged:\n%s\nwant a line with %s", logged.String(), want)
	}
	if out := run(t, "--version"); !strings.HasPrefix(out, "kubectl gantry version ") {
		t.Errorf("--version: %q", out)
	}
}

// hold sets a GlobalQueue's spec.held, with --drain its drainWhileHeld too; unhold clears both.
func TestHoldUnhold(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(fleet()...).Build()
	var list gantry.GlobalQueueList
	if err := c.List(context.Background(), &list); err != nil || len(list.Items) == 0 {
		t.Fatalf("the fleet has no GlobalQueue: %v", err)
	}
	name := list.Items[0].Name
	spec := func() gantry.GlobalQueueSpec {
		var gq gantry.GlobalQueue
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &gq); err != nil {
			t.Fatal(err)
		}
		return gq.Spec
	}
	if out, err := runOn(c, "hold", name); err != nil || out != "globalqueue/"+name+" held\n" || !spec().Held || spec().DrainWhileHeld {
		t.Errorf("hold: %q %v %+v", out, err, spec())
	}
	if out, err := runOn(c, "hold", name, "--drain"); err != nil || out != "globalqueue/"+name+" held and drained\n" || !spec().DrainWhileHeld {
		t.Errorf("hold --drain: %q %v %+v", out, err, spec())
	}
	if out, err := runOn(c, "unhold", name); err != nil || out != "globalqueue/"+name+" no longer held\n" || spec().Held || spec().DrainWhileHeld {
		t.Errorf("unhold: %q %v %+v", out, err, spec())
	}
	if _, err := runOn(c, "hold", "no-such-queue"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("hold of a queue that does not exist: %v", err)
	}
}

// cordon completes WorkerCluster names, hold GlobalQueue names.
func TestNamesAreCompleted(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(fleet()...).Build()
	var wcs gantry.WorkerClusterList
	var gqs gantry.GlobalQueueList
	if err := c.List(context.Background(), &wcs); err != nil || len(wcs.Items) == 0 {
		t.Fatalf("the fleet's WorkerClusters: %v", err)
	}
	if err := c.List(context.Background(), &gqs); err != nil || len(gqs.Items) == 0 {
		t.Fatalf("the fleet's GlobalQueues: %v", err)
	}
	for verb, want := range map[string]string{"cordon": wcs.Items[0].Name, "hold": gqs.Items[0].Name} {
		out, err := runOn(c, "__complete", verb, "")
		if err != nil || !strings.Contains(out, want+"\n") {
			t.Errorf("%s completes %q (%v), want %s among them", verb, out, err, want)
		}
	}
}

// stop and resume, as a user runs them one after another: each output, or error, is the transcript's
// (testdata/stop.golden, resume.golden). stop sets the job's annotation gantry.dev/stopped, resume
// removes it; a finished job is not stopped, and what is already so is said, nothing changed.
func TestStopAndResume(t *testing.T) {
	done := job("done")
	done.Status = batchv1.JobStatus{Succeeded: 1, StartTime: ptr.To(at(1)), CompletionTime: ptr.To(at(9)),
		Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	plain := job("plain")
	plain.Labels = nil
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(append(append(fleet(), jobSets()...), done, plain)...).Build()
	transcript := func(runs ...[]string) string {
		var out strings.Builder
		for _, args := range runs {
			fmt.Fprintf(&out, "$ kubectl gantry %s\n", strings.Join(args, " "))
			got, err := runOn(c, args...)
			out.WriteString(got)
			if err != nil {
				fmt.Fprintf(&out, "error: %v\n", err)
			}
		}
		return out.String()
	}
	stopped := func(obj client.Object) bool {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		return obj.GetAnnotations()[gantry.StoppedAnnotation] == "true"
	}

	golden(t, "stop", transcript(
		[]string{"stop", "a", "-n", "team-a"},
		[]string{"stop", "a", "-n", "team-a"},
		[]string{"stop", "job/b", "-n", "team-a"},
		[]string{"stop", "jobset/train", "-n", "team-a"},
		[]string{"stop", "done", "-n", "team-a"},
		[]string{"stop", "plain", "-n", "team-a"},
		[]string{"stop", "train", "-n", "team-a"},
	), []string{"stop"})
	if !stopped(job("a")) || !stopped(job("b")) || !stopped(jobSet("train")) || stopped(job("done")) {
		t.Errorf("after stop: a %v, b %v, jobset train %v, done %v; want the first three stopped", stopped(job("a")), stopped(job("b")),
			stopped(jobSet("train")), stopped(job("done")))
	}
	golden(t, "resume", transcript(
		[]string{"resume", "a", "-n", "team-a"},
		[]string{"resume", "a", "-n", "team-a"},
		[]string{"resume", "jobsets.jobset.x-k8s.io/train", "-n", "team-a"},
		[]string{"resume", "c", "-n", "team-a"},
	), []string{"resume"})
	if stopped(job("a")) || !stopped(job("b")) || stopped(jobSet("train")) {
		t.Errorf("after resume: a %v, b %v, jobset train %v; want b alone stopped", stopped(job("a")), stopped(job("b")), stopped(jobSet("train")))
	}
}

// stop completes the namespace's jobs that are neither finished nor stopped, resume the stopped ones: a
// batch Job by its name, a job of another kind as KIND/NAME.
func TestStopAndResumeComplete(t *testing.T) {
	objs := append(fleet(), jobSets()...)
	for _, o := range objs {
		if wl, ok := o.(*gantry.Workload); ok && wl.Name == "job-b" {
			wl.Spec.Stopped = true
		}
	}
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).Build()
	for verb, want := range map[string]string{"stop": "a\njobset/train\n:4\n", "resume": "b\n:4\n"} {
		out, err := runOn(c, "__complete", verb, "-n", "team-a", "")
		if err != nil || !strings.HasPrefix(out, want) {
			t.Errorf("completing %s: %q (%v), want %q", verb, out, err, want)
		}
	}
}

package web

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/visibility"
	"github.com/gantry-dev/gantry/jobkind"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func fleet() []client.Object {
	q := resource.MustParse
	workload := func(ns, job string, cluster string) *gantry.Workload {
		wl := &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job-" + job, CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
			Labels: map[string]string{gantry.JobNameLabel: job}},
			Spec: gantry.WorkloadSpec{QueueName: "q", PodSets: []gantry.PodSet{{Name: "main", Count: 1,
				Requests: corev1.ResourceList{gantry.GPUResource: q("8")}}}}}
		if cluster != "" {
			wl.Status.ClusterName = cluster
			wl.Status.Conditions = []metav1.Condition{{Type: gantry.WorkloadJobCreated, Status: "True", Reason: gantry.ReasonJobCreated}}
		} else {
			wl.Status.Conditions = []metav1.Condition{{Type: gantry.WorkloadPending, Status: "True", Reason: gantry.ReasonWaitingForQuota,
				Message: "waiting for quota of GlobalQueue gpus"}}
		}
		return wl
	}
	return []client.Object{
		&gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}, Status: gantry.WorkerClusterStatus{
			Capacity: &gantry.CapacitySummary{GPUProducts: []gantry.GPUProductCapacity{{Product: "NVIDIA-A100-SXM4-80GB", Free: 24, Allocatable: 32}}}}},
		&gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: "gpus"}, Spec: gantry.GlobalQueueSpec{Clusters: []gantry.ClusterQuota{
			{Name: "worker-1", Quota: corev1.ResourceList{gantry.GPUResource: q("16")}}}},
			Status: gantry.GlobalQueueStatus{Usage: []gantry.ClusterUsage{{Name: "worker-1", Admitted: corev1.ResourceList{gantry.GPUResource: q("8")}}}}},
		&gantry.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "q"}, Spec: gantry.QueueSpec{GlobalQueue: "gpus"}},
		&gantry.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "q"}, Spec: gantry.QueueSpec{GlobalQueue: "gpus"}},
		workload("team-a", "train", "worker-1"), workload("team-a", "eval", ""), workload("team-b", "secret", ""),
	}
}

// server serves the page to a user who may do what allowed lists ("list jobs team-a", "list workerclusters").
func server(t *testing.T, allowed ...string) (*httptest.Server, *Changes) {
	t.Helper()
	return serverOf(t, fleet(), allowed...)
}

// serverOf serves the page of a hub holding objs.
func serverOf(t *testing.T, objs []client.Object, allowed ...string) (*httptest.Server, *Changes) {
	t.Helper()
	h := handlerOf(objs, allowed...)
	srv := httptest.NewServer(h.Routes())
	t.Cleanup(srv.Close)
	return srv, h.Changes
}

// handlerOf is the page of a hub holding objs, for a user who may do what allowed lists.
func handlerOf(objs []client.Object, allowed ...string) *Handler {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = gantry.AddToScheme(s)
	_ = jobkind.AddToScheme(s)
	return &Handler{
		Cache: fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build(),
		Table: tableOf(objs...),
		Allowed: func(_ context.Context, a authorizationv1.ResourceAttributes) (bool, error) {
			for _, rule := range allowed {
				if rule == strings.TrimSpace(a.Verb+" "+a.Resource+" "+a.Namespace) {
					return true, nil
				}
			}
			return false, nil
		},
		Changes: &Changes{}, Now: func() time.Time { return now },
	}
}

// tableOf is a table that took in the Workloads and Queues of objs, as its informers would give them.
func tableOf(objs ...client.Object) *Table {
	clock := func() time.Time { return now }
	positions := visibility.NewIndex(clock)
	table := NewTable(positions, clock)
	for _, o := range objs {
		switch o.(type) {
		case *gantry.Workload:
			positions.SetWorkload(o, false)
			table.SetWorkload(o, false)
		case *gantry.Queue:
			positions.SetQueue(o, false)
			table.touch()
		}
	}
	return table
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestTheOverviewShowsWhatTheReaderMaySee(t *testing.T) {
	admin, _ := server(t, "list workerclusters", "list globalqueues", "list jobs")
	code, body := get(t, admin.URL+"/")
	for _, want := range []string{"<!DOCTYPE html>", `data-name="worker-1"`, "NVIDIA-A100-SXM4-80GB", "24 free of 32",
		`<meter min="0" max="16" value="8">`, `data-name="team-a/train"`, `data-name="team-b/secret"`, "WaitingForQuota", "1/2"} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("admin's overview (%d) has no %q:\n%s", code, want, body)
		}
	}
	tenant, _ := server(t, "list jobs team-a")
	_, body = get(t, tenant.URL+"/")
	for _, want := range []string{"You may not list WorkerClusters", "You may not list GlobalQueues", `data-name="team-a/eval"`,
		"1 namespace(s) have jobs you may not list"} {
		if !strings.Contains(body, want) {
			t.Errorf("tenant's overview has no %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "secret") || strings.Contains(body, `data-name="worker-1"`) {
		t.Errorf("tenant's overview shows another tenant's job or the clusters:\n%s", body)
	}
	if _, fragment := get(t, tenant.URL+"/fragment/"); !strings.HasPrefix(fragment, `<main id="main">`) {
		t.Errorf("the overview's part is not its main element:\n%.200s", fragment)
	}
}

func TestAJobPageTellsItsStoryToThoseWhoMayGetTheJob(t *testing.T) {
	tenant, _ := server(t, "get jobs team-a")
	code, body := get(t, tenant.URL+"/jobs/team-a/eval")
	if code != http.StatusOK || !strings.Contains(body, "State: Pending (WaitingForQuota)") || !strings.Contains(body, "Position 1 of 2") {
		t.Errorf("own job page (%d):\n%s", code, body)
	}
	if code, body := get(t, tenant.URL+"/jobs/team-b/secret"); code != http.StatusForbidden || strings.Contains(body, "WaitingForQuota") {
		t.Errorf("another tenant's job page: %d\n%s", code, body)
	}
	if code, _ := get(t, tenant.URL+"/jobs/team-a/nope"); code != http.StatusNotFound {
		t.Errorf("a job that does not exist: %d, want 404", code)
	}
}

// A JobSet is shown, and its page served, to whoever may list and get JobSets, with or without the
// right to Jobs; its page is the JobSet's, whose own name a Job may have too.
func TestJobsOfEveryKindAreShownToThoseWhoMayReadTheirKind(t *testing.T) {
	dist := &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "jobset-train", CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
		Labels: map[string]string{gantry.JobNameLabel: "train"}, OwnerReferences: []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2",
			Kind: "JobSet", Name: "train", UID: "uid-js", Controller: ptr.To(true)}}},
		Spec: gantry.WorkloadSpec{JobKind: gantry.JobKindJobSet, QueueName: "q", PodSets: []gantry.PodSet{{Name: "driver", Count: 1}, {Name: "workers", Count: 2}}},
		Status: gantry.WorkloadStatus{ClusterName: "worker-1", Conditions: []metav1.Condition{
			{Type: gantry.WorkloadJobCreated, Status: "True", Reason: gantry.ReasonJobCreated}}}}
	js := func(name string) *jobset.JobSet {
		return &jobset.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: "uid-js",
			Labels: map[string]string{gantry.QueueLabel: "q"}, CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))}}
	}
	srv, _ := serverOf(t, append(fleet(), dist, js("train"), js("fresh")), "list jobsets team-a", "get jobsets team-a")
	_, body := get(t, srv.URL+"/")
	for _, want := range []string{`data-name="team-a/train" data-kind="JobSet"`, `href="/jobs/team-a/jobset/train"`, "<td>JobSet</td>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview has no %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, `data-kind="Job"`) || strings.Contains(body, "team-a/eval") {
		t.Errorf("the overview shows Jobs to a user who may list JobSets only:\n%s", body)
	}
	for path, want := range map[string]struct {
		code int
		text string
	}{
		"/jobs/team-a/jobset/train":                  {http.StatusOK, "JobSet team-a/train (Workload jobset-train)"},
		"/jobs/team-a/jobsets.jobset.x-k8s.io/train": {http.StatusOK, "State: Running on worker-1"},
		"/fragment/jobs/team-a/jobset/train":         {http.StatusOK, `<main id="main">`},
		"/jobs/team-a/jobset/fresh":                  {http.StatusOK, "JobSet team-a/fresh has no Workload on the hub."},
		"/jobs/team-a/train":                         {http.StatusForbidden, "you may not get jobs.batch in namespace team-a"},
		"/jobs/team-a/job/eval":                      {http.StatusForbidden, "you may not get jobs.batch in namespace team-a"},
		"/jobs/team-a/jobset/nope":                   {http.StatusNotFound, "no JobSet nope in namespace team-a"},
		"/jobs/team-a/pod/train":                     {http.StatusNotFound, `"pod" is not a kind of job`},
	} {
		if code, body := get(t, srv.URL+path); code != want.code || !strings.Contains(body, want.text) {
			t.Errorf("%s: %d, want %d with %q:\n%s", path, code, want.code, want.text, body)
		}
	}
	// A reader of Jobs only sees the Jobs; the JobSet's namespace counts as one with jobs hidden.
	jobsOnly, _ := serverOf(t, append(fleet(), dist, js("train")), "list jobs team-a")
	if _, body := get(t, jobsOnly.URL+"/"); strings.Contains(body, "JobSet") || !strings.Contains(body, `href="/jobs/team-a/job/eval"`) ||
		!strings.Contains(body, "2 namespace(s) have jobs you may not list") {
		t.Errorf("the overview of a reader of Jobs only:\n%s", body)
	}
}

func TestEventsSayWhenTheCachesChange(t *testing.T) {
	srv, changes := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() || lines.Text() != ": connected" {
		t.Fatalf("first line %q", lines.Text())
	}
	changes.Notify()
	for lines.Scan() {
		if lines.Text() == "event: change" {
			return
		}
	}
	t.Fatalf("no change event after a change: %v", lines.Err())
}

func TestSubscribersAreBounded(t *testing.T) {
	var c Changes
	for i := 0; i < MaxSubscribers; i++ {
		if _, _, ok := c.Subscribe(); !ok {
			t.Fatalf("subscriber %d refused", i)
		}
	}
	if _, _, ok := c.Subscribe(); ok {
		t.Errorf("subscriber %d accepted, want at most %d", MaxSubscribers+1, MaxSubscribers)
	}
}

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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
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
				Message: "waiting for quota of GlobalQueue gpus on 1 cluster(s)"}}
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
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = gantry.AddToScheme(s)
	changes := &Changes{}
	h := &Handler{
		Cache: fake.NewClientBuilder().WithScheme(s).WithObjects(fleet()...).Build(),
		Allowed: func(_ context.Context, a authorizationv1.ResourceAttributes) (bool, error) {
			for _, rule := range allowed {
				if rule == strings.TrimSpace(a.Verb+" "+a.Resource+" "+a.Namespace) {
					return true, nil
				}
			}
			return false, nil
		},
		Changes: changes, Now: func() time.Time { return now },
	}
	srv := httptest.NewServer(h.Routes())
	t.Cleanup(srv.Close)
	return srv, changes
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
		"1 more namespace(s) have jobs you may not list"} {
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

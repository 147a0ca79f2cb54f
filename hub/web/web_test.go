package web

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
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

// usageFleet is fleet() with GPU time: team-a's Usage counts 10 GPU-hours on worker-2 within the last 7
// days and 100 before them, team-b's 2 within them, and team-a/train runs on worker-1 with 8 GPUs since
// an hour ago. worker-1 prices an A100 hour at perHour when that is not empty.
func usageFleet(perHour gantry.Amount) []client.Object {
	const product = "NVIDIA-A100-SXM4-80GB"
	objs := fleet()
	for _, o := range objs {
		switch o := o.(type) {
		case *gantry.WorkerCluster:
			if perHour != "" {
				o.Spec.Price = &gantry.ClusterPrice{GPU: []gantry.GPUPrice{{Product: product, PerHour: perHour}}}
			}
		case *gantry.Workload:
			if o.Name == "job-train" {
				o.UID = "uid-train"
				o.Status.Runs = []gantry.Run{{Cluster: "worker-1", Epoch: 1, GlobalQueue: "gpus", GPUs: 8, GPUProduct: product,
					Started: metav1.NewTime(now.Add(-time.Hour))}}
			}
		}
	}
	usage := func(ns string, days ...gantry.DayUsage) *gantry.Usage {
		return &gantry.Usage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gantry.UsageName}, Status: gantry.UsageStatus{Days: days}}
	}
	day := func(day, cluster string, gpuSeconds, borrowed, lost int64) gantry.DayUsage {
		return gantry.DayUsage{Day: day, Entries: []gantry.UsageEntry{{Queue: "q", GlobalQueue: "gpus", Cluster: cluster, GPUProduct: product,
			GPUSeconds: gpuSeconds, BorrowedGPUSeconds: borrowed, LostGPUSeconds: lost}}}
	}
	return append(objs,
		usage("team-a", day("2026-04-20", "worker-2", 360_000, 0, 0), day("2026-04-28", "worker-2", 36_000, 3600, 1800)),
		usage("team-b", day("2026-04-30", "worker-1", 7200, 0, 0)))
}

// Rows of the overview's GPU-hours, as the page writes them.
const (
	usageA2     = `<tr class="usage" data-namespace="team-a"><td>team-a</td><td>q</td><td>gpus</td><td>worker-2</td><td>NVIDIA-A100-SXM4-80GB</td><td class="num">10.00</td><td class="num">1.00</td><td class="num">0.50</td>`
	usageA1     = `<tr class="usage" data-namespace="team-a"><td>team-a</td><td>q</td><td>gpus</td><td>worker-1</td><td>NVIDIA-A100-SXM4-80GB</td><td class="num">8.00</td><td class="num">0.00</td><td class="num">0.00</td>`
	usageB1     = `<tr class="usage" data-namespace="team-b"><td>team-b</td><td>q</td><td>gpus</td><td>worker-1</td><td>NVIDIA-A100-SXM4-80GB</td><td class="num">2.00</td>`
	usageHeader = `<h2>GPU-hours, last 7 days</h2>`
)

// serve answers a request for path, with If-None-Match etag when not empty.
func serve(h *Handler, path, etag string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	answer := httptest.NewRecorder()
	h.Routes().ServeHTTP(answer, req)
	return answer
}

// usageSection is the overview's GPU-hours section, empty when it has none.
func usageSection(body string) string {
	start := strings.Index(body, `<section id="usage">`)
	if start < 0 {
		return ""
	}
	return body[start : start+strings.Index(body[start:], "</section>")]
}

// A reader sees the GPU-hours of the namespaces where they may list Usages, asked once for every
// namespace and then of each namespace with GPU time, and no section where they may list none.
func TestTheOverviewShowsTheGPUHoursOfTheNamespacesTheReaderMayList(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fleet     []client.Object
		allowed   []string
		want, not []string
		asked     []string
	}{
		{name: "a tenant of team-a", allowed: []string{"list usages team-a", "list jobs team-a"},
			want: []string{usageHeader, "Since 2026-04-24 (UTC)", usageA1, usageA2,
				`<tr class="total"><td>TOTAL</td><td></td><td></td><td></td><td></td><td class="num">18.00</td><td class="num">1.00</td><td class="num">0.50</td></tr>`},
			not:   []string{"team-b", "110.00", "Cost"},
			asked: []string{"", "team-a", "team-b"}},
		{name: "an admin", allowed: []string{"list usages"},
			want: []string{usageA1, usageA2, usageB1, `<td class="num">20.00</td>`}, not: []string{"Cost"},
			asked: []string{""}},
		{name: "a tenant of a namespace without GPU time", allowed: []string{"list usages team-c", "list jobs", "list workerclusters"},
			not: []string{usageHeader, `id="usage"`}, asked: []string{"", "team-a", "team-b"}},
		{name: "an admin of a fleet that used no GPU time", fleet: fleet(), allowed: []string{"list usages"},
			want: []string{usageHeader, "No GPU time was used in the namespaces you may see."}, not: []string{"TOTAL"}, asked: []string{""}},
	} {
		if tc.fleet == nil {
			tc.fleet = usageFleet("")
		}
		h := handlerOf(tc.fleet, tc.allowed...)
		var asked []string
		allowed := h.Allowed
		h.Allowed = func(ctx context.Context, a authorizationv1.ResourceAttributes) (bool, error) {
			if a.Resource == "usages" {
				if a.Verb != "list" || a.Group != gantry.GroupVersion.Group {
					t.Errorf("%s: asked %+v", tc.name, a)
				}
				asked = append(asked, a.Namespace)
			}
			return allowed(ctx, a)
		}
		answer := serve(h, "/", "")
		body := answer.Body.String()
		if answer.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.name, answer.Code, body)
		}
		section := usageSection(body)
		for _, want := range tc.want {
			if !strings.Contains(section, want) {
				t.Errorf("%s: the GPU-hours have no %q:\n%s", tc.name, want, section)
			}
		}
		for _, not := range tc.not {
			if strings.Contains(section, not) || (strings.HasPrefix(not, "<") && strings.Contains(body, not)) {
				t.Errorf("%s: the overview shows %q:\n%s", tc.name, not, body)
			}
		}
		if !slices.Equal(asked, tc.asked) {
			t.Errorf("%s: asked about the Usages of %q, want %q", tc.name, asked, tc.asked)
		}
	}
}

// The cost columns show where a cluster prices what ran: the running job's 8 GPU-hours at 2.5 an hour.
func TestTheGPUHoursAreCostedWherePriced(t *testing.T) {
	section := usageSection(serve(handlerOf(usageFleet("2.5"), "list usages"), "/", "").Body.String())
	for _, want := range []string{`<th class="num">Cost</th><th class="num">Lost cost</th>`,
		usageA1 + `<td class="num">20</td><td class="num">0</td></tr>`, usageA2 + `<td class="num">-</td><td class="num">-</td></tr>`,
		`<td class="num">20.00</td><td class="num">1.00</td><td class="num">0.50</td><td class="num">20</td><td class="num">0</td></tr>`} {
		if !strings.Contains(section, want) {
			t.Errorf("the priced GPU-hours have no %q:\n%s", want, section)
		}
	}
	if unpriced := usageSection(serve(handlerOf(usageFleet(""), "list usages"), "/", "").Body.String()); unpriced == "" ||
		strings.Contains(unpriced, "Cost") || !strings.Contains(unpriced, usageA1+"</tr>") {
		t.Errorf("the unpriced GPU-hours:\n%s", unpriced)
	}
}

// A running job's GPU-hours grow with the time, and the overview's part then has another tag: a live
// page that sends back the old one is sent the new GPU-hours.
func TestARunningJobsGPUHoursGrowWithTheTime(t *testing.T) {
	h := handlerOf(usageFleet(""), "list usages")
	first := serve(h, "/fragment/", "")
	etag := first.Header().Get("ETag")
	if !strings.Contains(first.Body.String(), usageA1) || etag == "" {
		t.Fatalf("the GPU-hours at first (tag %s):\n%s", etag, usageSection(first.Body.String()))
	}
	if again := serve(h, "/fragment/", etag); again.Code != http.StatusNotModified {
		t.Errorf("the same GPU-hours: %d, want 304", again.Code)
	}
	h.Now = func() time.Time { return now.Add(30 * time.Minute) }
	later := serve(h, "/fragment/", etag)
	want := strings.Replace(usageA1, "8.00", "12.00", 1)
	if later.Code != http.StatusOK || later.Header().Get("ETag") == etag || !strings.Contains(later.Body.String(), want) {
		t.Errorf("half an hour later (%d, tag %s after %s), want %q:\n%s", later.Code, later.Header().Get("ETag"), etag, want,
			usageSection(later.Body.String()))
	}
}

// The table keeps the Workloads that ran, as the cache has them now, and forgets one deleted or whose
// runs are gone.
func TestTheTableKeepsTheWorkloadsThatRan(t *testing.T) {
	table := tableOf(usageFleet("")...)
	ran := func() []string {
		var out []string
		for _, ns := range table.ranNamespaces() {
			for _, wl := range table.ranIn(ns) {
				out = append(out, wl.Namespace+"/"+wl.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	if got := ran(); !slices.Equal(got, []string{"team-a/job-train"}) {
		t.Fatalf("ran: %q, want team-a/job-train", got)
	}
	evalRan := workloadIn("team-b", "eval", "q", time.Hour, "worker-1", 0)
	evalRan.Status.Runs = []gantry.Run{{Cluster: "worker-1", Epoch: 1, GPUs: 1, Started: metav1.NewTime(now.Add(-time.Hour))}}
	table.SetWorkload(evalRan, false)
	if got := ran(); !slices.Equal(got, []string{"team-a/job-train", "team-b/job-eval"}) {
		t.Errorf("after team-b/job-eval ran: %q", got)
	}
	table.SetWorkload(toolscache.DeletedFinalStateUnknown{Key: "team-b/job-eval", Obj: evalRan}, false)
	for _, o := range usageFleet("") {
		if wl, ok := o.(*gantry.Workload); ok && wl.Name == "job-train" {
			wl.Status.Runs = nil
			table.SetWorkload(wl, false)
		}
	}
	if got, namespaces := ran(), table.ranNamespaces(); len(got) != 0 || len(namespaces) != 0 {
		t.Errorf("after one was deleted and the other lost its runs: %q in %q", got, namespaces)
	}
}

// Package page drives the hub's page in headless Chromium over a queue 100,000 deep: a real
// kube-apiserver holds the Workloads, the hub's cache follows them, and the page is served by the hub's
// endpoint with its token login and access reviews, as gantry-hub wires them.
package page

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/endpoint"
	"github.com/gantry-dev/gantry/hub/visibility"
	"github.com/gantry-dev/gantry/hub/web"
	"github.com/gantry-dev/gantry/internal/hubtest"
	"github.com/gantry-dev/gantry/test/browser"
)

const (
	depth      = 100_000
	namespaces = 100
	running    = 20
	finished   = 20
	// tenantNamespace is the tenant's; the finished jobs are all in it.
	tenantNamespace = "team-07"
	churn           = 500
)

// tenantJobs are the unfinished jobs of tenantNamespace: its share of what waits, and one running.
const tenantJobs = depth/namespaces + 1

// TestThePageStaysResponsiveOverADeepQueue opens the page over 100,000 waiting jobs (and some running
// and finished) as an operator: the first render shows one page of 50 in queue order with the count of
// all, filters and pages are cut on the hub, and while jobs come and go the open page is redrawn with a
// few kilobytes per change. A tenant sees its own namespace's jobs and no other namespace's name. The
// times and bytes are logged, not asserted: they depend on the machine.
func TestThePageStaysResponsiveOverADeepQueue(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	cfg := startAPIServer(t)
	c, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	seed(t, c)
	endpointURL := servePage(t, cfg)
	operator := token(t, cfg, c, "", "operator",
		rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{gantry.GroupVersion.Group}, Resources: []string{"workerclusters", "globalqueues"}, Verbs: []string{"list"}})
	tenant := token(t, cfg, c, tenantNamespace, "tenant", rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list"}})

	ctx := browser.Start(t, 5*time.Minute)
	browser.Login(t, ctx, endpointURL, operator)
	firstRender(t, ctx, endpointURL)
	if n := rows(t, ctx); n != web.PageSize {
		t.Errorf("the first page shows %d jobs, want %d", n, web.PageSize)
	}
	wantText(t, ctx, "#count", fmt.Sprintf("Jobs 1–50 of %d", depth+running))
	wantText(t, ctx, fmt.Sprintf("#jobs tbody tr:nth-child(%d)", web.PageSize+1), "") // no such row: one page is sent
	// What runs comes first, then what waits in position order.
	wantText(t, ctx, fmt.Sprintf("#jobs tbody tr:nth-child(%d)", running+1), fmt.Sprintf("1/%d", depth))
	browser.Screenshot(t, ctx, "deep-queue")

	pick(t, ctx, "namespace", tenantNamespace)
	wantText(t, ctx, "#count", fmt.Sprintf("of %d", tenantJobs))
	pick(t, ctx, "sort", web.SortNewest)
	follow(t, ctx, `a[rel="next"]`)
	wantText(t, ctx, "#pages", "Page 2 of")
	browser.Screenshot(t, ctx, "one-namespace-page-2")
	pick(t, ctx, "state", "Finished")
	wantText(t, ctx, "#count", fmt.Sprintf("of %d", finished/2)) // the other half finished two days ago

	navigate(t, ctx, endpointURL+"/")
	updates := churnWhileOpen(t, ctx, c)
	logUpdates(t, updates)
	if n := rows(t, ctx); n != web.PageSize {
		t.Errorf("after the churn the page shows %d jobs, want %d", n, web.PageSize)
	}
	wantText(t, ctx, "#count", fmt.Sprintf("of %d", depth+running)) // as many came as went

	tenantView(t, endpointURL, tenant)
}

// firstRender loads the overview anew and logs how long it took to show and what it cost.
func firstRender(t *testing.T, ctx context.Context, endpointURL string) {
	t.Helper()
	navigate(t, ctx, endpointURL+"/")
	// The paint is awaited: its entry may come after the load the navigation waited for.
	timing, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](`new Promise(done => {
		const n = performance.getEntriesByType("navigation")[0];
		const report = paint => done({response: n.responseEnd - n.startTime, loaded: n.domContentLoadedEventEnd - n.startTime,
			paint: paint, bytes: n.encodedBodySize, decoded: n.decodedBodySize});
		setTimeout(() => report(-1), 5000);
		new PerformanceObserver(list => {
			const p = list.getEntries().find(e => e.name === "first-contentful-paint");
			if (p) report(p.startTime);
		}).observe({type: "paint", buffered: true});
	})`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first render over %d waiting: response %.0f ms, DOM loaded %.0f ms, first contentful paint %.0f ms, %.0f bytes sent (%.0f unpacked)",
		depth, timing["response"], timing["loaded"], timing["paint"], timing["bytes"], timing["decoded"])
}

// update is one refresh of the open page's main part, as the browser's resource timing saw it.
type update struct {
	Status   float64 `json:"status"`
	Bytes    float64 `json:"bytes"`
	Duration float64 `json:"duration"`
}

// churnWhileOpen deletes the churn jobs at the head of every namespace's queue and creates as many new
// ones while the overview is open, waits for the page to show it, and returns the page's refreshes.
func churnWhileOpen(t *testing.T, ctx context.Context, c client.Client) []update {
	t.Helper()
	start := time.Now()
	parallel(t, churn, func(i int) error {
		ns := fmt.Sprintf("team-%02d", i%namespaces)
		old := &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("wait-%06d", i)}}
		if err := c.Delete(context.Background(), old); err != nil {
			return err
		}
		return c.Create(context.Background(), waiting(ns, fmt.Sprintf("late-%06d", i)))
	})
	t.Logf("%d jobs went and %d came in %s", churn, churn, time.Since(start).Round(time.Millisecond))
	// The page's first row waits first; the jobs that went were first in their namespaces.
	first := fmt.Sprintf(`tr[data-name="team-%02d/wait-%06d"]`, churn%namespaces, churn)
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(wait, chromedp.WaitVisible(first)); err != nil {
		t.Fatalf("the open page did not show the new head of the queue (%s): %v", first, err)
	}
	t.Logf("the open page showed the new head of the queue %s after the first change", time.Since(start).Round(10*time.Millisecond))
	time.Sleep(2 * web.RefreshInterval) // the last refreshes land
	updates, err := chromedp.Run(ctx, chromedp.Evaluate[[]update](`performance.getEntriesByType("resource")
		.filter(e => e.name.includes("/fragment"))
		.map(e => ({status: e.responseStatus, bytes: e.encodedBodySize, duration: e.duration}))`))
	if err != nil {
		t.Fatal(err)
	}
	return updates
}

func logUpdates(t *testing.T, updates []update) {
	t.Helper()
	if len(updates) == 0 {
		t.Fatal("the open page was never refreshed while jobs came and went")
	}
	var bytes, slowest float64
	unchanged := 0
	for _, u := range updates {
		bytes += u.Bytes
		slowest = max(slowest, u.Duration)
		if u.Status == 304 {
			unchanged++
		}
	}
	t.Logf("%d refreshes of the open page (%d unchanged, 304): %.0f bytes of body per refresh on average, slowest %.0f ms",
		len(updates), unchanged, bytes/float64(len(updates)), slowest)
}

// tenantView: a tenant of team-07 sees its namespace's jobs only, and is offered no other namespace.
func tenantView(t *testing.T, endpointURL, token string) {
	t.Helper()
	ctx := browser.Start(t, 2*time.Minute)
	browser.Login(t, ctx, endpointURL, token)
	wantText(t, ctx, "#count", fmt.Sprintf("of %d", tenantJobs))
	options, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('select[name="namespace"] option')].map(o => o.value)`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(options, ",") != ","+tenantNamespace {
		t.Errorf("the tenant is offered the namespaces %q, want only team-07", options)
	}
	wantText(t, ctx, "#jobs", "namespace(s) have jobs you may not list")
	browser.Screenshot(t, ctx, "tenant")
}

func rows(t *testing.T, ctx context.Context) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#jobs tbody tr.job").length`))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantText waits until the element's text holds want; an empty want asks that no element matches.
func wantText(t *testing.T, ctx context.Context, selector, want string) {
	t.Helper()
	var text string
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.innerText : null; })()`, selector)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[*string](js))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case want == "" && got == nil:
			return
		case got != nil && want != "" && strings.Contains(*got, want):
			return
		case got != nil:
			text = *got
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s of the page says %q, want %q", selector, text, want)
}

// pick chooses a value in one of the page's filters, as a person would.
func pick(t *testing.T, ctx context.Context, param, value string) {
	t.Helper()
	sel := fmt.Sprintf(`select[name=%q]`, param)
	js := fmt.Sprintf(`(() => { const s = document.querySelector(%q); s.value = %q; s.dispatchEvent(new Event("change", {bubbles: true})); return s.value; })()`, sel, value)
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js)); err != nil || got != value {
		t.Fatalf("picking %s=%s: %q, %v", param, value, got, err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`body[data-live="true"]`), chromedp.WaitVisible(sel)); err != nil {
		t.Fatal(err)
	}
	wantURL(t, ctx, param+"="+value)
}

func follow(t *testing.T, ctx context.Context, selector string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(selector)); err != nil {
		t.Fatalf("following %s: %v", selector, err)
	}
	wantURL(t, ctx, "page=")
}

func navigate(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(`body[data-live="true"]`)); err != nil {
		t.Fatal(err)
	}
}

func wantURL(t *testing.T, ctx context.Context, part string) {
	t.Helper()
	var url string
	for range 100 {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
		if err != nil {
			t.Fatal(err)
		}
		if url = got; strings.Contains(url, part) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the page is at %s, want %s in it", url, part)
}

func scheme() *apiruntime.Scheme {
	s := apiruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = gantry.AddToScheme(s)
	return s
}

// startAPIServer starts a kube-apiserver and etcd (KUBEBUILDER_ASSETS) with Gantry's CRDs.
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(filepath.Dir(file), "..", "..", "deploy", "crd")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("starting the API server (KUBEBUILDER_ASSETS=%s): %v", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	cfg.QPS, cfg.Burst = -1, 0 // the seeding writes as fast as the API server takes them
	return cfg
}

// seed makes the fleet: namespaces team-00..team-99 with a Queue of GlobalQueue gpus each, two worker
// clusters, depth waiting Workloads spread over the namespaces, running ones on the clusters and
// finished ones (half within the last day).
func seed(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	objs := []client.Object{hubtest.MakeGlobalQueue("gpus").SelectAll().Cluster("worker-1", "nvidia.com/gpu", "64").Cluster("worker-2", "nvidia.com/gpu", "64").Obj(),
		hubtest.MakeWorkerCluster("worker-1").KubeconfigSecret("worker-1").Obj(), hubtest.MakeWorkerCluster("worker-2").KubeconfigSecret("worker-2").Obj()}
	for i := range namespaces {
		ns := fmt.Sprintf("team-%02d", i)
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, hubtest.MakeQueue("q", ns).GlobalQueue("gpus").Obj())
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	parallel(t, depth, func(i int) error {
		return c.Create(ctx, waiting(fmt.Sprintf("team-%02d", i%namespaces), fmt.Sprintf("wait-%06d", i)))
	})
	parallel(t, running+finished, func(i int) error {
		ns := fmt.Sprintf("team-%02d", i%namespaces)
		if i >= running {
			ns = tenantNamespace
		}
		wl := waiting(ns, fmt.Sprintf("ran-%03d", i))
		if err := c.Create(ctx, wl); err != nil {
			return err
		}
		w := hubtest.MakeWorkload(wl.Name, wl.Namespace).Now(time.Now()).Nominated("gpus", 1, "worker-1", "worker-2").
			AdmittedOn(fmt.Sprintf("worker-%d", i%2+1)).JobCreated()
		if i >= running {
			ago := time.Duration(i%2) * 48 * time.Hour // every other one finished two days ago: no longer shown
			w = w.Now(time.Now().Add(-ago)).Condition(gantry.WorkloadFinished, metav1.ConditionTrue, "Succeeded", "")
		}
		wl.Status = w.Obj().Status
		return c.Status().Update(ctx, wl)
	})
	t.Logf("%d Workloads created in %s", depth+running+finished, time.Since(start).Round(time.Second))
}

// waiting is a Workload of one pod that waits in Queue q. The API server stamps its creation to the
// second: within one, the dispatcher's order is by namespace and name.
func waiting(ns, name string) *gantry.Workload {
	return &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{gantry.JobNameLabel: name}},
		Spec: gantry.WorkloadSpec{QueueName: "q", PodSets: []gantry.PodSet{{Name: "main", Count: 1}}}}
}

// parallel runs do(0..n-1) on as many goroutines as the API server keeps busy, and fails on the first error.
func parallel(t *testing.T, n int, do func(i int) error) {
	t.Helper()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n && failed.Load() == nil; i = int(next.Add(1) - 1) {
				if err := do(i); err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
}

// servePage follows the API server with a cache as the hub does and serves the endpoint with the page,
// the visibility API and the token login, wired as gantry-hub wires them.
func servePage(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hubCache, err := cache.New(cfg, cache.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	positions := visibility.NewIndex(time.Now)
	table := web.NewTable(positions, time.Now)
	changes := &web.Changes{}
	if err := positions.Follow(ctx, hubCache); err != nil {
		t.Fatal(err)
	}
	if err := table.Follow(ctx, hubCache); err != nil {
		t.Fatal(err)
	}
	if err := web.Watch(ctx, hubCache, changes, &gantry.WorkerCluster{}, &gantry.GlobalQueue{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = hubCache.Start(ctx) }()
	synced := time.Now()
	if !hubCache.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	t.Logf("the hub's cache synced over %d Workloads in %s", depth+running+finished, time.Since(synced).Round(time.Millisecond))
	go func() { _ = table.Run(ctx, changes) }()
	clients := kubernetes.NewForConfigOrDie(cfg)
	allowed := endpoint.Authorizer(clients.AuthorizationV1().SubjectAccessReviews())
	reader, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	page := &web.Handler{Cache: hubCache, Table: table, Allowed: allowed, Changes: changes, Now: time.Now}
	srv := httptest.NewServer(endpoint.NewHandler(endpoint.Config{Reviews: clients.AuthenticationV1().TokenReviews(),
		Logs: &endpoint.Logs{Hub: reader, Allowed: allowed}, Page: page.Routes(),
		Visibility: &visibility.Handler{Index: positions, Allowed: allowed}}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// token makes a ServiceAccount holding the rules (in ns, or everywhere when ns is empty, the account
// then living in team-00) and returns a token of it.
func token(t *testing.T, cfg *rest.Config, c client.Client, ns, name string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	home := ns
	if home == "" {
		home = "team-00"
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: home, Name: name}}
	objs := []client.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: name}}}
	if ns == "" {
		objs = append(objs, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}})
	} else {
		objs = append(objs, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ServiceAccounts(home).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

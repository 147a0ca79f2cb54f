package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/browser"
)

// TestTheHubPageShowsTheFleetLive opens the hub's page in headless Chromium, as an operator who may
// list the fleet: after logging in with a token, the overview shows the workers with their GPUs, the
// queues and a running job; a job submitted while the page is open appears on it within seconds,
// without a reload; its page tells its story. Without a token the hub answers 401, and a tenant asking
// for another tenant's job gets 403.
func TestTheHubPageShowsTheFleetLive(t *testing.T) {
	endpoint := hubEndpoint(t)
	ns := newNamespace(t, "e2e-page")
	other := newNamespace(t, "e2e-page-other")
	dumpOnFailure(t, ns)
	operator := tokenWithRules(t, ns, "operator", true, rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{gantry.GroupVersion.Group}, Resources: []string{"workerclusters", "globalqueues"}, Verbs: []string{"list"}})
	tenant := tokenWithRules(t, ns, "tenant", false, rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list"}})

	first := makeJob(ns, "first").gpus(8).runsFor("10m").obj()
	hidden := makeJob(other, "hidden").gpus(1).runsFor("10m").obj()
	submit(t, first)
	submit(t, hidden)
	waitForPending(t, ns, "first", "", gantry.WorkloadJobCreated)

	if code := statusOf(t, endpoint+"/", ""); code != http.StatusUnauthorized {
		t.Errorf("the page without a token: %d, want 401", code)
	}
	if code := statusOf(t, endpoint+"/jobs/"+other+"/hidden", tenant); code != http.StatusForbidden {
		t.Errorf("another tenant's job page: %d, want 403", code)
	}
	if code := statusOf(t, endpoint+"/jobs/"+ns+"/first", tenant); code != http.StatusOK {
		t.Errorf("the tenant's own job page: %d, want 200", code)
	}

	ctx := browser.Start(t, 2*time.Minute)
	browser.Login(t, ctx, endpoint, operator)
	// The open page is redrawn at most a second after its table changed (web.RefreshInterval).
	eventually(t, "the overview showing the fleet and job first", 10*time.Second, poll, func() error {
		overview := browser.Text(t, ctx, "main")
		for _, want := range []string{"worker-1", "worker-2", "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "default", "first", "Running"} {
			if !strings.Contains(overview, want) {
				return fmt.Errorf("the overview says no %q:\n%s", want, overview)
			}
		}
		return nil
	})
	browser.Screenshot(t, ctx, "overview")

	second := makeJob(ns, "second").gpus(2).runsFor("10m").obj()
	submitted := time.Now()
	submit(t, second)
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := chromedp.Do(wait, chromedp.WaitVisible(`tr[data-name="`+ns+`/second"]`)); err != nil {
		t.Fatalf("job second did not appear on the open page within 10s: %v\n%s", err, browser.Text(t, ctx, "main"))
	}
	t.Logf("job second appeared on the open page %s after it was submitted", time.Since(submitted).Round(10*time.Millisecond))

	if err := chromedp.Do(ctx, chromedp.Navigate(endpoint+"/jobs/"+ns+"/first")); err != nil {
		t.Fatal(err)
	}
	story := browser.Text(t, ctx, "body")
	for _, want := range []string{"Job " + ns + "/first", "State: Running on worker-", "Won by worker-"} {
		if !strings.Contains(story, want) {
			t.Errorf("the job page says no %q:\n%s", want, story)
		}
	}
	browser.Screenshot(t, ctx, "job")
}

// TestTheHubPageShowsAJobSetToAReaderOfJobSets: a tenant who may list and get JobSets in its namespace,
// but not Jobs, sees its running JobSet on the overview with its kind and reads its story on its page;
// a Job next to it stays hidden and its page is refused.
func TestTheHubPageShowsAJobSetToAReaderOfJobSets(t *testing.T) {
	endpoint := hubEndpoint(t)
	ns := newNamespace(t, "e2e-page-kinds")
	dumpOnFailure(t, ns)
	tenant := tokenWithRules(t, ns, "jobset-reader", false,
		rbacv1.PolicyRule{APIGroups: []string{"jobset.x-k8s.io"}, Resources: []string{"jobsets"}, Verbs: []string{"get", "list"}})
	submitJobSet(t, ns, "train", "10m")
	submit(t, makeJob(ns, "plain").gpus(1).runsFor("10m").obj())
	waitForPending(t, ns, "train", "", gantry.WorkloadJobCreated)
	waitForPending(t, ns, "plain", "", gantry.WorkloadJobCreated)

	// The page's table is made anew at most once a second (web.RefreshInterval).
	var overview string
	eventually(t, "the tenant's overview showing the JobSet", 10*time.Second, poll, func() error {
		var code int
		code, overview = bodyOf(t, endpoint+"/fragment/", tenant)
		for _, want := range []string{`data-name="` + ns + `/train" data-kind="JobSet"`, `href="/jobs/` + ns + `/jobset/train"`} {
			if code != http.StatusOK || !strings.Contains(overview, want) {
				return fmt.Errorf("the tenant's overview (%d) has no %q:\n%s", code, want, overview)
			}
		}
		return nil
	})
	if strings.Contains(overview, ns+"/plain") {
		t.Errorf("the overview shows a Job to a tenant who may not list Jobs:\n%s", overview)
	}
	// The JobSet's status comes back from its worker once its pods run.
	eventually(t, "the JobSet's page telling it runs", time.Minute, poll, func() error {
		code, story := bodyOf(t, endpoint+"/jobs/"+ns+"/jobset/train", tenant)
		for _, want := range []string{"JobSet " + ns + "/train (Workload jobset-train)", "State: Running on worker-", "  JobSet: running"} {
			if code != http.StatusOK || !strings.Contains(story, want) {
				return fmt.Errorf("the page (%d) says no %q:\n%s", code, want, story)
			}
		}
		return nil
	})
	if code, body := bodyOf(t, endpoint+"/jobs/"+ns+"/plain", tenant); code != http.StatusForbidden || !strings.Contains(body, "jobs.batch") {
		t.Errorf("a Job's page for a tenant who may not get Jobs: %d %q, want 403", code, body)
	}
}

// bodyOf is the status and body of a GET of url with the bearer token.
func bodyOf(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// hubEndpoint is the URL of the hub's endpoint, from the ConfigMap kubectl gantry reads it from.
func hubEndpoint(t *testing.T) string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := tb.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: gantry.GantryNamespace, Name: "gantry-hub-endpoint"}, &cm); err != nil {
		t.Fatalf("the hub's endpoint ConfigMap: %v", err)
	}
	return strings.TrimSuffix(cm.Data["url"], "/")
}

// tokenWithRules creates a ServiceAccount in ns holding the rules (everywhere when clusterWide, else
// in ns) and returns a token of it.
func tokenWithRules(t *testing.T, ns, name string, clusterWide bool, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	c := tb.Hub.Client
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}
	objs := []client.Object{sa}
	if clusterWide {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Rules: rules}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}
		objs = append(objs, role, binding)
		t.Cleanup(func() { _ = c.Delete(context.Background(), role); _ = c.Delete(context.Background(), binding) })
	} else {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
		objs = append(objs, role, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := tb.Hub.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// statusOf is the status of a GET of url with the bearer token (none when empty).
func statusOf(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

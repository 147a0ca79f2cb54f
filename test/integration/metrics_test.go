package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gantry-dev/gantry/internal/helmchart"
	"github.com/gantry-dev/gantry/internal/metricsendpoint"
)

// freeLoopbackPort is a port on 127.0.0.1 nothing listens on right now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// metricsReaderRole is the chart's ClusterRole for what scrapes Gantry.
func metricsReaderRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	ch, err := helmchart.Load(filepath.Join(repoRoot(), "deploy", "charts", "gantry"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := helmchart.Render(ch, helmchart.Namespace, map[string]any{"role": "hub"})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := helmchart.Objects(docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && o.GetName() == "gantry-metrics-reader" {
			var role rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
				t.Fatal(err)
			}
			return &role
		}
	}
	t.Fatal("the chart renders no ClusterRole gantry-metrics-reader")
	return nil
}

// By default a program's /metrics is served over HTTPS to callers its cluster authenticates and allows
// to get /metrics: no token is refused (401), a token without the right too (403), and one bound to
// the chart's gantry-metrics-reader reads the metrics.
func TestMetricsAreServedToAuthorizedCallersOnly(t *testing.T) {
	ctx := context.Background()
	port := freeLoopbackPort(t)
	mgr, err := ctrl.NewManager(hubEnv.cfg, ctrl.Options{Scheme: scheme,
		Metrics: metricsendpoint.Flags{BindAddress: "127.0.0.1:" + strconv.Itoa(port), Secure: true, CertDir: t.TempDir()}.Options()})
	if err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = mgr.Start(mctx) }()

	token := func(name string) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubNamespace}}
		if err := hubEnv.client.Create(ctx, sa); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, sa) })
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
		if err := hubEnv.client.SubResource("token").Create(ctx, sa, tr); err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	// Two callers: the endpoint remembers a refusal for a while, so the one refused is not the one
	// granted the right afterwards.
	stranger, scraper := token("stranger"), token("scraper")
	// The endpoint's certificate is self-signed; what is checked here is who may read.
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
	get := func(token string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	expect := func(what, token string, code int) string {
		var body string
		eventually(t, what, func() error {
			got, b, err := get(token)
			if err != nil || got != code {
				return fmt.Errorf("status %d (%v), want %d", got, err, code)
			}
			body = b
			return nil
		})
		return body
	}
	expect("no token refused", "", http.StatusUnauthorized)
	expect("a token without the right refused", stranger, http.StatusForbidden)

	role := metricsReaderRole(t)
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scraper-reads-gantry"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: hubNamespace}}}
	if err := hubEnv.client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, role) })
	if err := hubEnv.client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, binding) })
	// The API server's RBAC follows the binding a moment later; the endpoint would remember an earlier
	// refusal, so it is asked only once the API server allows it.
	eventually(t, "the API server allows the scraper to get /metrics", func() error {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  "system:serviceaccount:" + hubNamespace + ":scraper",
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}}
		if err := hubEnv.client.Create(ctx, sar); err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return fmt.Errorf("not allowed yet: %s", sar.Status.Reason)
		}
		return nil
	})
	if body := expect("the reader's token served", scraper, http.StatusOK); !strings.Contains(body, "go_goroutines") {
		t.Errorf("the metrics read lack go_goroutines:\n%.500s", body)
	}
}

package endpoint

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// A browser logs in with a token: the hub reviews it and keeps it in an HttpOnly, SameSite=Strict
// cookie, with which the page answers; a bad token, a login posted from another site, and no login at
// all are refused.
func TestLoginKeepsAReviewedTokenForThePage(t *testing.T) {
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := UserFrom(r.Context())
		_, _ = io.WriteString(w, "page for "+u.Username)
	})
	srv := httptest.NewServer(NewHandler(Config{Reviews: hubAPI().AuthenticationV1().TokenReviews(), Logs: &Logs{}, Page: page}))
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}

	status, body := do(t, browser, http.MethodGet, srv.URL+"/", "", map[string]string{"Accept": "text/html"})
	if status != http.StatusUnauthorized || !strings.Contains(body, `<form id="login"`) {
		t.Errorf("the page before logging in: %d, want 401 with the login form:\n%s", status, body)
	}
	status, body = do(t, browser, http.MethodPost, srv.URL+"/login", "token=not-a-token", map[string]string{"Origin": srv.URL})
	if status != http.StatusUnauthorized || !strings.Contains(body, "does not accept the token") {
		t.Errorf("a bad token: %d\n%s", status, body)
	}
	status, body = do(t, browser, http.MethodPost, srv.URL+"/login", "token="+strings.Repeat("x", maxTokenBytes), map[string]string{"Origin": srv.URL})
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "at most 16 KiB") {
		t.Errorf("an oversized token: %d\n%s", status, body)
	}
	status, _ = do(t, browser, http.MethodPost, srv.URL+"/login", "token=alice-token", map[string]string{"Origin": "https://elsewhere.example"})
	if status != http.StatusForbidden {
		t.Errorf("a login posted from another site: %d, want 403", status)
	}
	status, body = do(t, browser, http.MethodPost, srv.URL+"/login", "token=alice-token", map[string]string{"Origin": srv.URL})
	if status != http.StatusOK || body != "page for alice" {
		t.Errorf("after logging in: %d %q, want alice's page", status, body)
	}
	u, _ := url.Parse(srv.URL)
	cookies := jar.Cookies(u)
	if len(cookies) != 1 || cookies[0].Name != sessionCookie {
		t.Fatalf("cookies after logging in: %v", cookies)
	}
	status, body = do(t, browser, http.MethodPost, srv.URL+"/logout", "", map[string]string{"Origin": srv.URL})
	if status != http.StatusOK || !strings.Contains(body, `<form id="login"`) || len(jar.Cookies(u)) != 0 {
		t.Errorf("after logging out: %d, cookies %v; want the login form and no cookie", status, jar.Cookies(u))
	}
}

// The session cookie is HttpOnly and SameSite=Strict, and Secure when the endpoint serves HTTPS.
func TestTheSessionCookieIsKeptFromScriptsAndOtherSites(t *testing.T) {
	h := Login(hubAPI().AuthenticationV1().TokenReviews(), true)
	req := httptest.NewRequest(http.MethodPost, "https://hub.example/login", strings.NewReader("token=alice-token"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://hub.example")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	c := rec.Result().Cookies()
	if len(c) != 1 || !c[0].HttpOnly || !c[0].Secure || c[0].SameSite != http.SameSiteStrictMode || c[0].MaxAge <= 0 {
		t.Errorf("session cookie %+v", c)
	}
}

func do(t *testing.T, c *http.Client, method, url, form string, headers map[string]string) (status int, body string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(form))
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

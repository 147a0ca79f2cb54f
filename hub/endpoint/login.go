package endpoint

import (
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
)

const (
	// sessionCookie holds a browser's token for the hub. HttpOnly keeps it from the page's scripts,
	// SameSite=Strict from other sites' requests; the hub reviews it on every request like a header.
	sessionCookie = "gantry-session"
	// sessionLifetime bounds how long a browser keeps the token; the token's own expiry still applies.
	sessionLifetime = 8 * time.Hour
	// maxTokenBytes bounds a submitted token; tokens of the API server are a few KiB.
	maxTokenBytes = 16 << 10
)

type loginForm struct{ Message string }

var loginPage = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Gantry: log in</title>
<link rel="stylesheet" href="/static/style.css"></head>
<body><header><span>Gantry</span></header>
<main id="main">
<h2>Log in to the hub's page</h2>
{{if .Message}}<p class="hidden">{{.Message}}</p>{{end}}
<form id="login" method="post" action="/login">
<p>A token the hub's API server accepts: <code>kubectl create token NAME</code>, or your identity provider's token.
The page shows what the hub's RBAC lets that user read.</p>
<textarea id="token" name="token" rows="6" cols="80" autocomplete="off" required></textarea>
<p><button type="submit">Log in</button></p>
</form>
</main></body></html>
`))

// Login serves the login form and takes a token from it: the token is reviewed, then kept in the
// session cookie. Logout forgets it. Secure marks the cookie for HTTPS only.
func Login(reviews authenticationv1client.TokenReviewInterface, secure bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, _ *http.Request) { showLogin(w, http.StatusOK, "") })
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) {
			http.Error(w, "a login must come from the hub's own page", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxTokenBytes)
		if err := r.ParseForm(); err != nil {
			showLogin(w, http.StatusRequestEntityTooLarge, "the form could not be read (a token is at most 16 KiB): "+err.Error())
			return
		}
		token := strings.TrimSpace(r.PostFormValue("token"))
		if token == "" {
			showLogin(w, http.StatusBadRequest, "no token given")
			return
		}
		if _, status, msg := review(r.Context(), reviews, token); status != http.StatusOK {
			showLogin(w, status, msg)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: token, Path: "/", HttpOnly: true, Secure: secure,
			SameSite: http.SameSiteStrictMode, MaxAge: int(sessionLifetime.Seconds())})
		http.Redirect(w, r, "/", http.StatusSeeOther)
	})
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/", HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode, MaxAge: -1})
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	})
	return mux
}

func showLogin(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = loginPage.Execute(w, loginForm{Message: msg})
}

// sameOrigin refuses a login posted from another site, which would put its token into this browser.
// A browser names the page a form came from in Origin; a request without one is not a browser's.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return r.Header.Get("Sec-Fetch-Site") == "" || r.Header.Get("Sec-Fetch-Site") == "same-origin"
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// sessionToken is the token of the session cookie.
func sessionToken(r *http.Request) (string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || strings.ContainsAny(c.Value, " \t") {
		return "", false
	}
	return c.Value, true
}

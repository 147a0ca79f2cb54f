package endpoint

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

type userKey struct{}

// UserFrom is the user Authenticate found for the request.
func UserFrom(ctx context.Context) (authenticationv1.UserInfo, bool) {
	u, ok := ctx.Value(userKey{}).(authenticationv1.UserInfo)
	return u, ok
}

// Authenticate is the one place the endpoint authenticates: a request gets through to next only with a
// bearer token the hub's API server accepts (TokenReview); anything else is answered 401. So every page
// the endpoint serves sees the user as the hub does. The token comes in the Authorization header (kubectl
// gantry) or, for a browser, in the session cookie the login form sets. next finds the user with UserFrom.
func Authenticate(reviews authenticationv1client.TokenReviewInterface, next http.Handler) http.Handler {
	users := newReviewCache[[sha256.Size]byte, authenticationv1.UserInfo](time.Now)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			token, ok = sessionToken(r)
		}
		if !ok {
			unauthorized(w, r, "no bearer token: send the token of your kubeconfig for the hub as Authorization: Bearer (kubectl gantry does), or log in at /login")
			return
		}
		key := sha256.Sum256([]byte(token))
		u, known := users.get(key)
		if !known {
			var status int
			var msg string
			if u, status, msg = review(r.Context(), reviews, token); status != http.StatusOK {
				if status == http.StatusUnauthorized {
					unauthorized(w, r, msg)
				} else {
					http.Error(w, msg, status)
				}
				return
			}
			users.put(key, u)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

// review asks the hub's API server who the token is; a status other than 200 comes with what to say.
func review(ctx context.Context, reviews authenticationv1client.TokenReviewInterface, token string) (authenticationv1.UserInfo, int, string) {
	tr, err := reviews.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		ctrllog.FromContext(ctx).Error(err, "Reviewing a token failed")
		return authenticationv1.UserInfo{}, http.StatusServiceUnavailable, "the hub could not review the token with its API server; try again"
	}
	if !tr.Status.Authenticated {
		ctrllog.FromContext(ctx).V(1).Info("Token refused", "error", tr.Status.Error)
		return authenticationv1.UserInfo{}, http.StatusUnauthorized, "the hub's API server does not accept the token: it expired, was revoked or is not the hub's"
	}
	return tr.Status.User, http.StatusOK, ""
}

// unauthorized answers 401; a browser also gets a link to the login form.
func unauthorized(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="gantry-hub"`)
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_ = loginPage.Execute(w, loginForm{Message: msg})
		return
	}
	http.Error(w, msg, http.StatusUnauthorized)
}

// bearerToken is the token of an Authorization header "Bearer <token>".
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}

// Authorizer asks the hub's API server whether the request's user, as Authenticate found it (name,
// UID, groups, extra), may do what attrs say (SubjectAccessReview). Every page of the endpoint decides
// what a user sees with it (hub/web's Access is one).
func Authorizer(reviews authorizationv1client.SubjectAccessReviewInterface) func(context.Context, authorizationv1.ResourceAttributes) (bool, error) {
	answers := newReviewCache[string, bool](time.Now)
	return func(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, error) {
		u, ok := UserFrom(ctx)
		if !ok {
			return false, errors.New("the request has no authenticated user")
		}
		key := fmt.Sprintf("%q %q %q %v %+v", u.Username, u.UID, u.Groups, u.Extra, attrs)
		if allowed, known := answers.get(key); known {
			return allowed, nil
		}
		extra := map[string]authorizationv1.ExtraValue{}
		for k, v := range u.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
		review, err := reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra, ResourceAttributes: &attrs,
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("reviewing the access of %s: %w", u.Username, err)
		}
		allowed := review.Status.Allowed && !review.Status.Denied
		answers.put(key, allowed)
		return allowed, nil
	}
}

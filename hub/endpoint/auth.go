package endpoint

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

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
// bearer token the hub's API server accepts (TokenReview); anything else is answered 401. So every page the endpoint serves sees the user as the hub does.
// next finds the user with UserFrom.
func Authenticate(reviews authenticationv1client.TokenReviewInterface, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			unauthorized(w, "no bearer token: send the token of your kubeconfig for the hub as Authorization: Bearer (kubectl gantry does)")
			return
		}
		review, err := reviews.Create(r.Context(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			ctrllog.FromContext(r.Context()).Error(err, "Reviewing a token failed")
			http.Error(w, "the hub could not review the token with its API server; try again", http.StatusServiceUnavailable)
			return
		}
		if !review.Status.Authenticated {
			ctrllog.FromContext(r.Context()).V(1).Info("Token refused", "error", review.Status.Error)
			unauthorized(w, "the hub's API server does not accept the token: it expired, was revoked or is not the hub's")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, review.Status.User)))
	})
}

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="gantry-hub"`)
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
	return func(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, error) {
		u, ok := UserFrom(ctx)
		if !ok {
			return false, errors.New("the request has no authenticated user")
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
		return review.Status.Allowed && !review.Status.Denied, nil
	}
}

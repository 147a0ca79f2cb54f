package endpoint

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
)

func TestReviewCacheForgetsAfterItsTTLAndWhenFull(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	c := newReviewCache[string, bool](func() time.Time { return now })
	c.put("alice", true)
	if v, ok := c.get("alice"); !ok || !v {
		t.Fatalf("fresh answer: %v %v", v, ok)
	}
	now = now.Add(reviewTTL)
	if _, ok := c.get("alice"); ok {
		t.Errorf("an answer %s old is still used", reviewTTL)
	}
	for i := 0; i <= maxReviews; i++ {
		c.put(string(rune(i)), true)
	}
	if n := len(c.entries); n > maxReviews {
		t.Errorf("%d answers kept, want at most %d", n, maxReviews)
	}
}

// Requests of one user in a row ask the hub's API server once about the token and once per access.
func TestReviewsAreAskedOncePerTTL(t *testing.T) {
	api := hubAPI()
	allowed := Authorizer(api.AuthorizationV1().SubjectAccessReviews())
	h := Authenticate(api.AuthenticationV1().TokenReviews(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, err := allowed(r.Context(), authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Subresource: "log", Namespace: "team-a"})
		if err != nil || !ok {
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	for i := 0; i < 3; i++ {
		req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(context.Background())
		req.Header.Set("Authorization", "Bearer alice-token")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("request %d: %d", i, rec.Code)
		}
	}
	counts := map[string]int{}
	for _, a := range api.Actions() {
		counts[a.GetResource().Resource]++
	}
	if counts["tokenreviews"] != 1 || counts["subjectaccessreviews"] != 1 {
		t.Errorf("reviews asked %v, want one TokenReview and one SubjectAccessReview for three requests", counts)
	}
}

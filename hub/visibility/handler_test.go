package visibility

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	visibility "github.com/gantry-dev/gantry/apis/visibility/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// allowNamespaces lets the user list Workloads in those namespaces only ("" for every namespace).
func allowNamespaces(ns ...string) func(context.Context, authorizationv1.ResourceAttributes) (bool, error) {
	return func(_ context.Context, a authorizationv1.ResourceAttributes) (bool, error) {
		if a.Verb != "list" || a.Group != "gantry.dev" || a.Resource != "workloads" {
			return false, fmt.Errorf("asked for %+v", a)
		}
		for _, n := range ns {
			if n == a.Namespace {
				return true, nil
			}
		}
		return false, nil
	}
}

func newServer(t *testing.T, x *Index, allowed func(context.Context, authorizationv1.ResourceAttributes) (bool, error)) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	(&Handler{Index: x, Allowed: allowed}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, srv *httptest.Server, path string) (int, visibility.PendingWorkloadList, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list visibility.PendingWorkloadList
	var body strings.Builder
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			t.Fatal(err)
		}
	} else {
		buf := make([]byte, 1024)
		n, _ := resp.Body.Read(buf)
		body.Write(buf[:n])
	}
	return resp.StatusCode, list, body.String()
}

func indexOf(t *testing.T, wls ...*gantry.Workload) *Index {
	t.Helper()
	x := NewIndex(func() time.Time { return t0 })
	x.SetQueue(hubtest.MakeQueue("q", "a").GlobalQueue("gq").Obj(), false)
	x.SetQueue(hubtest.MakeQueue("q", "b").GlobalQueue("gq").Obj(), false)
	for _, wl := range wls {
		x.SetWorkload(wl, false)
	}
	return x
}

func waiting(ns, name string, age time.Duration) *gantry.Workload {
	return hubtest.MakeWorkload(name, ns).Queue("q").Created(t0.Add(-age)).Pending(gantry.ReasonWaitingForQuota, "no room").Obj()
}

// A tenant reads its namespace's pending Workloads with their positions among every namespace's, page
// by page; another namespace's, or the GlobalQueue's of every namespace, are refused.
func TestATenantReadsItsOwnPositionsOnly(t *testing.T) {
	x := indexOf(t, waiting("a", "a1", 5*time.Hour), waiting("b", "b1", 4*time.Hour), waiting("a", "a2", 3*time.Hour),
		waiting("a", "a3", 2*time.Hour))
	srv := newServer(t, x, allowNamespaces("a"))

	code, list, _ := get(t, srv, "/apis/visibility.gantry.dev/v1beta1/namespaces/a/pendingworkloads?limit=2")
	if code != http.StatusOK || list.Kind != "PendingWorkloadList" || list.APIVersion != "visibility.gantry.dev/v1beta1" {
		t.Fatalf("%d %s/%s", code, list.APIVersion, list.Kind)
	}
	got := func(l visibility.PendingWorkloadList) string {
		var s []string
		for _, w := range l.Items {
			s = append(s, fmt.Sprintf("%s@%d/%d %s", w.Name, w.PositionInGlobalQueue, w.PositionInQueue, w.Reason))
			if w.PendingInGlobalQueue != 4 {
				t.Errorf("%s: %d pending in its GlobalQueue, want 4", w.Name, w.PendingInGlobalQueue)
			}
		}
		return strings.Join(s, ", ")
	}
	if g := got(list); g != "a1@1/1 WaitingForQuota, a2@3/2 WaitingForQuota" || list.Continue != "2" || *list.RemainingItemCount != 1 {
		t.Errorf("first page: %s, continue %q", g, list.Continue)
	}
	_, list, _ = get(t, srv, "/apis/visibility.gantry.dev/v1beta1/namespaces/a/pendingworkloads?limit=2&continue="+list.Continue)
	if g := got(list); g != "a3@4/3 WaitingForQuota" || list.Continue != "" || list.RemainingItemCount != nil {
		t.Errorf("second page: %s, continue %q", g, list.Continue)
	}
	for path, want := range map[string]int{
		"/apis/visibility.gantry.dev/v1beta1/namespaces/b/pendingworkloads":            http.StatusForbidden,
		"/apis/visibility.gantry.dev/v1beta1/globalqueues/gq/pendingworkloads":         http.StatusForbidden,
		"/apis/visibility.gantry.dev/v1beta1/namespaces/a/pendingworkloads?l=1":        http.StatusBadRequest,
		"/apis/visibility.gantry.dev/v1beta1/namespaces/a/pendingworkloads?limit=1001": http.StatusBadRequest,
		"/apis/visibility.gantry.dev/v1beta1/namespaces/a/pendingworkloads?continue=x": http.StatusBadRequest,
	} {
		if code, _, body := get(t, srv, path); code != want {
			t.Errorf("%s: %d %s, want %d", path, code, body, want)
		}
	}
}

// Who may list Workloads in every namespace reads a GlobalQueue whole, and a Queue of a namespace alone.
func TestTheGlobalQueueAndOneQueue(t *testing.T) {
	x := indexOf(t, waiting("a", "a1", 5*time.Hour), waiting("b", "b1", 4*time.Hour))
	srv := newServer(t, x, allowNamespaces(""))
	if _, list, _ := get(t, srv, "/apis/visibility.gantry.dev/v1beta1/globalqueues/gq/pendingworkloads"); len(list.Items) != 2 ||
		list.Items[1].Namespace != "b" || list.Items[1].PositionInGlobalQueue != 2 || list.Items[1].GlobalQueue != "gq" {
		t.Errorf("GlobalQueue: %+v", list.Items)
	}
	srv = newServer(t, x, allowNamespaces("b"))
	if _, list, _ := get(t, srv, "/apis/visibility.gantry.dev/v1beta1/namespaces/b/pendingworkloads?queue=q"); len(list.Items) != 1 || list.Items[0].Name != "b1" {
		t.Errorf("queue b/q: %+v", list.Items)
	}
	srv = newServer(t, x, func(context.Context, authorizationv1.ResourceAttributes) (bool, error) {
		return false, errors.New("down")
	})
	if code, _, _ := get(t, srv, "/apis/visibility.gantry.dev/v1beta1/namespaces/b/pendingworkloads"); code != http.StatusServiceUnavailable {
		t.Errorf("a review that fails: %d", code)
	}
}

// A Workload leaves the index once it has a winner, has finished or is being deleted; a Queue that
// moves to another GlobalQueue moves its Workloads; what changed is ordered anew once MaxStaleness
// passed since the last order.
func TestTheIndexFollowsChanges(t *testing.T) {
	now := t0
	x := NewIndex(func() time.Time { return now })
	x.SetQueue(hubtest.MakeQueue("q", "a").GlobalQueue("gq").Obj(), false)
	w1, w2, w3 := waiting("a", "w1", 3*time.Hour), waiting("a", "w2", 2*time.Hour), waiting("a", "w3", time.Hour)
	for _, w := range []*gantry.Workload{w1, w2, w3} {
		x.SetWorkload(w, false)
	}
	if n := len(x.positions().byGlobalQueue["gq"]); n != 3 {
		t.Fatalf("%d pending", n)
	}
	won := w1.DeepCopy()
	won.Status.ClusterName = "w1"
	x.SetWorkload(won, false)
	finished := w2.DeepCopy()
	finished.Status.Conditions = append(finished.Status.Conditions, metav1.Condition{Type: gantry.WorkloadFinished, Status: metav1.ConditionTrue, Reason: gantry.ReasonQueueDrained})
	x.SetWorkload(finished, false)
	x.SetWorkload(toolscache.DeletedFinalStateUnknown{Key: "a/w3", Obj: w3}, false)
	if n := len(x.positions().byGlobalQueue["gq"]); n != 3 {
		t.Errorf("ordered anew within MaxStaleness: %d pending", n)
	}
	now = now.Add(MaxStaleness)
	if n := len(x.positions().byGlobalQueue["gq"]); n != 0 {
		t.Errorf("after MaxStaleness: %d pending, want 0", n)
	}
	x.SetWorkload(waiting("a", "w4", 0), false)
	x.SetQueue(hubtest.MakeQueue("q", "a").GlobalQueue("moved").Obj(), false)
	now = now.Add(MaxStaleness)
	if p := x.positions(); len(p.byGlobalQueue["moved"]) != 1 || len(p.byGlobalQueue["gq"]) != 0 {
		t.Errorf("after the Queue moved: %v", p.byGlobalQueue)
	}
}

// benchServer is an index of a GlobalQueue 100,000 deep, ordered once, and a request for a page of 100
// from its middle.
func benchServer(b *testing.B) (*Index, *time.Time, http.Handler, *http.Request) {
	b.Helper()
	es, queues := deepQueue(100_000)
	now := t0
	x := &Index{now: func() time.Time { return now }, entries: es, queues: queues, touched: map[types.NamespacedName]bool{}}
	x.positions()
	mux := http.NewServeMux()
	(&Handler{Index: x, Allowed: allowNamespaces("")}).Register(mux)
	req := httptest.NewRequest(http.MethodGet, "/apis/visibility.gantry.dev/v1beta1/globalqueues/deep/pendingworkloads?limit=100&continue=50000", nil)
	return x, &now, mux, req
}

func serve(b *testing.B, h http.Handler, req *http.Request) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatal(rec.Code, rec.Body.String())
	}
}

// BenchmarkPage100kDeep answers a page of 100 positions from the middle of a GlobalQueue 100,000 deep
// after 100 Workloads left it and 100 came (a dispatch pass's worth) MaxStaleness ago: what changed
// merged into the last order, the page and its JSON.
func BenchmarkPage100kDeep(b *testing.B) {
	x, now, h, req := benchServer(b)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		*now = now.Add(MaxStaleness)
		for range 100 {
			gone := x.ordered.all[0].key
			x.SetWorkload(&gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: gone.Namespace, Name: gone.Name}}, true)
			e := pending(fmt.Sprintf("team-%02d", n%100), fmt.Sprintf("new-%07d", n), "q", 0, -time.Duration(n)*time.Second)
			x.mu.Lock()
			x.entries[e.key], x.touched[e.key] = e, true
			x.mu.Unlock()
			n++
		}
		serve(b, h, req)
	}
}

// BenchmarkPage100kDeepOrdered answers the same page when nothing changed since the last order.
func BenchmarkPage100kDeepOrdered(b *testing.B) {
	_, _, h, req := benchServer(b)
	b.ReportAllocs()
	for b.Loop() {
		serve(b, h, req)
	}
}

// BenchmarkPage100kDeepQueueChanged answers it after a Queue changed: the whole queue ordered anew.
func BenchmarkPage100kDeepQueueChanged(b *testing.B) {
	x, now, h, req := benchServer(b)
	b.ReportAllocs()
	for b.Loop() {
		*now = now.Add(MaxStaleness)
		x.SetQueue(hubtest.MakeQueue("q", "team-00").GlobalQueue("deep").Obj(), false)
		serve(b, h, req)
	}
}

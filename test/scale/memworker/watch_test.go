package memworker

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cutWatchesAndCreate closes every watch and, under the same lock, so that none resumes in between,
// creates n Jobs: with n above the event log's size, the versions the watches were at are gone.
func cutWatchesAndCreate(t *testing.T, s *Server, namespace string, n int) {
	t.Helper()
	st := s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	for w := range st.watchers {
		st.drop(w)
	}
	jobs := lookup("batch", "v1", "jobs")
	for i := range n {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": fmt.Sprintf("late-%d", i), "namespace": namespace}}}
		if _, err := st.createLocked(jobs, namespace, u); err != nil {
			t.Fatal(err)
		}
	}
}

func expiredWatches(s *Server) int {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	return s.store.expired
}

// A watch from a version whose changes the log no longer keeps gets 410 Expired in its stream; a cache
// whose watch is cut while the changes it missed fall out of the log is refused the same way, lists
// again and has them.
func TestAnExpiredWatchGets410AndTheCacheListsAgain(t *testing.T) {
	s := startServer(t, Options{EventLog: 5})
	c := newClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	createNamespace(t, c, "team")
	first := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "early-0"}}
	if err := c.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		if err := c.Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: fmt.Sprintf("early-%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := kubernetes.NewForConfigOrDie(s.Config()).BatchV1().Jobs("team").Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	e := <-w.ResultChan()
	w.Stop()
	if st, ok := e.Object.(*metav1.Status); e.Type != watch.Error || !ok || st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
		t.Fatalf("a watch from version %s: %s %#v, want an error event of 410 Expired", first.ResourceVersion, e.Type, e.Object)
	}

	ca, err := cache.New(s.Config(), cache.Options{Scheme: agentScheme})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.GetInformer(ctx, &batchv1.Job{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	// One change seen on the watch, so that its end is a plain close, after which the reflector watches
	// again from the version it reached.
	if err := c.Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "seen"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cache seeing a new Job", func() error {
		return ca.Get(ctx, client.ObjectKey{Namespace: "team", Name: "seen"}, &batchv1.Job{})
	})
	before := expiredWatches(s)
	cutWatchesAndCreate(t, s, "team", 6)
	eventually(t, "the cache after its watch expired", func() error {
		var jobs batchv1.JobList
		if err := ca.List(ctx, &jobs); err != nil {
			return err
		}
		if len(jobs.Items) != 14 {
			return fmt.Errorf("%d Jobs cached, want 14", len(jobs.Items))
		}
		return nil
	})
	if expiredWatches(s) == before {
		t.Fatal("the cache caught up without a watch being refused as expired")
	}
}

// A watch that asks for bookmarks gets the server's version now and then, so that it resumes from a
// recent one; a change reaches it before the bookmark that follows the change.
func TestWatchesGetBookmarksOfTheServersVersion(t *testing.T) {
	s := startServer(t, Options{BookmarkInterval: 50 * time.Millisecond})
	c := newClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	createNamespace(t, c, "team")
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs); err != nil {
		t.Fatal(err)
	}
	w, err := kubernetes.NewForConfigOrDie(s.Config()).BatchV1().Jobs("").Watch(ctx, metav1.ListOptions{ResourceVersion: jobs.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a"}}
	if err := c.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	var seen []string // from the change on; a bookmark may come before it
	for e := range w.ResultChan() {
		got, _ := e.Object.(*batchv1.Job)
		if e.Type == watch.Added || len(seen) > 0 {
			seen = append(seen, fmt.Sprintf("%s %s", e.Type, got.ResourceVersion))
		}
		if e.Type == watch.Bookmark && len(seen) > 0 {
			break
		}
	}
	if want := fmt.Sprintf("[ADDED %s BOOKMARK %s]", job.ResourceVersion, job.ResourceVersion); fmt.Sprint(seen) != want {
		t.Fatalf("events %v, want %s", seen, want)
	}
}

package web

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/visibility"
	"github.com/gantry-dev/gantry/internal/view"
)

// workloadIn is a Workload of job name in ns, created age ago, in Queue q; on cluster when not empty,
// finished finishedAgo ago when that is not 0.
func workloadIn(ns, name, q string, age time.Duration, cluster string, finishedAgo time.Duration) *gantry.Workload {
	wl := &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job-" + name, CreationTimestamp: metav1.NewTime(now.Add(-age)),
		Labels: map[string]string{gantry.JobNameLabel: name}}, Spec: gantry.WorkloadSpec{QueueName: q}}
	if cluster != "" {
		wl.Status.ClusterName, wl.Status.GlobalQueue = cluster, "gpus"
		wl.Status.Conditions = []metav1.Condition{{Type: gantry.WorkloadJobCreated, Status: "True", Reason: gantry.ReasonJobCreated}}
	}
	if finishedAgo != 0 {
		wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: gantry.WorkloadFinished, Status: "True",
			Reason: "Succeeded", LastTransitionTime: metav1.NewTime(now.Add(-finishedAgo))})
	}
	return wl
}

func queueOf(ns, name, globalQueue string) *gantry.Queue {
	return &gantry.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gantry.QueueSpec{GlobalQueue: globalQueue}}
}

// selectionFleet: two namespaces sharing GlobalQueue gpus, one running job, three waiting, one finished
// an hour ago and one two days ago.
func selectionFleet() []client.Object {
	return []client.Object{
		queueOf("team-a", "q", "gpus"), queueOf("team-b", "q", "gpus"), queueOf("team-b", "cpu", "cpus"),
		workloadIn("team-a", "run", "q", 5*time.Hour, "worker-1", 0),
		workloadIn("team-a", "old", "q", 4*time.Hour, "", 0),
		workloadIn("team-b", "mid", "q", 3*time.Hour, "", 0),
		workloadIn("team-b", "new", "cpu", time.Hour, "", 0),
		workloadIn("team-a", "done", "q", 6*time.Hour, "worker-2", time.Hour),
		workloadIn("team-a", "ancient", "q", 72*time.Hour, "worker-2", 48*time.Hour),
	}
}

func names(rows []placedRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Namespace + "/" + r.Name + "@" + r.PositionText()
	}
	return out
}

func TestSelectFiltersSortsAndCutsPages(t *testing.T) {
	snap := tableOf(selectionFleet()...).current()
	everyone := func(*Row) bool { return true }
	for name, tc := range map[string]struct {
		query   url.Values
		visible func(*Row) bool
		want    []string
		total   int
	}{
		"the queue's order: what runs, then what waits by GlobalQueue and position": {
			want: []string{"team-a/run@-", "team-b/new@1/1", "team-a/old@1/2", "team-b/mid@2/2"}, total: 4},
		"finished of the last day":     {query: url.Values{"state": {"Finished"}}, want: []string{"team-a/done@-"}, total: 1},
		"all: finished ones last":      {query: url.Values{"state": {"All"}}, want: []string{"team-a/run@-", "team-b/new@1/1", "team-a/old@1/2", "team-b/mid@2/2", "team-a/done@-"}, total: 5},
		"one namespace":                {query: url.Values{"namespace": {"team-b"}}, want: []string{"team-b/new@1/1", "team-b/mid@2/2"}, total: 2},
		"one Queue of every namespace": {query: url.Values{"queue": {"q"}, "state": {"Pending"}}, want: []string{"team-a/old@1/2", "team-b/mid@2/2"}, total: 2},
		"one GlobalQueue":              {query: url.Values{"globalQueue": {"gpus"}}, want: []string{"team-a/run@-", "team-a/old@1/2", "team-b/mid@2/2"}, total: 3},
		"one cluster":                  {query: url.Values{"cluster": {"worker-2"}, "state": {"All"}}, want: []string{"team-a/done@-"}, total: 1},
		"newest first":                 {query: url.Values{"sort": {"newest"}}, want: []string{"team-b/new@1/1", "team-b/mid@2/2", "team-a/old@1/2", "team-a/run@-"}, total: 4},
		"oldest first":                 {query: url.Values{"sort": {"oldest"}}, want: []string{"team-a/run@-", "team-a/old@1/2", "team-b/mid@2/2", "team-b/new@1/1"}, total: 4},
		"by name":                      {query: url.Values{"sort": {"name"}}, want: []string{"team-a/old@1/2", "team-a/run@-", "team-b/mid@2/2", "team-b/new@1/1"}, total: 4},
		"a page past the last":         {query: url.Values{"page": {"2"}}, want: []string{}, total: 4},
		"what the reader may see": {visible: func(r *Row) bool { return r.Namespace == "team-b" },
			want: []string{"team-b/new@1/1", "team-b/mid@2/2"}, total: 2},
	} {
		t.Run(name, func(t *testing.T) {
			q, err := ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			visible := tc.visible
			if visible == nil {
				visible = everyone
			}
			sel := snap.Select(q, visible, now)
			if diff := cmp.Diff(tc.want, names(sel.Rows)); diff != "" || sel.Matching != tc.total {
				t.Errorf("rows (-want +got):\n%s\nmatching %d, want %d", diff, sel.Matching, tc.total)
			}
		})
	}
}

func TestSelectionOffersTheReadersValuesOnly(t *testing.T) {
	snap := tableOf(selectionFleet()...).current()
	sel := snap.Select(Query{Sort: SortQueue, Page: 1}, func(r *Row) bool { return r.Namespace == "team-a" }, now)
	if diff := cmp.Diff([]string{"team-a"}, sel.Namespaces); diff != "" {
		t.Errorf("namespaces offered (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"worker-1", "worker-2"}, sel.Clusters); diff != "" {
		t.Errorf("clusters offered, the finished job's of the last day included (-want +got):\n%s", diff)
	}
	if sel.HiddenNamespaces != 1 {
		t.Errorf("hidden namespaces %d, want 1", sel.HiddenNamespaces)
	}
}

func TestPagesAreCutOnTheHub(t *testing.T) {
	objs := []client.Object{queueOf("team-a", "q", "gpus")}
	for i := range 2*PageSize + 7 {
		objs = append(objs, workloadIn("team-a", fmt.Sprintf("job-%03d", i), "q", time.Duration(1000-i)*time.Minute, "", 0))
	}
	snap := tableOf(objs...).current()
	for page, want := range map[int]struct {
		first, last string
		n           int
	}{1: {"1/107", "50/107", PageSize}, 2: {"51/107", "100/107", PageSize}, 3: {"101/107", "107/107", 7}} {
		sel := snap.Select(Query{Sort: SortQueue, Page: page}, func(*Row) bool { return true }, now)
		if len(sel.Rows) != want.n || sel.Rows[0].PositionText() != want.first || sel.Rows[len(sel.Rows)-1].PositionText() != want.last ||
			sel.First != (page-1)*PageSize+1 || sel.Matching != 107 {
			t.Errorf("page %d: %d rows from %s to %s, first %d of %d", page, len(sel.Rows), sel.Rows[0].PositionText(),
				sel.Rows[len(sel.Rows)-1].PositionText(), sel.First, sel.Matching)
		}
	}
	o := BuildOverview(Fleet{}, snap.Select(Query{Sort: SortNewest, Namespace: "team-a", Page: 2}, func(*Row) bool { return true }, now),
		Query{Sort: SortNewest, Namespace: "team-a", Page: 2}, nil, false, false, now)
	if o.Last != 3 || o.Previous != "/?namespace=team-a&sort=newest" || o.Next != "/?namespace=team-a&page=3&sort=newest" {
		t.Errorf("links around page 2: last %d, previous %q, next %q", o.Last, o.Previous, o.Next)
	}
}

func TestBadQueriesAreRefused(t *testing.T) {
	for query, want := range map[string]string{
		"sort=size":     `sort "size": want one of queue, newest, oldest, name`,
		"state=Waiting": `state "Waiting": want one of All, Pending`,
		"page=0":        `page "0": want a number from 1`,
		"namespaces=a":  `unknown query parameter "namespaces"`,
		"page=two&x=1":  "unknown query parameter",
	} {
		v, _ := url.ParseQuery(query)
		if _, err := ParseQuery(v); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", query, err, want)
		}
	}
	srv, _ := server(t, "list jobs")
	if code, body := get(t, srv.URL+"/?sort=size"); code != http.StatusBadRequest || !strings.Contains(body, "sort") {
		t.Errorf("a bad query: %d %q, want 400", code, body)
	}
}

// A page that refreshes and shows the same gets a 304 and no body; one that changed gets it compressed.
func TestAnUnchangedPartCostsNoBody(t *testing.T) {
	srv, _ := server(t, "list jobs")
	ask := func(etag string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/fragment/?namespace=team-a", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		// A transport of its own, that leaves gzip to the test.
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	first := ask("")
	if first.StatusCode != http.StatusOK || first.Header.Get("Content-Encoding") != "gzip" || first.Header.Get("ETag") == "" {
		t.Fatalf("first answer: %d, encoding %q, etag %q", first.StatusCode, first.Header.Get("Content-Encoding"), first.Header.Get("ETag"))
	}
	gz, err := gzip.NewReader(first.Body)
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(gz); !strings.Contains(string(body), `data-name="team-a/eval"`) {
		t.Errorf("the uncompressed part shows no team-a/eval:\n%s", body)
	}
	again := ask(first.Header.Get("ETag"))
	if body, _ := io.ReadAll(again.Body); again.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Errorf("the same part asked again with its tag: %d with %d bytes, want 304 and none", again.StatusCode, len(body))
	}
}

// A Workload that waits and then wins leaves the waiting rows; a Queue moved to another GlobalQueue
// moves its Workloads; a deleted one goes.
func TestTheTableFollowsChanges(t *testing.T) {
	clock := now
	tick := func() time.Time { return clock }
	positions := visibility.NewIndex(tick)
	table := NewTable(positions, tick)
	feed := func(o client.Object, deleted bool) {
		switch o.(type) {
		case *gantry.Workload:
			positions.SetWorkload(o, deleted)
			table.SetWorkload(o, deleted)
		case *gantry.Queue:
			positions.SetQueue(o, deleted)
			table.touch()
		}
		clock = clock.Add(RefreshInterval)
	}
	rows := func() []string {
		return names(table.current().Select(Query{Sort: SortQueue, Page: 1, State: StateAll}, func(*Row) bool { return true }, clock).Rows)
	}
	feed(queueOf("team-a", "q", "gpus"), false)
	wl := workloadIn("team-a", "train", "q", time.Minute, "", 0)
	feed(wl, false)
	if diff := cmp.Diff([]string{"team-a/train@1/1"}, rows()); diff != "" {
		t.Errorf("waiting (-want +got):\n%s", diff)
	}
	feed(workloadIn("team-a", "train", "q", time.Minute, "worker-1", 0), false)
	if got := table.current().runningOn["worker-1"]; got != 1 {
		t.Errorf("worker-1 runs %d, want 1", got)
	}
	if diff := cmp.Diff([]string{"team-a/train@-"}, rows()); diff != "" {
		t.Errorf("won (-want +got):\n%s", diff)
	}
	other := workloadIn("team-a", "next", "q", time.Minute, "", 0)
	feed(other, false)
	feed(queueOf("team-a", "q", "elsewhere"), false)
	if sel := table.current().Select(Query{Sort: SortQueue, Page: 1, State: view.StatePending}, func(*Row) bool { return true }, clock); len(sel.Rows) != 1 ||
		sel.Rows[0].GlobalQueueName() != "elsewhere" {
		t.Errorf("after its Queue moved: %+v", names(sel.Rows))
	}
	feed(other, true)
	feed(wl, true)
	if got := rows(); len(got) != 0 {
		t.Errorf("after deletions: %v", got)
	}
}

// Within RefreshInterval the same snapshot serves every reader; after it, what changed shows.
func TestSnapshotsAreMadeAtMostOncePerInterval(t *testing.T) {
	clock := now
	tick := func() time.Time { return clock }
	positions := visibility.NewIndex(tick)
	table := NewTable(positions, tick)
	first := table.current()
	table.SetWorkload(workloadIn("team-a", "train", "q", time.Minute, "worker-1", 0), false)
	if table.current() != first {
		t.Errorf("a change within the interval made a snapshot anew")
	}
	clock = clock.Add(RefreshInterval)
	if s := table.current(); s == first || s.runningOn["worker-1"] != 1 {
		t.Errorf("the change did not show after the interval")
	}
}

// Pages that listen are told of a change once the table made it into a snapshot, the last change too.
func TestListeningPagesAreToldOfTheLastChange(t *testing.T) {
	positions := visibility.NewIndex(time.Now)
	table := NewTable(positions, time.Now)
	changes := &Changes{}
	notices, cancel, _ := changes.Subscribe()
	defer cancel()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = table.Run(ctx, changes) }()
	table.current()
	table.SetWorkload(workloadIn("team-a", "train", "q", time.Minute, "worker-1", 0), false)
	select {
	case <-notices:
	case <-time.After(10 * RefreshInterval):
		t.Fatal("no notice of the change")
	}
	if got := table.current().runningOn["worker-1"]; got != 1 {
		t.Errorf("the snapshot after the notice has worker-1 running %d, want 1", got)
	}
}

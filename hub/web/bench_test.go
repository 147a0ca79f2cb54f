package web

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// deepFleet is 100,000 Workloads waiting in one GlobalQueue from 100 namespaces, and 500 running.
func deepFleet() []client.Object {
	objs := make([]client.Object, 0, 100_700)
	for ns := range 100 {
		objs = append(objs, queueOf(fmt.Sprintf("team-%02d", ns), "q", "gpus"))
	}
	for i := range 100_000 {
		objs = append(objs, workloadIn(fmt.Sprintf("team-%02d", i%100), fmt.Sprintf("wait-%06d", i), "q", time.Duration(i)*time.Second, "", 0))
	}
	for i := range 500 {
		objs = append(objs, workloadIn(fmt.Sprintf("team-%02d", i%100), fmt.Sprintf("run-%03d", i), "q", time.Hour, fmt.Sprintf("worker-%d", i%4), 0))
	}
	return objs
}

// BenchmarkSnapshot100kDeep makes the table's snapshot anew after 100 Workloads changed (what happens
// at most once per RefreshInterval while a deep queue moves): the order of what waits merged anew and
// every row placed.
func BenchmarkSnapshot100kDeep(b *testing.B) {
	objs := deepFleet()
	table := tableOf(objs...)
	table.current()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for range 100 {
			wl := objs[100+n%100_000].(*gantry.Workload)
			table.positions.SetWorkload(wl, false)
			table.SetWorkload(wl, false)
			n++
		}
		table.build()
	}
}

// BenchmarkSelect100kDeep cuts the first page of the queue's order from a snapshot of 100,500 jobs
// for a reader who may see them all: one walk over them, counting every match.
func BenchmarkSelect100kDeep(b *testing.B) {
	benchSelect(b, Query{Sort: SortQueue, Page: 1})
}

// BenchmarkSelect100kDeepOneNamespace cuts page 10 of one namespace's 1,005 jobs, newest first.
func BenchmarkSelect100kDeepOneNamespace(b *testing.B) {
	benchSelect(b, Query{Namespace: "team-07", Sort: SortNewest, Page: 10})
}

func benchSelect(b *testing.B, q Query) {
	snap := tableOf(deepFleet()...).current()
	snap.order(q.Sort)
	b.ReportAllocs()
	for b.Loop() {
		if sel := snap.Select(q, func(*Row) bool { return true }, now); len(sel.Rows) == 0 {
			b.Fatal("an empty page")
		}
	}
}

// BenchmarkFragment100kDeep serves the overview's part (the page a live page fetches on a change)
// over a deep queue, compressed, with the reader's rights asked per kind as the hub asks them. It
// reports the bytes each answer sends.
func BenchmarkFragment100kDeep(b *testing.B) {
	h := handlerOf(fleet(), "list workerclusters", "list globalqueues", "list jobs")
	h.Table = tableOf(deepFleet()...)
	mux := h.Routes()
	req := httptest.NewRequest(http.MethodGet, "/fragment/", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	var answer *httptest.ResponseRecorder
	b.ReportAllocs()
	for b.Loop() {
		answer = httptest.NewRecorder()
		mux.ServeHTTP(answer, req)
		if answer.Code != http.StatusOK {
			b.Fatalf("%d %s", answer.Code, answer.Body)
		}
	}
	sent := answer.Body.Len()
	gz, err := gzip.NewReader(answer.Body)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(gz)
	b.ReportMetric(float64(sent), "bytes/answer")
	b.ReportMetric(float64(len(body)), "bytes-uncompressed/answer")
}

// BenchmarkFragment100kDeepWithUsage is BenchmarkFragment100kDeep for a reader who may also list every
// Usage: the 500 running jobs have a run each, and each of the 100 namespaces a Usage of 90 days of 4
// entries each, added up over the last 7 days with the runs into 400 rows. The Usages are listed as
// the hub's cache lists them.
func BenchmarkFragment100kDeepWithUsage(b *testing.B) {
	objs := deepFleet()
	for _, o := range objs[len(objs)-500:] {
		wl := o.(*gantry.Workload)
		wl.UID = types.UID(wl.Namespace + "/" + wl.Name)
		wl.Status.Runs = []gantry.Run{{Cluster: wl.Status.ClusterName, Epoch: 1, GlobalQueue: "gpus", GPUs: 8,
			GPUProduct: "NVIDIA-A100-SXM4-80GB", Started: metav1.NewTime(now.Add(-time.Hour))}}
	}
	usages := make([]gantry.Usage, 0, 100)
	for ns := range 100 {
		u := &gantry.Usage{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("team-%02d", ns), Name: gantry.UsageName}}
		for d := range gantry.UsageRetentionDays {
			day := gantry.DayUsage{Day: now.AddDate(0, 0, d-gantry.UsageRetentionDays+1).Format(time.DateOnly)}
			for c := range 4 {
				day.Entries = append(day.Entries, gantry.UsageEntry{Queue: "q", GlobalQueue: "gpus", Cluster: fmt.Sprintf("worker-%d", c),
					GPUProduct: "NVIDIA-A100-SXM4-80GB", GPUSeconds: 3600})
			}
			u.Status.Days = append(u.Status.Days, day)
		}
		usages = append(usages, *u)
	}
	h := handlerOf(fleet(), "list workerclusters", "list globalqueues", "list jobs", "list usages")
	h.Cache = cachedUsages{Reader: h.Cache, usages: usages}
	h.Table = tableOf(objs...)
	mux := h.Routes()
	req := httptest.NewRequest(http.MethodGet, "/fragment/", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	var answer *httptest.ResponseRecorder
	b.ReportAllocs()
	for b.Loop() {
		answer = httptest.NewRecorder()
		mux.ServeHTTP(answer, req)
		if answer.Code != http.StatusOK {
			b.Fatalf("%d %s", answer.Code, answer.Body)
		}
	}
	b.ReportMetric(float64(answer.Body.Len()), "bytes/answer")
}

// cachedUsages lists the Usages as an informer's cache does without deep copies: the objects it holds,
// copied shallowly into the list, not encoded and decoded as the fake client does.
type cachedUsages struct {
	client.Reader
	usages []gantry.Usage
}

func (c cachedUsages) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*gantry.UsageList); ok {
		l.Items = append(l.Items[:0], c.usages...)
		return nil
	}
	return c.Reader.List(ctx, list, opts...)
}

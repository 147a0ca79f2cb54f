package web

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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

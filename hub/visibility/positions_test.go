package visibility

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)

func pending(ns, name, queue string, priority int32, age time.Duration) *entry {
	return &entry{key: types.NamespacedName{Namespace: ns, Name: name}, id: ns + "/" + name, queue: queue, priority: priority, created: t0.Add(-age)}
}

func entries(es ...*entry) map[types.NamespacedName]*entry {
	m := map[types.NamespacedName]*entry{}
	for _, e := range es {
		m[e.key] = e
	}
	return m
}

// where lists "name@global/queue" for a list of placed workloads.
func where(list []placed) []string {
	var out []string
	for _, p := range list {
		out = append(out, fmt.Sprintf("%s@%d/%d", p.key.Name, p.inGlobal, p.inQueue))
	}
	return out
}

// Workloads are placed under the GlobalQueue their Queue names now, in the dispatcher's order:
// priority first, then creation, then namespace/name; positions count in the GlobalQueue and in the
// Queue. A namespace sees its own in that order; a Workload whose Queue names nothing has no position.
func TestOrderPlacesWorkloadsAsTheDispatcherTakesThem(t *testing.T) {
	queues := map[queueRef]string{{"a", "q"}: "gq", {"b", "q"}: "gq", {"b", "other"}: "gq2"}
	p := order(entries(
		pending("a", "old", "q", 0, time.Hour),
		pending("a", "new", "q", 0, time.Minute),
		pending("b", "urgent", "q", 10, time.Second),
		pending("b", "tie", "q", 0, time.Hour), // same creation as a/old: the key decides
		pending("b", "elsewhere", "other", 0, time.Hour),
		pending("a", "lost", "missing", 0, time.Hour),
	), queues)
	want := map[string][]string{
		"gq":  {"urgent@1/1", "old@2/1", "tie@3/2", "new@4/2"},
		"gq2": {"elsewhere@1/1"},
	}
	for gq, w := range want {
		if diff := cmp.Diff(w, where(p.byGlobalQueue[gq])); diff != "" {
			t.Errorf("GlobalQueue %s (-want +got):\n%s", gq, diff)
		}
	}
	if diff := cmp.Diff([]string{"lost@0/0", "old@2/1", "new@4/2"}, where(p.pick(p.byNamespace["a"]))); diff != "" {
		t.Errorf("namespace a (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"urgent@1/1", "tie@3/2"}, where(p.pick(p.byQueue[queueRef{"b", "q"}]))); diff != "" {
		t.Errorf("queue b/q (-want +got):\n%s", diff)
	}
}

func TestPage(t *testing.T) {
	list := make([]placed, 5)
	for i := range list {
		list[i].inGlobal = i + 1
	}
	for _, c := range []struct{ offset, limit, first, n, rest int }{
		{0, 2, 1, 2, 3}, {2, 2, 3, 2, 1}, {4, 2, 5, 1, 0}, {5, 2, 0, 0, 0}, {0, 100, 1, 5, 0},
	} {
		got, rest := page(list, c.offset, c.limit)
		if len(got) != c.n || rest != c.rest || (c.n > 0 && got[0].inGlobal != c.first) {
			t.Errorf("page(%d, %d): %d items from %v, %d after; want %d from %d, %d after", c.offset, c.limit, len(got), where(got), rest, c.n, c.first, c.rest)
		}
	}
}

// deepQueue is n pending Workloads of one GlobalQueue, over 100 namespaces.
func deepQueue(n int) (map[types.NamespacedName]*entry, map[queueRef]string) {
	es := make(map[types.NamespacedName]*entry, n)
	queues := map[queueRef]string{}
	for i := range n {
		ns := fmt.Sprintf("team-%02d", i%100)
		queues[queueRef{ns, "q"}] = "deep"
		e := pending(ns, fmt.Sprintf("job-%06d", i), "q", int32(i%3), time.Duration(n-i)*time.Second)
		es[e.key] = e
	}
	return es, queues
}

// BenchmarkOrder100kDeep orders 100,000 pending Workloads anew, as the index does at most once per
// MaxStaleness when they changed.
func BenchmarkOrder100kDeep(b *testing.B) {
	es, queues := deepQueue(100_000)
	b.ReportAllocs()
	for b.Loop() {
		order(es, queues)
	}
}

// Merging what changed into the last order gives the order made from scratch, whatever changed: new
// Workloads, Workloads gone, and Workloads whose priority or Queue changed.
func TestReorderIsOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	queues := map[queueRef]string{{"a", "q"}: "gq", {"b", "q"}: "gq", {"b", "r"}: "gq2"}
	pick := func() *entry {
		ns := []string{"a", "b"}[rng.IntN(2)]
		q := []string{"q", "r", "missing"}[rng.IntN(3)]
		return pending(ns, fmt.Sprintf("w%d", rng.IntN(60)), q, int32(rng.IntN(3)), time.Duration(rng.IntN(20))*time.Minute)
	}
	es := map[types.NamespacedName]*entry{}
	for range 40 {
		e := pick()
		es[e.key] = e
	}
	prev := order(es, queues)
	for round := range 50 {
		touched := map[types.NamespacedName]bool{}
		for range rng.IntN(10) {
			e := pick()
			touched[e.key] = true
			if rng.IntN(3) == 0 {
				delete(es, e.key)
			} else {
				es[e.key] = e
			}
		}
		got, want := reorder(prev, es, queues, touched), order(es, queues)
		if diff := cmp.Diff(where(want.all), where(got.all)); diff != "" {
			t.Fatalf("round %d (-order +reorder):\n%s", round, diff)
		}
		for ns := range want.byNamespace {
			if diff := cmp.Diff(where(want.pick(want.byNamespace[ns])), where(got.pick(got.byNamespace[ns]))); diff != "" {
				t.Fatalf("round %d, namespace %s (-order +reorder):\n%s", round, ns, diff)
			}
		}
		prev = got
	}
}

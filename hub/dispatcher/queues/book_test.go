package queues

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"
	"unsafe"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// FuzzBookKeepsQueueOrder applies events (a Workload added, its priority or status changed, finished,
// deleted, deleted with its last state unknown, replaced by another of the same name) in batches, as
// passes take them in, and checks after each batch that the book holds exactly the unfinished
// Workloads, each as last seen, in CompareInQueue's order, with its UID and Queue counted once.
func FuzzBookKeepsQueueOrder(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19})
	f.Add([]byte{0, 0, 0, 8, 8, 8, 16, 16, 1, 9, 17, 2, 10, 18, 3, 11, 19, 4, 12, 20, 5, 13, 21, 6, 14, 22, 7, 15, 23})
	f.Add([]byte{7, 7, 7, 7, 255, 0, 128, 64, 32, 16, 8, 4, 2, 1, 3, 5, 9, 17, 33, 65, 129})
	f.Fuzz(func(t *testing.T, ops []byte) {
		m := NewManager(0)
		want := map[string]*gantry.Workload{} // what the cache shows, unfinished
		version := 0
		for i, op := range ops {
			name := "w" + strconv.Itoa(int(op>>3)%12)
			key := "ns/" + name
			version++
			cur := want[key]
			switch op & 7 {
			case 0, 1: // added, or replaced by a new one of the same name
				wl := bookWorkload(name, types.UID(fmt.Sprintf("uid-%d", version)), version, int32(op%3), "q"+strconv.Itoa(int(op)%2))
				m.WorkloadChanged(key, wl)
				want[key] = wl
			case 2: // its priority changes
				if cur != nil {
					wl := cur.DeepCopy()
					wl.Spec.Priority, wl.ResourceVersion = int32(op%5), strconv.Itoa(version)
					m.WorkloadChanged(key, wl)
					want[key] = wl
				}
			case 3: // its status changes: it is nominated anew, admitted on a cluster, or taken back
				if cur != nil {
					wl := cur.DeepCopy()
					wl.Status.DispatchEpoch++
					switch (op >> 3) % 3 {
					case 0: // waiting, nominated or not: it keeps its place, and parks or not
						wl.Status.ClusterName, wl.Status.GlobalQueue = "", ""
						wl.Status.NominatedClusters = [][]string{nil, {"c0"}}[version%2]
					case 1:
						wl.Status.ClusterName, wl.Status.GlobalQueue = "c"+strconv.Itoa(int(op)%2), "gq"
					case 2:
						wl.Status.ClusterName, wl.Status.GlobalQueue = "c1", "" // admitted before statuses named their GlobalQueue
					}
					wl.ResourceVersion = strconv.Itoa(version)
					m.WorkloadChanged(key, wl)
					want[key] = wl
				}
			case 4: // it finishes
				if cur != nil {
					wl := cur.DeepCopy()
					apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{Type: gantry.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Done"})
					wl.ResourceVersion = strconv.Itoa(version)
					m.WorkloadChanged(key, wl)
					delete(want, key)
				}
			case 5: // deleted
				if cur != nil {
					m.WorkloadChanged(key, nil)
					delete(want, key)
				}
			case 6: // deleted while the watch was down
				m.WorkloadChanged(key, nil) // as its last state unknown
				delete(want, key)
			case 7: // a resync: the same object again
				if cur != nil {
					m.WorkloadChanged(key, cur)
				}
			}
			if i%3 == 2 || i == len(ops)-1 {
				m.Sync()
				checkBook(t, m.book, want)
			}
		}
	})
}

func bookWorkload(name string, uid types.UID, version int, priority int32, queue string) *gantry.Workload {
	return hubWorkload("ns", name, queue).UID(string(uid)).ResourceVersion(strconv.Itoa(version)).Priority(priority).
		Created(at.Add(time.Duration(version%7) * time.Second)).Obj()
}

func checkBook(t *testing.T, b *book, want map[string]*gantry.Workload) {
	t.Helper()
	if len(b.entries) != len(want) || len(b.order)+len(b.tallies.entries) != len(want) || len(b.uids) != len(want) {
		t.Fatalf("book holds %d entries, %d in order, %d tallied, %d UIDs; want %d", len(b.entries), len(b.order), len(b.tallies.entries), len(b.uids), len(want))
	}
	checkTallies(t, b)
	for key, wl := range want {
		e := b.entries[key]
		if e == nil || e.wl != wl || !b.hasUID(wl.UID) {
			t.Fatalf("book holds %s as %v, want the object last seen", key, e)
		}
		if e.w.Priority != wl.Spec.Priority || e.w.Epoch != wl.Status.DispatchEpoch {
			t.Fatalf("%s: derived priority %d epoch %d, want %d %d", key, e.w.Priority, e.w.Epoch, wl.Spec.Priority, wl.Status.DispatchEpoch)
		}
	}
	if !slices.IsSortedFunc(b.order, func(x, y *entry) int { return dispatch.CompareInQueue(&x.w, &y.w) }) {
		t.Fatal("the book's order is not the queue order")
	}
	users := map[queueKey]int{}
	for _, e := range b.tallies.entries {
		users[e.queue.queueKey]++
	}
	if len(b.parking) != len(b.order) {
		t.Fatalf("%d entries in the order, %d parking entries", len(b.order), len(b.parking))
	}
	for i, e := range b.order {
		if b.entries[e.w.Key] != e {
			t.Fatalf("%s is in the order but not the book", e.w.Key)
		}
		if m := e.parkingMeta(); e.at != i || !sameMeta(b.parking[i], m) {
			t.Fatalf("%s at %d says it is at %d, parking %+v, want %+v", e.w.Key, i, e.at, b.parking[i], e.parkingMeta())
		}
		users[e.queue.queueKey]++
		if b.shared.queues[e.queue.queueKey] != e.queue {
			t.Fatalf("%s names a Queue the book does not hold", e.w.Key)
		}
	}
	for k, q := range b.shared.queues {
		if q.users != users[k] {
			t.Fatalf("Queue %v counted as named %d times, want %d", k, q.users, users[k])
		}
	}
}

// checkTallies checks that the book tallies exactly its talliable entries, and that each tally adds up
// to them.
func checkTallies(t *testing.T, b *book) {
	t.Helper()
	sums := map[tallyKey]dispatch.Tally{}
	for key, e := range b.entries {
		if e.tallied != e.w.Talliable() {
			t.Fatalf("%s: tallied %v, talliable %v", key, e.tallied, e.w.Talliable())
		}
		if !e.tallied {
			continue
		}
		if b.tallies.entries[e.talliedAt] != e || b.tallies.workloads[e.talliedAt] != &e.w {
			t.Fatalf("%s is not in the tallies' list where it says", key)
		}
		sum := sums[e.tallyKey()]
		sum.Add(&e.w, 1)
		sums[e.tallyKey()] = sum
	}
	if len(sums) != len(b.tallies.byKey) {
		t.Fatalf("%d tallies, want %d", len(b.tallies.byKey), len(sums))
	}
	for k, sum := range sums {
		got := b.tallies.byKey[k]
		if got == nil || got.Workloads != sum.Workloads || !maps.Equal(got.Requests, sum.Requests) || got.queue != k.queue ||
			got.GlobalQueue != k.globalQueue || got.Cluster != k.cluster || got.Priority != k.priority {
			t.Fatalf("tally %+v is %+v, want %d workloads of %v", k, got, sum.Workloads, sum.Requests)
		}
	}
}

// TestBookSharesRequestsAndWords: Workloads of the same requests share one map of them, and the words of
// their Pending conditions, so that a deep queue costs little memory and its pass reads little of it.
func TestBookSharesRequestsAndWords(t *testing.T) {
	b := newBook()
	var wls []*gantry.Workload
	for i := range 3 {
		wls = append(wls, hubWorkload("ns", fmt.Sprintf("w%d", i), "q").
			Pending(gantry.ReasonWaitingForQuota, "waiting for quota of GlobalQueue "+string([]byte("gq"))).Obj())
	}
	b.replace(wls)
	b.sync()
	first := b.entries["ns/w0"].w
	for _, key := range []string{"ns/w1", "ns/w2"} {
		w := b.entries[key].w
		if fmt.Sprintf("%p", w.Requests) != fmt.Sprintf("%p", first.Requests) {
			t.Errorf("%s has a map of requests of its own", key)
		}
		if unsafe.StringData(w.PendingMessage) != unsafe.StringData(first.PendingMessage) {
			t.Errorf("%s has a Pending message of its own", key)
		}
	}
	if got := first.Requests[gantry.GPUResource]; got != 8000 {
		t.Errorf("requests hold %d milli-GPUs, want 8000", got)
	}
}

// sameMeta says whether two parking metas are alike, their requests the same shared map.
func sameMeta(a, b parkingMeta) bool {
	return a.queue == b.queue && a.settled == b.settled && a.parkable == b.parkable &&
		reflect.ValueOf(a.requests).Pointer() == reflect.ValueOf(b.requests).Pointer()
}

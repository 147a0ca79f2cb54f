package expectations

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// obj is a versioned object of the tests.
type obj struct {
	uid     types.UID
	version string
}

func (o obj) GetUID() types.UID          { return o.uid }
func (o obj) GetResourceVersion() string { return o.version }

// cacheOf reads a cache that holds the objects.
func cacheOf(objs map[string]obj) func(string) (obj, bool) {
	return func(key string) (obj, bool) { o, ok := objs[key]; return o, ok }
}

// TestAWriteStandsUntilTheCacheShowsIt: a write in flight, then applied, stands in for the cached
// object until the cache shows the version it left; no second write of the key starts meanwhile.
func TestAWriteStandsUntilTheCacheShowsIt(t *testing.T) {
	w := NewWrites[string, obj]()
	cache := map[string]obj{"a": {"u", "1"}}
	if !w.Start("a", obj{"u", "1"}) || w.Start("a", obj{"u", "1"}) {
		t.Fatal("a second write started while the first is in flight")
	}
	if over, _ := w.Overlay(cacheOf(cache)); over["a"] != (obj{"u", "1"}) {
		t.Errorf("in flight: overlay %v", over)
	}
	w.Applied("a", obj{"u", "1"}, obj{"u", "2"})
	if over, _ := w.Overlay(cacheOf(cache)); over["a"] != (obj{"u", "2"}) {
		t.Errorf("applied, cache behind: overlay %v", over)
	}
	if !w.Start("a", obj{"u", "2"}) {
		t.Fatal("no write starts once the last was applied")
	}
	w.Applied("a", obj{"u", "2"}, obj{"u", "3"}) // based on a write the cache never showed
	if over, _ := w.Overlay(cacheOf(cache)); over["a"] != (obj{"u", "3"}) {
		t.Errorf("two writes ahead of the cache: overlay %v", over)
	}
	cache["a"] = obj{"u", "3"}
	if over, _ := w.Overlay(cacheOf(cache)); len(over) != 0 {
		t.Errorf("the cache caught up: overlay %v", over)
	}
	if over, _ := w.Overlay(cacheOf(map[string]obj{"a": {"other", "1"}})); len(over) != 0 {
		t.Errorf("another object of the key: overlay %v", over)
	}
}

// TestAWriteOfUnknownOutcome: a write that failed without saying stands while the cache shows the
// version it was based on, blocks other writes of the key, is read back when due with a doubling
// backoff, and is settled by the cache or the read: superseded when the object changed, not written
// when it did not, moot when the object is gone.
func TestAWriteOfUnknownOutcome(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := NewWrites[string, obj]()
	w.Start("a", obj{"u", "1"})
	if wait := w.Unknown("a", obj{"u", "1"}, now); wait != 100*time.Millisecond {
		t.Errorf("first read back in %v", wait)
	}
	cache := map[string]obj{"a": {"u", "1"}}
	if over, _ := w.Overlay(cacheOf(cache)); over["a"] != (obj{"u", "1"}) || w.Start("a", obj{"u", "1"}) {
		t.Fatalf("of unknown outcome: overlay %v, or another write started", over)
	}
	if due := w.DueForReadBack(now); len(due) != 0 {
		t.Fatalf("due before its time: %v", due)
	}
	due := w.DueForReadBack(now.Add(time.Second))
	if len(due) != 1 || len(w.DueForReadBack(now.Add(time.Second))) != 0 {
		t.Fatalf("due %v, or due again while being read", due)
	}
	if out, wait := w.ReadBack(due[0], obj{}, false, errors.New("timeout"), now.Add(time.Second)); out != ReadFailed || wait != 200*time.Millisecond {
		t.Errorf("a failed read: %v, again in %v", out, wait)
	}
	due = w.DueForReadBack(now.Add(2 * time.Second))
	if out, _ := w.ReadBack(due[0], obj{"u", "1"}, true, nil, now.Add(2*time.Second)); out != NotWritten || !w.Start("a", obj{"u", "1"}) {
		t.Errorf("read back unchanged: %v, or no write starts after", out)
	}

	w.Unknown("a", obj{"u", "1"}, now)
	cache["a"] = obj{"u", "5"}
	over, superseded := w.Overlay(cacheOf(cache))
	if len(over) != 0 || len(superseded) != 1 || superseded[0].Cached != (obj{"u", "5"}) || superseded[0].Written != (obj{"u", "1"}) {
		t.Errorf("the cache moved on: overlay %v, superseded %v", over, superseded)
	}

	w.Start("b", obj{"v", "1"})
	w.Unknown("b", obj{"v", "1"}, now)
	due = w.DueForReadBack(now.Add(time.Hour))
	if out, _ := w.ReadBack(due[0], obj{"v", "7"}, true, nil, now.Add(time.Hour)); out != Superseded {
		t.Errorf("read back changed: %v", out)
	}
	if over, _ := w.Overlay(cacheOf(map[string]obj{"b": {"v", "1"}})); over["b"] != (obj{"v", "7"}) {
		t.Errorf("the live read is the truth while the cache is behind it: overlay %v", over)
	}

	w.Start("c", obj{"x", "1"})
	w.Unknown("c", obj{"x", "1"}, now)
	due = w.DueForReadBack(now.Add(time.Hour))
	if out, _ := w.ReadBack(due[0], obj{}, false, nil, now.Add(time.Hour)); out != Moot || !w.Start("c", obj{"y", "1"}) {
		t.Errorf("the object is gone: %v, or no write starts after", out)
	}
}

// TestRefusedWritesBackOff: a write the API server refused backs off, doubling up to a minute, unless
// it conflicted (the cache catches up); an applied write resets the backoff.
func TestRefusedWritesBackOff(t *testing.T) {
	w := NewWrites[string, obj]()
	var waits []time.Duration
	for range 12 {
		w.Start("a", obj{})
		waits = append(waits, w.NotApplied("a", true))
	}
	if waits[0] != 100*time.Millisecond || waits[1] != 200*time.Millisecond || waits[11] != time.Minute {
		t.Errorf("backoffs %v", waits)
	}
	w.Start("a", obj{})
	if wait := w.NotApplied("a", false); wait != 0 {
		t.Errorf("a conflict waits %v", wait)
	}
	w.Start("a", obj{})
	w.Applied("a", obj{}, obj{version: "2"})
	w.Start("a", obj{version: "2"})
	if wait := w.NotApplied("a", true); wait != 100*time.Millisecond {
		t.Errorf("after an applied write, backoff %v", wait)
	}
}

package expectations

import "testing"

func TestWritten(t *testing.T) {
	w := NewWritten[string, string]()
	if _, ok := w.Behind("a", "1"); ok {
		t.Fatal("nothing written, yet behind")
	}
	w.Record("a", "1", "ours")
	if v, ok := w.Behind("a", "1"); !ok || v != "ours" {
		t.Fatalf("cache at the replaced version: got %q, %v; want ours, true", v, ok)
	}
	if _, ok := w.Behind("a", "2"); ok {
		t.Fatal("the cache moved on, yet behind")
	}
	if v, stale, ok := w.Get("a"); !ok || v != "ours" || stale != "1" {
		t.Fatalf("Get = %q, %q, %v", v, stale, ok)
	}
	w.Record("b", "7", "theirs")
	w.Keep(func(k, stale string) bool { return k == "b" })
	if _, _, ok := w.Get("a"); ok || w.Len() != 1 {
		t.Fatalf("Keep kept a (len %d)", w.Len())
	}
	w.Forget("b")
	if w.Len() != 0 {
		t.Fatal("Forget kept b")
	}
}

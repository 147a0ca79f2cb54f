package memworker

import (
	"encoding/json"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// eventLog keeps the last changes of a server for watches to resume from, as etcd keeps revisions
// until it compacts them.
type eventLog struct {
	limit  int
	events []event // a ring of at most limit, oldest at start
	start  int
	// compacted is the version of the newest change no longer kept: a watch from an older version
	// has missed it.
	compacted uint64
}

func (l *eventLog) add(e event) {
	if len(l.events) < l.limit {
		l.events = append(l.events, e)
		return
	}
	l.compacted = l.events[l.start].obj.rv
	l.events[l.start] = e
	l.start = (l.start + 1) % l.limit
}

// since returns the changes after version rv, oldest first; false when some are no longer kept.
func (l *eventLog) since(rv uint64) ([]event, bool) {
	if rv < l.compacted {
		return nil, false
	}
	var out []event
	for i := range l.events {
		if e := l.events[(l.start+i)%len(l.events)]; e.obj.rv > rv {
			out = append(out, e)
		}
	}
	return out, true
}

// watchBuffer is how many events a watch may trail by before the server closes it.
const watchBuffer = 1024

// watcher is one open watch: the encoded events it is to send, in order.
type watcher struct {
	res       *resource
	namespace string
	selects   func(*object) bool
	bookmarks bool
	frames    chan []byte
	closed    bool // frames is closed; set with the store's lock held
}

func (w *watcher) sees(o *object) bool {
	return (w.namespace == "" || o.namespace == w.namespace) && w.selects(o)
}

// frameOf is the event a change is to this watch, if any. An object that a change takes into or out
// of the selection arrives as added or deleted, as the API server's watch cache sends it.
func (w *watcher) frameOf(e event) ([]byte, bool) {
	if e.res != w.res {
		return nil, false
	}
	now, before := w.sees(e.obj), e.prev != nil && w.sees(e.prev)
	typ := e.typ
	switch {
	case e.typ == watch.Deleted:
		if !now {
			return nil, false
		}
	case now && before:
		typ = watch.Modified
	case now:
		typ = watch.Added
	case before:
		typ = watch.Deleted
	default:
		return nil, false
	}
	return frame(typ, e.obj.raw), true
}

// send queues a frame; false when the watch trails too far.
func (w *watcher) send(f []byte) bool {
	select {
	case w.frames <- f:
		return true
	default:
		return false
	}
}

// frame encodes one watch event as the JSON stream carries it.
func frame(typ watch.EventType, object []byte) []byte {
	b := make([]byte, 0, len(object)+32)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","object":`...)
	b = append(b, object...)
	return append(b, "}\n"...)
}

// bookmark tells a watch that the server is at version rv; initialEventsEnd marks the one that ends
// the initial events of the WatchList protocol.
func bookmark(res *resource, rv uint64, initialEventsEnd bool) []byte {
	meta := map[string]any{"resourceVersion": strconv.FormatUint(rv, 10)}
	if initialEventsEnd {
		meta["annotations"] = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	raw, err := json.Marshal(map[string]any{"apiVersion": res.apiVersion(), "kind": res.kind, "metadata": meta})
	if err != nil {
		panic(err) // strings only
	}
	return frame(watch.Bookmark, raw)
}

// watchRequest is what a watch asks for.
type watchRequest struct {
	res       *resource
	namespace string
	selects   func(*object) bool
	rv        string
	// sendInitialEvents is the parameter of that name; nil when the request has none.
	sendInitialEvents *bool
	bookmarks         bool
}

// watch opens a watch and returns it with the events it sends first. A watch that asks for the state
// (no version, or sendInitialEvents) gets every object as added, and with sendInitialEvents then the
// bookmark that ends them (the WatchList protocol); one from a version gets the changes after it. A
// version whose changes are gone is the 410 Expired error, on which a reflector lists again.
func (s *store) watch(req watchRequest) (*watcher, [][]byte, error) {
	from, err := parseVersion(req.rv)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &watcher{res: req.res, namespace: req.namespace, selects: req.selects, bookmarks: req.bookmarks, frames: make(chan []byte, watchBuffer)}
	var first [][]byte
	initial := req.sendInitialEvents != nil && *req.sendInitialEvents
	switch {
	case initial || (req.sendInitialEvents == nil && from == 0):
		for _, o := range s.listLocked(req.res, req.namespace, req.selects) {
			first = append(first, frame(watch.Added, o.raw))
		}
		if initial {
			first = append(first, bookmark(req.res, s.rv, true))
		}
	case from == 0: // no initial events and no version: changes from now on
	default:
		events, ok := s.log.since(from)
		if !ok {
			s.expired++
			return nil, nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, s.log.compacted))
		}
		for _, e := range events {
			if f, ok := w.frameOf(e); ok {
				first = append(first, f)
			}
		}
	}
	s.watchers[w] = struct{}{}
	return w, first, nil
}

func parseVersion(rv string) (uint64, error) {
	if rv == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", rv))
	}
	return v, nil
}

// unwatch closes a watch its client left.
func (s *store) unwatch(w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop(w)
}

// drop closes a watch. Called with s.mu held.
func (s *store) drop(w *watcher) {
	if w.closed {
		return
	}
	w.closed = true
	close(w.frames)
	delete(s.watchers, w)
}

// closeWatches ends every open watch.
func (s *store) closeWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		s.drop(w)
	}
}

// bookmarkAll tells every watch that asked for bookmarks the server's version, so that it resumes from
// there and not from an older one the log may have dropped. A watch that trails far gets none.
func (s *store) bookmarkAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		if w.bookmarks {
			w.send(bookmark(w.res, s.rv, false))
		}
	}
}

// watchCounts counts the open watches by resource.
func (s *store) watchCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for w := range s.watchers {
		out[w.res.name]++
	}
	return out
}

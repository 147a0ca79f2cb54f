package web

import (
	"fmt"
	"net/http"
	"time"
)

const (
	// minEventInterval coalesces a burst of cache changes into one refresh of each page.
	minEventInterval = 250 * time.Millisecond
	// heartbeatInterval keeps idle connections open through proxies that close silent ones.
	heartbeatInterval = 20 * time.Second
)

// events streams server-sent events: "change" whenever the hub's caches changed, at most every
// minEventInterval, and a comment as heartbeat. It ends when the client goes.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	notices, cancel, ok := h.Changes.Subscribe()
	if !ok {
		http.Error(w, "too many pages are open on this hub; try again later", http.StatusServiceUnavailable)
		return
	}
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = fmt.Fprint(w, ": connected\n\n") // a client gone ends the stream through its context
	flusher.Flush()
	heartbeat := time.NewTicker(heartbeatInterval)
	defer heartbeat.Stop()
	var seq int
	for {
		select {
		case <-r.Context().Done():
			return
		case <-heartbeat.C:
			_, _ = fmt.Fprint(w, ": heartbeat\n\n")
		case <-notices:
			seq++
			fmt.Fprintf(w, "event: change\ndata: %d\n\n", seq)
			flusher.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(minEventInterval):
			}
			continue
		}
		flusher.Flush()
	}
}

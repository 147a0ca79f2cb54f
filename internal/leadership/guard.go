// Package leadership keeps a replica that lost its leader lease from writing. Leader election alone does
// not: a process paused (SIGSTOP, a stalled VM, a long GC) past its lease wakes up with its reconciles
// mid-way and their writes ready to go, while another replica already leads; its elector notices only on
// its next renewal. The Guard counts, on this process's monotonic clock, from the start of its last
// successful renewal, and refuses every mutating request once the lease may have passed to another
// replica, before the request leaves the process.
package leadership

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// ErrNotLeading is the error of a write the Guard refused.
var ErrNotLeading = errors.New("this replica does not surely hold its leader lease; the write was not sent")

// Guard tells whether this replica surely still leads. Another candidate takes the lease only after it
// has seen the lease unrenewed for the lease duration on its own clock, counted from a sight that is
// later than the start of the renewal it saw. So the lease is surely ours for less than the lease
// duration after the start of a renewal that succeeded; the Guard trusts it for Term, which leaves
// the difference for clocks that run at different rates.
type Guard struct {
	// Term is how long after the start of a successful renewal this replica writes. It must be shorter
	// than the lease duration; the renew deadline is.
	Term  time.Duration
	Clock clock.PassiveClock
	// Identity, when set, is added to the user agent of every request, so that audit logs tell replicas
	// apart.
	Identity string

	mu      sync.Mutex
	until   time.Time // monotonic
	refused int
}

// Leading tells whether this replica may write now.
func (g *Guard) Leading() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.Clock.Now().Before(g.until)
}

// Refused counts the writes the Guard refused.
func (g *Guard) Refused() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refused
}

// Lock wraps the leader election lock, so that the Guard learns of every renewal. The lock's own
// client must not go through the Guard: it is what renews.
func (g *Guard) Lock(inner resourcelock.Interface) resourcelock.Interface {
	return &guardedLock{Interface: inner, guard: g}
}

// Wrap makes a config's mutating requests pass the Guard.
func (g *Guard) Wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	if g.Identity != "" {
		if cfg.UserAgent == "" {
			cfg.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		cfg.UserAgent += " replica/" + g.Identity
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &guardedTransport{next: rt, guard: g} })
	return cfg
}

func (g *Guard) renewed(start time.Time, ours bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ours {
		g.until = start.Add(g.Term)
	} else {
		g.until = time.Time{} // released
	}
}

// admit is called for each mutating request.
func (g *Guard) admit(req *http.Request) error {
	g.mu.Lock()
	leading := g.Clock.Now().Before(g.until)
	if !leading {
		g.refused++
	}
	refused := g.refused
	g.mu.Unlock()
	if leading {
		return nil
	}
	// The first refusals are worth a line; a replica that lost its lease is about to exit anyway.
	if refused <= 10 {
		ctrllog.FromContext(req.Context()).Info("Refused a write: the leader lease may have passed to another replica",
			"method", req.Method, "path", req.URL.Path, "refused", refused)
	}
	return fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ErrNotLeading)
}

type guardedLock struct {
	resourcelock.Interface
	guard *Guard
}

func (l *guardedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.guard.Clock.Now()
	err := l.Interface.Create(ctx, ler)
	if err == nil {
		l.guard.renewed(start, ler.HolderIdentity == l.Identity())
	}
	return err
}

func (l *guardedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := l.guard.Clock.Now()
	if ler.HolderIdentity != l.Identity() {
		// Releasing: stop writing before the lease is handed on.
		l.guard.renewed(start, false)
	}
	err := l.Interface.Update(ctx, ler)
	if err == nil && ler.HolderIdentity == l.Identity() {
		l.guard.renewed(start, true)
	}
	return err
}

type guardedTransport struct {
	next  http.RoundTripper
	guard *Guard
}

func (t *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if err := t.guard.admit(req); err != nil {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, err
		}
	}
	return t.next.RoundTrip(req)
}

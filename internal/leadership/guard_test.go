package leadership

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
)

type fakeLock struct {
	resourcelock.Interface
	fail bool
	// during runs inside Update, as the request to the API server would.
	during func()
}

func (f *fakeLock) Identity() string { return "me" }

func (f *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	if f.fail {
		return errors.New("timeout")
	}
	return nil
}

func (f *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	if f.during != nil {
		f.during()
	}
	if f.fail {
		return errors.New("timeout")
	}
	return nil
}

type countingTransport struct{ sent []string }

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.sent = append(c.sent, req.Method)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error { c.closed = true; return nil }

func TestGuardWritesOnlyWithinTheTermOfTheLastRenewal(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	g := &Guard{Term: RenewDeadline, Clock: clk}
	lock := &fakeLock{}
	guarded := g.Lock(lock)
	next := &countingTransport{}
	rt := g.Wrap(&rest.Config{}).WrapTransport(next)

	send := func(method string) error {
		body := &closeTracker{Reader: strings.NewReader("{}")}
		req, _ := http.NewRequest(method, "https://hub.invalid/apis/gantry.dev/v1beta1/workloads", body)
		_, err := rt.RoundTrip(req)
		if err != nil && !body.closed {
			t.Errorf("%s refused without closing its body", method)
		}
		return err
	}
	mustSend := func(what, method string) {
		t.Helper()
		if err := send(method); err != nil {
			t.Fatalf("%s: %s refused: %v", what, method, err)
		}
	}
	mustRefuse := func(what, method string) {
		t.Helper()
		if err := send(method); !errors.Is(err, ErrNotLeading) {
			t.Fatalf("%s: %s: got %v, want ErrNotLeading", what, method, err)
		}
	}
	ler := resourcelock.LeaderElectionRecord{HolderIdentity: "me"}

	mustRefuse("before the lease is acquired", http.MethodPost)
	mustSend("reads need no lease", http.MethodGet)

	if err := guarded.Create(context.Background(), ler); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		mustSend("after acquiring", m)
	}

	// The term counts from the start of the renewal, not from its answer.
	lock.during = func() { clk.Step(3 * time.Second) }
	if err := guarded.Update(context.Background(), ler); err != nil {
		t.Fatal(err)
	}
	lock.during = nil
	clk.Step(RenewDeadline - 3*time.Second - time.Millisecond)
	mustSend("just within the term", http.MethodPatch)
	clk.Step(time.Millisecond)
	mustRefuse("at the end of the term", http.MethodPatch)

	// A renewal that fails extends nothing.
	if err := guarded.Update(context.Background(), ler); err != nil {
		t.Fatal(err)
	}
	lock.fail = true
	clk.Step(time.Second)
	if err := guarded.Update(context.Background(), ler); err == nil {
		t.Fatal("the fake lock should fail")
	}
	clk.Step(RenewDeadline - time.Second)
	mustRefuse("after renewals that failed", http.MethodPost)
	lock.fail = false

	// Paused past the lease: the first write after waking is refused, with no renewal attempted.
	if err := guarded.Update(context.Background(), ler); err != nil {
		t.Fatal(err)
	}
	mustSend("renewed", http.MethodPost)
	clk.Step(LeaseDuration + time.Second)
	mustRefuse("woken from a pause past the lease", http.MethodPost)
	mustSend("reads go on", http.MethodGet)

	// Releasing stops writes before the release is written.
	if err := guarded.Update(context.Background(), ler); err != nil {
		t.Fatal(err)
	}
	var writable bool
	lock.during = func() { writable = g.Leading() }
	if err := guarded.Update(context.Background(), resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatal(err)
	}
	if writable {
		t.Error("writes still allowed while the release was being written")
	}
	mustRefuse("after releasing", http.MethodDelete)

	if got, want := g.Refused(), 5; got != want {
		t.Errorf("Refused() = %d, want %d", got, want)
	}
	if got, want := len(next.sent), 8; got != want {
		t.Errorf("%d requests reached the API server, want %d: %v", got, want, next.sent)
	}
}

package endpoint

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fixed is a source whose log is text, or which cannot be opened.
func fixed(prefix, text string, openErr error) source {
	return source{prefix: prefix, open: func(context.Context) (io.ReadCloser, error) {
		if openErr != nil {
			return nil, openErr
		}
		return io.NopCloser(strings.NewReader(text)), nil
	}}
}

// byPrefix groups written lines by their prefix, in the order written: the merger keeps each source's
// order, and interleaves sources in any order.
func byPrefix(t *testing.T, out string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for _, l := range strings.SplitAfter(out, "\n") {
		if l == "" {
			continue
		}
		if !strings.HasSuffix(l, "\n") {
			t.Errorf("line %q is not whole", l)
		}
		prefix, text, ok := strings.Cut(l, "] ")
		if !ok {
			t.Fatalf("line %q has no prefix", l)
		}
		got[prefix+"] "] = append(got[prefix+"] "], strings.TrimSuffix(text, "\n"))
	}
	return got
}

func TestMerge(t *testing.T) {
	long := strings.Repeat("x", maxLine+10)
	cases := map[string]struct {
		sources []source
		limit   int
		want    map[string][]string
	}{
		"one": {sources: []source{fixed("[p/c] ", "a\nb\n", nil)}, limit: 4,
			want: map[string][]string{"[p/c] ": {"a", "b"}}},
		"several, interleaved, each in order": {limit: 4, sources: []source{
			fixed("[p1/c] ", "1\n2\n3\n", nil), fixed("[p2/c] ", "x\ny\n", nil), fixed("[p2/d] ", "only\n", nil)},
			want: map[string][]string{"[p1/c] ": {"1", "2", "3"}, "[p2/c] ": {"x", "y"}, "[p2/d] ": {"only"}}},
		"more sources than the limit": {limit: 1, sources: []source{fixed("[a/c] ", "1\n", nil), fixed("[b/c] ", "2\n", nil), fixed("[c/c] ", "3\n", nil)},
			want: map[string][]string{"[a/c] ": {"1"}, "[b/c] ": {"2"}, "[c/c] ": {"3"}}},
		"a last line without a newline": {limit: 2, sources: []source{fixed("[p/c] ", "a\nend", nil)},
			want: map[string][]string{"[p/c] ": {"a", "end"}}},
		"an empty log":     {limit: 2, sources: []source{fixed("[p/c] ", "", nil)}, want: map[string][]string{}},
		"blank lines stay": {limit: 2, sources: []source{fixed("[p/c] ", "a\n\nb\n", nil)}, want: map[string][]string{"[p/c] ": {"a", "", "b"}}},
		"a line too long is cut": {limit: 2, sources: []source{fixed("[p/c] ", long+"\nnext\n", nil)},
			want: map[string][]string{"[p/c] ": {long[:maxLine], long[maxLine:], "next"}}},
		"a log that cannot be opened": {limit: 2, sources: []source{
			fixed("[p/c] ", "", errors.New(`container "c" in pod "p" is waiting to start: ContainerCreating`)), fixed("[q/c] ", "fine\n", nil)},
			want: map[string][]string{"[p/c] ": {`(no log: container "c" in pod "p" is waiting to start: ContainerCreating)`}, "[q/c] ": {"fine"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			flushes := 0
			merge(context.Background(), &out, func() { flushes++ }, tc.sources, tc.limit)
			if diff := cmp.Diff(tc.want, byPrefix(t, out.String())); diff != "" {
				t.Errorf("lines by source (-want +got):\n%s", diff)
			}
			if out.Len() > 0 && flushes == 0 {
				t.Error("lines written, never flushed")
			}
		})
	}
}

// A log broken off midway says so after the lines that came.
func TestMergeSaysWhenALogBreaksOff(t *testing.T) {
	broken := source{prefix: "[p/c] ", open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(io.MultiReader(strings.NewReader("a\n"), iotestErr{errors.New("connection reset")})), nil
	}}
	var out bytes.Buffer
	merge(context.Background(), &out, nil, []source{broken}, 1)
	if want := "[p/c] a\n[p/c] (log broken off: connection reset)\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }

// endless is a followed log: it gives what is written to it and blocks for more until it is closed.
type endless struct {
	r      *io.PipeReader
	w      *io.PipeWriter
	closed atomic.Bool
}

func newEndless() *endless {
	r, w := io.Pipe()
	return &endless{r: r, w: w}
}

func (e *endless) Read(p []byte) (int, error) { return e.r.Read(p) }
func (e *endless) Close() error {
	e.closed.Store(true)
	return e.r.Close()
}

// safeBuffer is written by the merger while the test reads it.
type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Followed logs stream as lines come, and stop, their streams closed, when the client goes away. In a
// bubble, synctest.Wait returns once the merger has written what came and waits for more.
func TestMergeFollowsAndStopsWithTheClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := []*endless{newEndless(), newEndless()}
		var sources []source
		for i, l := range logs {
			sources = append(sources, source{prefix: []string{"[a/c] ", "[b/c] "}[i], open: func(context.Context) (io.ReadCloser, error) { return l, nil }})
		}
		ctx, cancel := context.WithCancel(context.Background())
		out := &safeBuffer{}
		done := make(chan struct{})
		go func() { merge(ctx, out, nil, sources, 2); close(done) }()
		go func() { _, _ = logs[0].w.Write([]byte("first\n")) }()
		go func() { _, _ = logs[1].w.Write([]byte("second\n")) }()
		synctest.Wait()
		if !strings.Contains(out.String(), "[a/c] first\n") || !strings.Contains(out.String(), "[b/c] second\n") {
			t.Fatalf("lines not streamed: %q", out.String())
		}
		select {
		case <-done:
			t.Fatal("merge ended while its logs were open")
		default:
		}
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			for _, l := range logs {
				_ = l.w.Close() // so that the bubble's goroutines end
			}
			t.Fatal("merge went on after the client left")
		}
		for i, l := range logs {
			if !l.closed.Load() {
				t.Errorf("stream %d left open", i)
			}
		}
	})
}

// failingWriter is a client that went away.
type failingWriter struct{ writes atomic.Int32 }

func (f *failingWriter) Write([]byte) (int, error) {
	f.writes.Add(1)
	return 0, errors.New("broken pipe")
}

// A failed write stops every stream, not only the one that wrote.
func TestMergeStopsWhenAWriteFails(t *testing.T) {
	quiet := newEndless()
	sources := []source{
		{prefix: "[a/c] ", open: func(context.Context) (io.ReadCloser, error) { return quiet, nil }},
		fixed("[b/c] ", "x\ny\nz\n", nil),
	}
	w := &failingWriter{}
	done := make(chan struct{})
	go func() { merge(context.Background(), w, nil, sources, 2); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("merge went on after a write failed")
	}
	if n := w.writes.Load(); n != 1 {
		t.Errorf("%d writes, want 1: none after the failure", n)
	}
	if !quiet.closed.Load() {
		t.Error("the other stream was left open")
	}
}

// At most limit logs are open at once. The first opens wait until the test lets them go: once the merger
// waits too (synctest.Wait), exactly limit of them are open.
func TestMergeOpensAtMostLimitAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var open, most atomic.Int32
		release := make(chan struct{})
		var sources []source
		for range 10 {
			sources = append(sources, source{prefix: "[p/c] ", open: func(context.Context) (io.ReadCloser, error) {
				n := open.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-release
				return closer{Reader: strings.NewReader("l\n"), close: func() { open.Add(-1) }}, nil
			}})
		}
		var out bytes.Buffer
		done := make(chan struct{})
		go func() { merge(context.Background(), &out, nil, sources, 3); close(done) }()
		synctest.Wait()
		if n := open.Load(); n != 3 {
			t.Errorf("%d logs open while the first ones are being opened, want 3", n)
		}
		close(release)
		<-done
		if m := most.Load(); m != 3 {
			t.Errorf("%d logs open at once, want 3, the limit", m)
		}
		if n := strings.Count(out.String(), "\n"); n != 10 {
			t.Errorf("%d lines, want 10", n)
		}
	})
}

type closer struct {
	io.Reader
	close func()
}

func (c closer) Close() error {
	c.close()
	return nil
}

// flushed keeps what was written apart from what was flushed, as a ResponseWriter's buffer does.
type flushed struct {
	mu             sync.Mutex
	pending, shown bytes.Buffer
}

func (f *flushed) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending.Write(p)
}

func (f *flushed) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, _ = f.pending.WriteTo(&f.shown)
}

func (f *flushed) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shown.String()
}

// A line goes out at once even when the start of the next one came with it: the rest of that may
// take long. In a bubble, synctest.Wait returns once the merger waits for that rest.
func TestMergeFlushesALineBeforeAPartialOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := newEndless()
		out := &flushed{}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			merge(ctx, out, out.flush, []source{{prefix: "[p/c] ", open: func(context.Context) (io.ReadCloser, error) { return log, nil }}}, 1)
			close(done)
		}()
		go func() { _, _ = log.w.Write([]byte("first\nsecond\nthird, half")) }()
		synctest.Wait()
		if got := out.String(); got != "[p/c] first\n[p/c] second\n" {
			t.Errorf("shown %q, want the two whole lines", got)
		}
		cancel()
		<-done
	})
}

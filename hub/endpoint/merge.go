package endpoint

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
)

// maxLine is the longest line written as one; a longer one is cut into lines of this length, each
// with its prefix, so one log cannot make the hub hold an unbounded line.
const maxLine = 64 << 10

// source is one container's log as the merger reads it.
type source struct {
	prefix string
	open   func(ctx context.Context) (io.ReadCloser, error)
}

// lineWriter writes whole lines to one writer for many sources, so that lines never mix.
type lineWriter struct {
	mu    sync.Mutex
	w     io.Writer
	flush func()
	err   error
	buf   []byte
}

// line writes prefix, text and a newline (text may end in one already) as one write; it flushes unless
// the source has another line at hand, so a burst goes out in one piece and a quiet log at once.
func (lw *lineWriter) line(prefix string, text []byte, more bool) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return lw.err
	}
	lw.buf = append(append(lw.buf[:0], prefix...), text...)
	if !bytes.HasSuffix(lw.buf, []byte("\n")) {
		lw.buf = append(lw.buf, '\n')
	}
	if _, lw.err = lw.w.Write(lw.buf); lw.err == nil && !more && lw.flush != nil {
		lw.flush()
	}
	return lw.err
}

// merge copies the lines of every source to w, each line with its source's prefix, reading at most
// limit sources at a time, until all have ended, ctx is done or a write fails. A source that cannot be
// opened, or breaks off, says so in a line of its own.
func merge(ctx context.Context, w io.Writer, flush func(), sources []source, limit int) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lw := &lineWriter{w: w, flush: flush}
	slots := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for _, s := range sources {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := copyLines(ctx, lw, s); err != nil {
				cancel() // the client is gone: the others stop too
			}
		}()
	}
	wg.Wait()
}

// copyLines copies one source; its error is a failed write.
func copyLines(ctx context.Context, lw *lineWriter, s source) error {
	rc, err := s.open(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return lw.line(s.prefix, []byte("(no log: "+err.Error()+")"), false)
	}
	defer rc.Close()
	// A read that waits for lines that never come ends when the stream is closed.
	stop := context.AfterFunc(ctx, func() { _ = rc.Close() })
	defer stop()
	br := bufio.NewReaderSize(rc, maxLine)
	for {
		text, err := br.ReadSlice('\n')
		if len(text) > 0 {
			if werr := lw.line(s.prefix, text, lineAtHand(br)); werr != nil {
				return werr
			}
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF) || ctx.Err() != nil:
			return nil
		default:
			return lw.line(s.prefix, []byte("(log broken off: "+err.Error()+")"), false)
		}
	}
}

// lineAtHand says whether a whole line is buffered already: the line before it need not be flushed
// yet. A partial one may wait long for its end.
func lineAtHand(br *bufio.Reader) bool {
	buffered, _ := br.Peek(br.Buffered())
	return bytes.IndexByte(buffered, '\n') >= 0
}

package caddymodule

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/kvroute/kvroute/routing/reason"
)

// readBody reads the whole request body with a size cap and a read deadline (DESIGN.md §1 step
// 1, §6). Over the cap it returns body_too_large (413), before buffering more than limit+1 bytes;
// past the deadline body_timeout (408). The deadline is set on the connection through
// http.ResponseController; when the writer does not support deadlines (some test recorders) the
// body is read with the cap only. On error the body is left unread: the caller answers with
// `Connection: close` (see Handler.fail), so the server does not drain it.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, reason.New(reason.BodyTooLarge, "request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, limit)
	}
	rc := http.NewResponseController(w)
	deadlineSet := false
	if timeout > 0 {
		if err := rc.SetReadDeadline(time.Now().Add(timeout)); err == nil {
			deadlineSet = true
		}
	}
	ok := false
	if deadlineSet {
		defer func() {
			if ok {
				_ = rc.SetReadDeadline(time.Time{})
				return
			}
			// The body was not read to its end: keep every later read failing at once, so
			// nothing (such as the server draining the rest of a slow body before it writes
			// our error response) can hold this handler.
			_ = rc.SetReadDeadline(time.Now())
		}()
	}
	capHint := r.ContentLength
	if capHint < 0 || capHint > 1<<20 {
		capHint = 64 << 10 // grow as the data arrives; a header cannot make us allocate
	}
	buf := bytes.NewBuffer(make([]byte, 0, capHint+1))
	_, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, reason.Wrap(reason.BodyTimeout, err, "request body not received within %s", timeout)
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, reason.Wrap(reason.BodyTooLarge, err, "request body exceeds the limit of %d bytes", mbe.Limit)
		}
		// A malformed chunked encoding or a client that went away mid-body: the client's fault,
		// answered (if anyone still listens) with 400, never a server error.
		return nil, reason.Wrap(reason.BodyInvalid, err, "reading the request body failed")
	}
	if int64(buf.Len()) > limit {
		return nil, reason.New(reason.BodyTooLarge, "request body exceeds the limit of %d bytes", limit)
	}
	ok = true
	return buf.Bytes(), nil
}

// replayBody is the request body handed to the proxy: the exact bytes read from the client. The
// kvroute selection policy rewinds it before every proxy attempt, so a retry on another upstream
// resends the same bytes even when an earlier attempt consumed part of it; Close is a no-op for
// the same reason (the server frees the original body). req.GetBody returns fresh readers for
// the transport's own rewinds.
type replayBody struct {
	data []byte

	// mu guards off: a failed attempt's transport goroutine may still read while the next attempt
	// rewinds.
	mu  sync.Mutex
	off int
}

func newReplayBody(b []byte) *replayBody { return &replayBody{data: b} }

// Read implements io.Reader.
func (b *replayBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.off >= len(b.data) {
		return 0, io.EOF
	}
	n := copy(p, b.data[b.off:])
	b.off += n
	return n, nil
}

// Close implements io.Closer; it does nothing (see the type doc).
func (b *replayBody) Close() error { return nil }

// Rewind moves the read position back to the first byte.
func (b *replayBody) Rewind() {
	b.mu.Lock()
	b.off = 0
	b.mu.Unlock()
}

// install makes b the body of r with an exact Content-Length and a GetBody for rewinds.
func (b *replayBody) install(r *http.Request) {
	r.Body = b
	r.ContentLength = int64(len(b.data))
	r.TransferEncoding = nil
	data := b.data
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	if len(data) == 0 {
		r.Body = http.NoBody
		r.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
	}
}

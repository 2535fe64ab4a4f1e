package caddymodule

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
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

// replayBody is the request body handed to the proxy: the exact bytes read from the client,
// immutable. Every proxy attempt gets its own reader over them (attach, called by the kvroute
// selection policy for each attempt), so a retry on another upstream resends the same bytes even
// when an earlier attempt consumed part of its reader, and nothing that wraps the body in between
// can see it restart: reverse_proxy's `request_buffers` reads the first N bytes of the installed
// body into its own buffer before the first attempt; rewinding a shared reader under that buffer
// made the upstream receive those N bytes and then the whole body again (issue 11 item 3).
type replayBody struct {
	data []byte
}

func newReplayBody(b []byte) *replayBody { return &replayBody{data: b} }

// reader returns a fresh reader over the bytes; its Close does nothing (the server frees the
// client's body).
func (b *replayBody) reader() io.ReadCloser {
	if len(b.data) == 0 {
		return http.NoBody
	}
	return io.NopCloser(bytes.NewReader(b.data))
}

// install makes the bytes the body of r with an exact Content-Length, no transfer coding and a
// GetBody for the transport's own rewinds.
func (b *replayBody) install(r *http.Request) {
	r.Body = b.reader()
	r.ContentLength = int64(len(b.data))
	r.TransferEncoding = nil
	r.GetBody = func() (io.ReadCloser, error) { return b.reader(), nil }
	if r.Header != nil {
		r.Header.Set("Content-Length", strconv.Itoa(len(b.data)))
	}
}

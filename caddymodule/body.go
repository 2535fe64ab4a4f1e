package caddymodule

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/kvroute/kvroute/reason"
)

// readBody reads the whole request body with a size cap and a read deadline (DESIGN.md §1 step
// 1, §6). Over the cap it returns body_too_large (413), before buffering more than limit+1 bytes;
// past the deadline body_timeout (408). The deadline is set on the connection through
// http.ResponseController; when the writer does not support deadlines (some test recorders) the
// body is read with the cap only. On error the body is left unread: the caller answers with
// `Connection: close` (see Handler.fail), so the server does not drain it. The bytes may be in a
// pooled buffer (bodypool.go), returned too (nil otherwise): the caller gives it back when the
// request is over (replayBody.done, or put when the body was not forwarded).
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, *pooledBuf, error) {
	if r.ContentLength > limit {
		return nil, nil, reason.New(reason.BodyTooLarge, "request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, limit)
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
	start := time.Now()
	data, pb, err := readChunks(io.LimitReader(r.Body, limit+1), r.ContentLength)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, nil, reason.Wrap(reason.BodyTimeout, err, "%s", bodyTimeoutMessage(time.Since(start), timeout, deadlineSet))
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, nil, reason.Wrap(reason.BodyTooLarge, err, "request body exceeds the limit of %d bytes", mbe.Limit)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			// The client closed its side before the length it announced (a truncated upload):
			// the bytes that came are not the request it meant, even when they parse.
			return nil, nil, reason.Wrap(reason.BodyInvalid, err, "the request body ended before the length its headers announced (Content-Length, or the last chunk)")
		}
		// A malformed chunked encoding or a client that went away mid-body: the client's fault,
		// answered (if anyone still listens) with 400, never a server error.
		return nil, nil, reason.Wrap(reason.BodyInvalid, err, "reading the request body failed")
	}
	if int64(len(data)) > limit {
		pb.put()
		return nil, nil, reason.New(reason.BodyTooLarge, "request body exceeds the limit of %d bytes", limit)
	}
	if r.ContentLength > 0 && int64(len(data)) < r.ContentLength {
		// the same, from a body reader that ended early with a plain EOF
		pb.put()
		return nil, nil, reason.New(reason.BodyInvalid, "request body ended after %d of the %d bytes its Content-Length announced", len(data), r.ContentLength)
	}
	ok = true
	return data, pb, nil
}

// bodyTimeoutMessage says which deadline ended the body read: kvroute's read_timeout, or an earlier
// one of the server's (Caddy's `servers { timeouts { read_body } }` applies to the whole request
// and fires first when it is shorter), so the 408 names the limit that was really hit.
func bodyTimeoutMessage(elapsed, timeout time.Duration, ours bool) string {
	if ours && elapsed >= timeout-timeout/20 { // within 5 %: our deadline (set just before the read)
		return fmt.Sprintf("request body not received within %s (kvroute read_timeout)", timeout)
	}
	return fmt.Sprintf("request body not received within %s (the server's read timeout)", elapsed.Round(100*time.Millisecond))
}

// Chunk sizes of readChunks: the first chunk, and the largest one.
const (
	firstBodyChunk = 64 << 10
	maxBodyChunk   = 4 << 20
)

// readChunks reads r to its end into chunks that grow with the bytes received (64 KiB doubling
// to 4 MiB), then copies them once into a slice of the exact length. A bytes.Buffer doubles and
// copies as it grows and keeps its spare capacity: a 48 MiB body allocated 136 MiB and kept a
// 68 MiB buffer for the whole request; here the peak is the body plus its chunks and what is kept
// is the body. sizeHint (the Content-Length, -1 when unknown) only sizes the first chunk up to
// maxBodyChunk: a header cannot make the router allocate what the client does not send.
//
// A body that fits its first chunk is returned in that chunk, which comes from a pool when the
// hint is in a pooled size class (bodypool.go): the caller then owns the *pooledBuf and gives it
// back (replayBody.done, or put) when the request is over.
func readChunks(r io.Reader, sizeHint int64) ([]byte, *pooledBuf, error) {
	next := int64(firstBodyChunk)
	if sizeHint >= 0 && sizeHint < maxBodyChunk {
		next = sizeHint + 1 // the +1 sees EOF without a second chunk
	}
	var chunks [][]byte
	total := 0
	pb := getBodyBuf(next)
	for {
		var c []byte
		if len(chunks) == 0 && pb != nil {
			c = pb.b[:next]
		} else {
			c = make([]byte, next)
		}
		n, err := fill(r, c)
		chunks, total = append(chunks, c[:n]), total+n
		if err == io.EOF {
			break
		}
		if err != nil {
			pb.put()
			return nil, nil, err
		}
		next = min(2*next, maxBodyChunk)
	}
	if len(chunks) == 1 && pb != nil {
		return chunks[0][:total:total], pb, nil
	}
	if len(chunks) == 1 && cap(chunks[0])-total <= 4<<10 {
		return chunks[0][:total:total], nil, nil // the hint was right: no copy
	}
	out := make([]byte, 0, total)
	for _, c := range chunks {
		out = append(out, c...)
	}
	pb.put()
	return out, nil, nil
}

// fill reads r into c until c is full or r fails, and returns r's own error: io.EOF when the body
// ended, io.ErrUnexpectedEOF when the connection did before the body's framing said (a chunked
// upload cut short). io.ReadFull reports both as ErrUnexpectedEOF on a partly filled c, so a
// truncated chunked body passed as whole.
func fill(r io.Reader, c []byte) (int, error) {
	n := 0
	for n < len(c) {
		k, err := r.Read(c[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// replayBody is the request body handed to the proxy: the exact bytes read from the client,
// immutable. Every proxy attempt gets its own reader over them (attach, called by the kvroute
// selection policy for each attempt), so a retry on another upstream resends the same bytes even
// when an earlier attempt consumed part of its reader, and nothing that wraps the body in between
// can see it restart: reverse_proxy's `request_buffers` reads the first N bytes of the installed
// body into its own buffer before the first attempt; rewinding a shared reader under that buffer
// made the upstream receive those N bytes and then the whole body again (issue 11 item 3).
//
// When the bytes are in a pooled buffer (bodypool.go), the handler calls done when the request
// is over: every reader is closed and the buffer goes back to its pool.
type replayBody struct {
	data []byte
	buf  *pooledBuf // holds data, or nil

	mu      sync.Mutex
	readers []*bodyReader
	over    bool
}

// newReplayBody replays b; buf, when not nil, is the request's pooled body buffer (b may be
// another slice: a spliced body), given back by done.
func newReplayBody(b []byte, buf *pooledBuf) *replayBody { return &replayBody{data: b, buf: buf} }

// reader returns a fresh reader over the bytes; its Close frees nothing (the server frees the
// client's body, done the pooled buffer). After done it returns a closed reader.
func (b *replayBody) reader() io.ReadCloser {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.over:
		return &bodyReader{closed: true}
	case len(b.data) == 0:
		return http.NoBody
	case b.buf == nil:
		return io.NopCloser(bytes.NewReader(b.data))
	}
	r := &bodyReader{data: b.data}
	b.readers = append(b.readers, r)
	return r
}

// done ends the request's use of the bytes: every reader handed out is closed (an attempt still
// writing the body to an upstream gets errBodyDone), and a pooled buffer goes back to its pool.
// The bytes must not be used after.
func (b *replayBody) done() {
	if b == nil {
		return
	}
	b.mu.Lock()
	rs, buf := b.readers, b.buf
	b.readers, b.over, b.buf, b.data = nil, true, nil, nil
	b.mu.Unlock()
	for _, r := range rs {
		_ = r.Close()
	}
	buf.put()
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

package caddymodule

import (
	"bufio"
	"errors"
	"net"
	"net/http"

	"github.com/kvroute/kvroute/routing/scheduler"
)

// firstByteWriter releases a request's prefill load when the first byte of the worker's response
// body reaches the client: the worker has finished prefill by then. Headers alone do not count:
// a streaming server may send them before prefill starts.
type firstByteWriter struct {
	http.ResponseWriter
	handle *scheduler.Handle
}

func (w *firstByteWriter) Write(b []byte) (int, error) {
	w.handle.FirstByte()
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer (Flush for SSE, deadlines).
func (w *firstByteWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// FlushError forwards streaming flushes through http.ResponseController, which unwraps the writers
// below: Caddy's ResponseWriterWrapper implements Unwrap, not http.Flusher, so a type assertion
// would silently drop every flush and the reverse proxy's server-sent events would reach the client
// only when the response ended.
func (w *firstByteWriter) FlushError() error {
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush is FlushError for callers that use http.Flusher.
func (w *firstByteWriter) Flush() { _ = w.FlushError() }

// Hijack forwards connection hijacking (websocket upgrades through the proxy).
func (w *firstByteWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := w.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("hijacking not supported")
}

func costsOrEmpty(c map[string]float64) map[string]float64 {
	if c == nil {
		return map[string]float64{}
	}
	return c
}

package caddymodule

import (
	"bufio"
	"net"
	"net/http"

	"github.com/kvroute/kvroute/routing/scheduler"
)

// firstByteWriter wraps the response writer of a request the kvroute handler forwards. It releases
// the request's prefill load (handle, nil when nothing is accounted) when the first byte of the
// worker's response body reaches the client: the worker has finished prefill by then. Headers
// alone do not count: a streaming server may send them before prefill starts. It also keeps one
// X-Request-Id on the response (the proxy adds the upstream's echo of it to the one the handler
// set).
//
// Flush, Hijack and deadlines go through http.ResponseController on the wrapped writer, never a
// type assertion: the writers below it in Caddy's chain (encode's FlushError, the access log's
// recorder and `header { defer }`, which only offer Unwrap) are not http.Flusher themselves, and
// a swallowed Flush buffers SSE streams until the response ends (issue 11).
type firstByteWriter struct {
	http.ResponseWriter
	handle    *scheduler.Handle
	requestID string
	// onFirst runs at the first status or body byte (the decision is counted then, when the
	// worker that answers is known); it must be idempotent.
	onFirst func()

	// wrote is set once a final status went to the client: an upstream failure after that
	// cannot be answered with an error body any more.
	wrote bool
}

// WriteHeader sets the request id once and forwards the status.
func (w *firstByteWriter) WriteHeader(status int) {
	w.Header().Set("X-Request-Id", w.requestID)
	if w.onFirst != nil {
		w.onFirst()
	}
	if status >= 200 || status == http.StatusSwitchingProtocols {
		w.wrote = true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *firstByteWriter) Write(b []byte) (int, error) {
	w.wrote = true
	if w.onFirst != nil {
		w.onFirst()
	}
	if w.handle != nil {
		w.handle.FirstByte()
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer (Flush for SSE, deadlines).
func (w *firstByteWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// FlushError forwards a streaming flush down the whole writer chain and reports its error;
// http.ResponseController prefers it over Flush.
func (w *firstByteWriter) FlushError() error {
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush forwards a streaming flush for callers that assert http.Flusher.
func (w *firstByteWriter) Flush() { _ = w.FlushError() }

// Hijack forwards connection hijacking (websocket upgrades through the proxy).
func (w *firstByteWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.wrote = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func costsOrEmpty(c map[string]float64) map[string]float64 {
	if c == nil {
		return map[string]float64{}
	}
	return c
}

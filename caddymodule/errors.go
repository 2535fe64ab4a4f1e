package caddymodule

import (
	"encoding/json"
	"net/http"

	"github.com/kvroute/kvroute/reason"
)

// errorBody is the JSON error body of DESIGN.md §8.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    reason.Code `json:"code"`
	Message string      `json:"message"`
}

// writeError answers a kvroute client error (a 4xx reason code, the request is not forwarded) or
// an upstream error (502/503/504, no worker answered) with
// `{"error": {"code": "<reason>", "message": "..."}}`. It is the only place that writes kvroute's
// own error responses. The message is the reason's human text, never the request's content.
func writeError(w http.ResponseWriter, e *reason.Error) {
	status := e.Code.HTTPStatus()
	if status == 0 {
		status = http.StatusBadRequest
	}
	b, err := json.Marshal(errorBody{Error: errorDetail{Code: e.Code, Message: e.Message}})
	if err != nil { // cannot happen: plain strings
		b = []byte(`{"error":{"code":"` + string(e.Code) + `","message":""}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	// Send the body now. When the request body was not read to its end (413, 408), the HTTP/2
	// server resets the stream as the handler returns, and it queues that RST_STREAM ahead of a
	// DATA frame still buffered: the client got the headers and a Content-Length but no body.
	// A flush writes the DATA frame before the handler returns (HTTP/1.1 is unaffected).
	_ = http.NewResponseController(w).Flush()
}

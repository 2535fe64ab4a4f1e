package caddymodule

import (
	"encoding/json"
	"net/http"

	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/router"
)

// errorBody is the JSON error body of DESIGN.md §8.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	// Type is set only in the Anthropic shape (anthropicErrorType).
	Type    string      `json:"type,omitempty"`
	Code    reason.Code `json:"code"`
	Message string      `json:"message"`
}

// anthropicErrorBody is the error body of an Anthropic Messages request: Anthropic's own shape
// (`{"type": "error", "error": {"type": "invalid_request_error", "message": "..."}}`, what
// @anthropic-ai/sdk and anthropic-sdk-python read into their APIError), with DESIGN.md §8's
// `code` kept inside `error`, so the reason code is there for both kinds of client.
type anthropicErrorBody struct {
	Type  string      `json:"type"`
	Error errorDetail `json:"error"`
}

// errorShape is which JSON form a request's errors take.
type errorShape uint8

const (
	shapeOpenAI    errorShape = iota // DESIGN.md §8 `{"error": {"code", "message"}}`
	shapeAnthropic                   // anthropicErrorBody
)

// shapeFor is the error shape of a request to path with header h: Anthropic's for an Anthropic
// Messages path (router.PathMessages) and for any request carrying `anthropic-version` (every
// Anthropic SDK sends it, also to /v1/messages/count_tokens), the OpenAI form otherwise.
func shapeFor(path string, h http.Header) errorShape {
	if router.ClassifyPath(path) == router.PathMessages || h.Get("anthropic-version") != "" {
		return shapeAnthropic
	}
	return shapeOpenAI
}

// anthropicErrorType is Anthropic's error type for an HTTP status
// (docs.anthropic.com, "Errors": HTTP errors).
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable:
		return "overloaded_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// writeError answers a kvroute client error (a 4xx reason code, the request is not forwarded) or
// an upstream error (502/503/504, no worker answered) with
// `{"error": {"code": "<reason>", "message": "..."}}`, or, in the Anthropic shape,
// `{"type": "error", "error": {"type": "<anthropic type>", "code": "<reason>", "message": "..."}}`.
// It is the only place that writes kvroute's own error responses. The message is the reason's
// human text, never the request's content.
func writeError(w http.ResponseWriter, shape errorShape, e *reason.Error) {
	status := e.Code.HTTPStatus()
	if status == 0 {
		status = http.StatusBadRequest
	}
	var v any = errorBody{Error: errorDetail{Code: e.Code, Message: e.Message}}
	if shape == shapeAnthropic {
		v = anthropicErrorBody{Type: "error", Error: errorDetail{Type: anthropicErrorType(status), Code: e.Code, Message: e.Message}}
	}
	b, err := json.Marshal(v)
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

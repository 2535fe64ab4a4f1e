package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kvroute/kvroute/reason"
)

// TestErrorShapes: kvroute's own errors keep DESIGN.md §8's form for OpenAI paths and take
// Anthropic's for /v1/messages and any request with anthropic-version, with the reason code in
// error.code either way and Anthropic's error type from the status.
func TestErrorShapes(t *testing.T) {
	anth := http.Header{"Anthropic-Version": {"2023-06-01"}}
	for _, c := range []struct {
		path string
		h    http.Header
		code reason.Code
		want string
	}{
		{"/v1/chat/completions", nil, reason.MediaURLBlocked, `{"error":{"code":"media_url_blocked","message":"m"}}`},
		{"/v1/responses", nil, reason.BodyTooLarge, `{"error":{"code":"body_too_large","message":"m"}}`},
		{"/v1/messages", nil, reason.MediaURLBlocked, `{"type":"error","error":{"type":"invalid_request_error","code":"media_url_blocked","message":"m"}}`},
		{"/v1/messages", nil, reason.BodyTooLarge, `{"type":"error","error":{"type":"request_too_large","code":"body_too_large","message":"m"}}`},
		{"/v1/messages", nil, reason.UpstreamUnavailable, `{"type":"error","error":{"type":"overloaded_error","code":"upstream_unavailable","message":"m"}}`},
		{"/v1/messages", nil, reason.UpstreamTimeout, `{"type":"error","error":{"type":"timeout_error","code":"upstream_timeout","message":"m"}}`},
		{"/v1/messages/count_tokens", anth, reason.UpstreamError, `{"type":"error","error":{"type":"api_error","code":"upstream_error","message":"m"}}`},
	} {
		rec := httptest.NewRecorder()
		writeError(rec, shapeFor(c.path, c.h), reason.New(c.code, "m"))
		if got := rec.Body.String(); got != c.want+"\n" || rec.Code != c.code.HTTPStatus() {
			t.Errorf("%s %s: %d %s, want %d %s", c.path, c.code, rec.Code, got, c.code.HTTPStatus(), c.want)
		}
	}
}

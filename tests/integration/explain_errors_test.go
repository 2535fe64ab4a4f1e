package integration

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/caddymodule"
)

// TestExplainBodyErrors: explain answers a body it cannot take the way the handler does — kvroute's
// JSON error body with its reason code — and a wrong method in Caddy's admin form. Before, an
// oversized body got Caddy's `{"error":"body too large"}` without a code (found by a user test).
func TestExplainBodyErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: streams a body one byte over the 64 MiB limit into explain, ~3 s")
	}
	h := startHarness(t, []simSpec{{ID: "expl-a", Model: "qwen"}})
	post := func(body io.Reader) (int, string) {
		t.Helper()
		res, err := h.client.Post(h.admin+"/kvroute/explain", "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	huge := io.LimitReader(neverEnding(' '), caddymodule.DefaultMaxBodySize+1)
	if status, body := post(huge); status != 413 ||
		body != `{"error":{"code":"body_too_large","message":"request body exceeds the limit of 67108864 bytes"}}`+"\n" {
		t.Errorf("oversized body: %d %s", status, body)
	}
	if status, body := post(strings.NewReader(`{"messages": [`)); status != 400 || !strings.HasPrefix(body,
		`{"error":{"code":"body_invalid","message":"request body is not one valid JSON object: invalid JSON at byte 14: unexpected end of input"}}`) {
		t.Errorf("truncated body: %d %s", status, body)
	}
	req, _ := http.NewRequest(http.MethodGet, h.admin+"/kvroute/explain", nil)
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 405 || !strings.Contains(string(b), "method not allowed") {
		t.Errorf("GET: %d %s", res.StatusCode, b)
	}
}

// neverEnding is an endless reader of one byte. It fills p by doubling copies: filled one byte
// at a time, 64 MiB took over 10 s under -race on a loaded machine, and Caddy's admin server ended
// the upload at its read timeout (a 408 body_timeout, a 400 before), not the limit.
type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = byte(b)
	for n := 1; n < len(p); n *= 2 {
		copy(p[n:], p[:n])
	}
	return len(p), nil
}

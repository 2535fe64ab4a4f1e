package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/caddymodule"
	"github.com/kvroute/kvroute/internal/testkit/caddytest"
	"github.com/kvroute/kvroute/routing/router"
)

// firstDecider sends each request first to the endpoint named by its X-Test-First header, with
// the live worker as the next-best candidate: the test picks which attempt fails.
type firstDecider struct{ live string }

func (d firstDecider) Decide(_ context.Context, in *caddymodule.RouteInput) (*caddymodule.Decision, error) {
	first := in.Request.Header.Get("X-Test-First")
	return &caddymodule.Decision{Result: router.Result{Chosen: &router.Candidate{WorkerID: "first", Endpoint: first},
		Ranked: []router.Candidate{{WorkerID: "w0", Endpoint: d.live, Available: true}}}}, nil
}

// TestRequestBuffersMatrix sends a 100 KiB chat body through the Caddyfile.example chain for every
// combination of reverse_proxy `request_buffers` (none, 4 KiB, larger than the body), sized and
// chunked uploads, and no retry / a retry after a dial error / a retry after an upstream that read
// 8 KiB of the body and closed; the worker must receive the client's exact bytes with an exact
// Content-Length (issue 11 item 3: with 4 KiB buffers the upstream got the first 4096 bytes and
// then the whole body again).
func TestRequestBuffersMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: sends a 100 KiB body for 18 combinations of request_buffers, chunking and retries, ~2 s")
	}
	live := newFakeWorker(t, "w0")
	partial := newPartialUpstream(t, 8<<10)
	dead := fmt.Sprintf("127.0.0.1:%d", caddytest.Port(t))
	body := chatBody(strings.Repeat("0123456789abcdef", 100<<10/16))
	sum := sha256.Sum256(body)
	wantSum := hex.EncodeToString(sum[:])

	for _, buffers := range []string{"", "4KiB", "1MiB"} {
		proxy := "\t\t\tlb_retries 1\n\t\t\tlb_retry_match {\n\t\t\t\tmethod POST\n\t\t\t}\n"
		if buffers != "" {
			proxy += "\t\t\trequest_buffers " + buffers + "\n"
		}
		t.Run("request_buffers="+buffers, func(t *testing.T) {
			e := startEdge(t, edgeConfig{Workers: []string{live.addr(), dead, partial.addr()}, Proxy: proxy})
			runningApp(t).SetDecider(firstDecider{live: live.addr()})
			cl := e.client(false) // HTTP/1.1: chunked uploads are real Transfer-Encoding
			defer cl.CloseIdleConnections()
			for _, chunked := range []bool{false, true} {
				for _, first := range []struct{ name, addr string }{{"no-retry", live.addr()}, {"retry-after-dial-error", dead}, {"retry-after-partial-read", partial.addr()}} {
					name := fmt.Sprintf("chunked=%v/%s", chunked, first.name)
					t.Run(name, func(t *testing.T) {
						id := "rb-" + strings.NewReplacer("/", "-", "=", "-").Replace(buffers+name)
						req, _ := http.NewRequest(http.MethodPost, e.https+"/v1/chat/completions", bytes.NewReader(body))
						if chunked {
							req.Body = io.NopCloser(bytes.NewReader(body))
							req.ContentLength = -1
						}
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("X-Request-Id", id)
						req.Header.Set("X-Test-First", first.addr)
						res, err := cl.Do(req)
						if err != nil {
							t.Fatal(err)
						}
						b, _ := io.ReadAll(res.Body)
						res.Body.Close()
						got := live.lastRequest()
						if res.StatusCode != 200 || got.RequestID != id {
							t.Fatalf("status %d body %.200s; worker's last request %q", res.StatusCode, b, got.RequestID)
						}
						if got.SHA256 != wantSum || got.BodyLen != len(body) || got.ContentLength != fmt.Sprint(len(body)) {
							t.Errorf("worker received %d bytes sha256 %s Content-Length %s, want %d bytes sha256 %s",
								got.BodyLen, got.SHA256, got.ContentLength, len(body), wantSum)
						}
					})
				}
			}
		})
	}
}

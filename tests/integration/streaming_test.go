package integration

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// lockstepUpstream is an OpenAI-style streaming worker that sends SSE event k+1 only after the
// test client reported receiving event k (through the request's ack channel, keyed by its
// X-Request-Id). Any buffering between the two leaves the client waiting for an event the
// upstream will not send: the test deadlocks until its context ends, whatever the timing.
type lockstepUpstream struct {
	srv *httptest.Server

	mu   sync.Mutex
	acks map[string]chan int // request id → events the client received
	seen map[string]string   // request id → body it received
}

const lockstepEvents = 5 // content events before the usage event and [DONE]

func newLockstepUpstream(t *testing.T) *lockstepUpstream {
	u := &lockstepUpstream{acks: map[string]chan int{}, seen: map[string]string{}}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *lockstepUpstream) addr() string { return u.srv.Listener.Addr().String() }

func (u *lockstepUpstream) expect(id string) chan int {
	ch := make(chan int, 1)
	u.mu.Lock()
	u.acks[id] = ch
	u.mu.Unlock()
	return ch
}

func (u *lockstepUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		return
	}
	id := r.Header.Get("X-Request-Id")
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	ack := u.acks[id]
	u.seen[id] = string(body)
	u.mu.Unlock()
	if ack == nil {
		http.Error(w, "unexpected request "+id, http.StatusBadRequest)
		return
	}
	var req struct {
		Stream        bool `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(body, &req)
	chat := strings.HasSuffix(r.URL.Path, "/chat/completions")
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	for k := 0; k < lockstepEvents; k++ {
		var ev map[string]any
		if chat {
			ev = map[string]any{"id": "chatcmpl-" + id, "object": "chat.completion.chunk", "model": "qwen",
				"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": fmt.Sprint("tok", k)}}}}
		} else {
			ev = map[string]any{"id": "cmpl-" + id, "object": "text_completion", "model": "qwen",
				"choices": []any{map[string]any{"index": 0, "text": fmt.Sprint("tok", k)}}}
		}
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if err := rc.Flush(); err != nil {
			return
		}
		select { // the next event only after the client has this one
		case <-ack:
		case <-r.Context().Done():
			return
		}
	}
	if req.StreamOptions.IncludeUsage {
		obj := "chat.completion.chunk"
		if !chat {
			obj = "text_completion"
		}
		fmt.Fprintf(w, `data: {"id":"x","object":%q,"model":"qwen","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n",
			obj, lockstepEvents, 9+lockstepEvents)
		_ = rc.Flush()
		select {
		case <-ack:
		case <-r.Context().Done():
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestStreamingLockstep streams chat and completions responses through the Caddyfile.example
// chain over HTTP/1.1 and HTTP/2 (TLS, Caddy's internal CA) and plain HTTP/1.1, with and without
// gzip, and requires every SSE event to reach the client before the upstream produces the next
// (issue 11 item 1). The kvroute handler's response writer must pass Flush through `encode`,
// `header { defer }` and the access log's recorder.
func TestStreamingLockstep(t *testing.T) {
	up := newLockstepUpstream(t)
	e := startEdge(t, edgeConfig{Workers: []string{up.addr()}})

	cases := []struct {
		name, base string
		h2         bool
		enc        string // Accept-Encoding
	}{
		{"h1-tls", e.https, false, ""},
		{"h1-tls-gzip", e.https, false, "gzip"},
		{"h1-tls-zstd", e.https, false, "zstd"},
		{"h2-tls", e.https, true, ""},
		{"h2-tls-gzip", e.https, true, "gzip"},
		{"h2-tls-zstd", e.https, true, "zstd"},
		{"h1-plain-gzip", e.http, false, "gzip"},
	}
	n := 0
	for _, c := range cases {
		for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
			t.Run(c.name+path, func(t *testing.T) {
				n++
				id := fmt.Sprintf("lockstep-%d", n)
				ack := up.expect(id)
				var body []byte
				if strings.HasSuffix(path, "/chat/completions") {
					body = mustJSON(t, map[string]any{"model": "qwen", "stream": true, "stream_options": map[string]any{"include_usage": true},
						"messages": []map[string]any{{"role": "user", "content": "count slowly " + id}}})
				} else {
					body = mustJSON(t, map[string]any{"model": "qwen", "stream": true, "stream_options": map[string]any{"include_usage": true},
						"prompt": "count slowly " + id})
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Request-Id", id)
				if c.enc != "" {
					req.Header.Set("Accept-Encoding", c.enc)
				}
				cl := e.client(c.h2)
				if !strings.HasPrefix(c.base, "https") {
					cl = &http.Client{Transport: &http.Transport{DisableCompression: true}}
				}
				defer cl.CloseIdleConnections()
				res, err := cl.Do(req)
				if err != nil {
					t.Fatalf("POST: %v", err)
				}
				defer res.Body.Close()
				if wantMajor := map[bool]int{true: 2, false: 1}[c.h2]; res.ProtoMajor != wantMajor || res.StatusCode != 200 {
					t.Fatalf("status %d proto %s", res.StatusCode, res.Proto)
				}
				if res.ContentLength != -1 || res.Header.Get("Content-Length") != "" {
					t.Errorf("stream answered with Content-Length %d", res.ContentLength)
				}
				if res.Header.Get("X-Kvroute-Worker") != "w0" || res.Header.Get("X-Request-Id") != id {
					t.Errorf("routing headers: worker %q request id %q", res.Header.Get("X-Kvroute-Worker"), res.Header.Get("X-Request-Id"))
				}
				var rd io.Reader = res.Body
				if ce := res.Header.Get("Content-Encoding"); ce != c.enc {
					t.Fatalf("Content-Encoding %q, want %q (the encode handler must wrap the stream)", ce, c.enc)
				}
				switch c.enc {
				case "gzip":
					zr, err := gzip.NewReader(res.Body)
					if err != nil {
						t.Fatalf("gzip header not flushed: %v", err)
					}
					rd = zr
				case "zstd":
					// synchronous decoding: each flushed zstd block is returned as it arrives
					zr, err := zstd.NewReader(res.Body, zstd.WithDecoderConcurrency(1))
					if err != nil {
						t.Fatal(err)
					}
					defer zr.Close()
					rd = zr
				}
				br := bufio.NewReader(rd)
				var events []string
				for {
					ev, err := readEvent(br)
					if err != nil {
						t.Fatalf("after %d events %q: %v (the stream is buffered: the upstream waits for this client)", len(events), events, err)
					}
					events = append(events, ev)
					if ev == "[DONE]" {
						break
					}
					ack <- len(events)
				}
				if len(events) != lockstepEvents+2 {
					t.Fatalf("got %d events, want %d content + usage + [DONE]: %q", len(events), lockstepEvents, events)
				}
				for k := 0; k < lockstepEvents; k++ {
					if !strings.Contains(events[k], fmt.Sprintf(`"tok%d"`, k)) {
						t.Errorf("event %d = %s", k, events[k])
					}
				}
				if !strings.Contains(events[lockstepEvents], `"choices":[]`) || !strings.Contains(events[lockstepEvents], `"total_tokens":14`) {
					t.Errorf("usage event = %s", events[lockstepEvents])
				}
				up.mu.Lock()
				seen := up.seen[id]
				up.mu.Unlock()
				if seen != string(body) {
					t.Errorf("upstream received %q, want the client's body", seen)
				}
			})
		}
	}
	// the access log recorded the streams (the `log` directive was in the chain)
	logData, err := os.ReadFile(e.accessLog)
	if err != nil || !bytes.Contains(logData, []byte("lockstep-1")) {
		t.Errorf("access log %s lacks the streamed requests: %v", e.accessLog, err)
	}
}

// readEvent returns the data of the next SSE event (lines up to a blank line).
func readEvent(br *bufio.Reader) (string, error) {
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if len(data) > 0 {
				return strings.Join(data, "\n"), nil
			}
			continue
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = append(data, d)
		}
	}
}

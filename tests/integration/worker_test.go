package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeWorker is a minimal OpenAI-style upstream that records what reaches it and can die like a
// SIGKILLed process (kill: listener and every connection closed at once, no deregistration) and
// come back on the same address (start). GET /health answers 200 and is not counted. The request
// header X-Test-Mode picks the response: "" a JSON completion naming the worker after a 5 ms
// generation (so requests are in flight at a kill), "sse-step" one SSE event, then (after release)
// a second one, "sse-forever" an event every 20 ms until the client goes away.
type fakeWorker struct {
	id   string
	host string     // 127.0.0.1:port, kept across kill and start
	mu   sync.Mutex // guards srv and last
	srv  *http.Server

	count    atomic.Int64 // requests received (not /health)
	inflight atomic.Int64 // requests being answered
	// gate, when set before the first request, holds every default-mode request until a value is
	// received (or the request ends).
	gate     chan struct{}
	release  chan struct{}  // sse-step: closed by the test to let the second event go
	canceled chan time.Time // sse-forever: when the request context ended
	last     seenRequest
}

type seenRequest struct {
	ContentLength string // the header as received
	BodyLen       int
	SHA256        string
	RequestID     string
}

// newFakeWorker starts a fakeWorker on a new loopback port; it is killed at the test's end.
func newFakeWorker(t *testing.T, id string) *fakeWorker {
	t.Helper()
	fw := &fakeWorker{id: id, release: make(chan struct{}), canceled: make(chan time.Time, 16)}
	fw.start(t)
	t.Cleanup(func() { fw.kill() })
	return fw
}

func (fw *fakeWorker) addr() string { return fw.host }

// start serves on the worker's address (a new loopback port the first time).
func (fw *fakeWorker) start(t *testing.T) {
	t.Helper()
	host := fw.host
	if host == "" {
		host = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", host)
	if err != nil {
		t.Fatalf("listening on %s: %v", host, err)
	}
	fw.host = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(fw.serve)}
	fw.mu.Lock()
	fw.srv = srv
	fw.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// kill closes the listener and every connection; it returns the requests in flight then.
func (fw *fakeWorker) kill() int64 {
	fw.mu.Lock()
	srv := fw.srv
	fw.srv = nil
	fw.mu.Unlock()
	n := fw.inflight.Load()
	if srv != nil {
		_ = srv.Close()
	}
	return n
}

func (fw *fakeWorker) lastRequest() seenRequest {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.last
}

func (fw *fakeWorker) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		return
	}
	fw.inflight.Add(1)
	defer fw.inflight.Add(-1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	sum := sha256.Sum256(body)
	seen := seenRequest{ContentLength: r.Header.Get("Content-Length"), BodyLen: len(body),
		SHA256: hex.EncodeToString(sum[:]), RequestID: r.Header.Get("X-Request-Id")}
	if r.ContentLength >= 0 {
		// net/http moves Content-Length out of the header map for server requests
		seen.ContentLength = fmt.Sprint(r.ContentLength)
	}
	fw.mu.Lock()
	fw.last = seen
	fw.mu.Unlock()
	fw.count.Add(1)

	rc := http.NewResponseController(w)
	switch r.Header.Get("X-Test-Mode") {
	case "sse-step":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"n\":1}\n\n")
		_ = rc.Flush()
		select {
		case <-fw.release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: {\"n\":2}\n\ndata: [DONE]\n\n")
		_ = rc.Flush()
	case "sse-forever":
		w.Header().Set("Content-Type", "text/event-stream")
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			fmt.Fprintf(w, "data: {\"n\":%d}\n\n", i)
			_ = rc.Flush()
			select {
			case <-r.Context().Done():
				fw.canceled <- time.Now()
				return
			case <-t.C:
			}
		}
	default:
		if fw.gate != nil {
			select {
			case <-fw.gate:
			case <-r.Context().Done():
			}
		}
		time.Sleep(5 * time.Millisecond) // a short generation, so requests are in flight at a kill
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "chat.completion", "system_fingerprint": fw.id,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "ok"}}},
			"usage":   map[string]any{"prompt_tokens": 1, "prompt_tokens_details": map[string]any{"cached_tokens": 0}}})
	}
}

// partialUpstream accepts connections, reads up to limit bytes of each, and closes it: an upstream
// that dies after consuming part of the request body.
type partialUpstream struct {
	ln    net.Listener
	limit int64
	read  atomic.Int64 // bytes read over all connections
	wg    sync.WaitGroup
}

func newPartialUpstream(t *testing.T, limit int64) *partialUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &partialUpstream{ln: ln, limit: limit}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n, _ := io.CopyN(io.Discard, c, limit)
			p.read.Add(n)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); p.wg.Wait() })
	return p
}

func (p *partialUpstream) addr() string { return p.ln.Addr().String() }

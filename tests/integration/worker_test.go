package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeWorker is a minimal OpenAI-style upstream that records what reaches it. The request header
// X-Test-Mode picks the response: "" a JSON completion naming the worker, "sse-step" one SSE event,
// then (after release) a second one, "sse-forever" an event every 20 ms until the client goes away.
type fakeWorker struct {
	id  string
	srv *httptest.Server

	count    atomic.Int64
	release  chan struct{}  // sse-step: closed by the test to let the second event go
	canceled chan time.Time // sse-forever: when the request context ended
	mu       sync.Mutex     // guards last
	last     seenRequest
}

type seenRequest struct {
	ContentLength string // the header as received
	BodyLen       int
	SHA256        string
	RequestID     string
}

func newFakeWorker(t *testing.T, id string) *fakeWorker {
	t.Helper()
	fw := &fakeWorker{id: id, release: make(chan struct{}), canceled: make(chan time.Time, 16)}
	fw.srv = httptest.NewServer(http.HandlerFunc(fw.serve))
	t.Cleanup(fw.srv.Close)
	return fw
}

func (fw *fakeWorker) addr() string { return fw.srv.Listener.Addr().String() }

func (fw *fakeWorker) lastRequest() seenRequest {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.last
}

func (fw *fakeWorker) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	sum := sha256.Sum256(body)
	fw.mu.Lock()
	fw.last = seenRequest{ContentLength: r.Header.Get("Content-Length"), BodyLen: len(body),
		SHA256: hex.EncodeToString(sum[:]), RequestID: r.Header.Get("X-Request-Id")}
	fw.mu.Unlock()
	fw.count.Add(1)
	if r.ContentLength >= 0 {
		// net/http moves Content-Length out of the header map for server requests
		fw.mu.Lock()
		fw.last.ContentLength = fmt.Sprint(r.ContentLength)
		fw.mu.Unlock()
	}

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
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "chat.completion", "system_fingerprint": fw.id,
			"usage": map[string]any{"prompt_tokens": 1, "prompt_tokens_details": map[string]any{"cached_tokens": 0}}})
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

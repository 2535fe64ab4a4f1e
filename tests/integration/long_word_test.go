package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/cputime"
	"github.com/kvroute/kvroute/internal/testkit/memtest"
)

// discardWorker answers every request with a small chat completion after reading and discarding
// the body: a worker whose own memory does not count in the process's heap.
func discardWorker(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// heapPeak samples the heap's live objects every millisecond until stop is called and returns
// the highest value seen.
func heapPeak() (stop func() int64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			metrics.Read(s)
			if v := int64(s[0].Value.Uint64()); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() int64 { close(done); wg.Wait(); return peak.Load() }
}

// TestLongWordThroughCaddy: a chat message of one 22 MB run of "x" (one pre-token, inside the
// 64 MiB body limit) through the Caddyfile.example chain (TLS, encode, header, log) is forwarded
// intact with fallback prompt_too_costly (load-only routing), and the heap it needs at its peak
// (the body, the rendered prompt, the ids slice Encode sizes from the text) stays under 6 bytes
// per body byte; the unbounded BPE of that word allocated 55 bytes per byte (1.2 GB). Then 16
// such requests at once: every one is answered, the heap peak stays under 16 times the single
// request's bound, and an ordinary request right after is routed exactly.
func TestLongWordThroughCaddy(t *testing.T) {
	e := startEdge(t, edgeConfig{Workers: []string{discardWorker(t)}})
	cl := e.client(false)
	defer cl.CloseIdleConnections()
	body, err := json.Marshal(map[string]any{"model": "qwen", "messages": []map[string]string{
		{"role": "user", "content": strings.Repeat("x", 22<<20)}}})
	if err != nil {
		t.Fatal(err)
	}
	ordinary := func(text string) []byte {
		b, _ := json.Marshal(map[string]any{"model": "qwen", "messages": []map[string]string{{"role": "user", "content": text}}})
		return b
	}
	post := func(b []byte) (int, string) {
		res, err := cl.Post(e.https+"/v1/chat/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Errorf("POST: %v", err)
			return -1, ""
		}
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode, res.Header.Get("X-Kvroute-Fallback")
	}
	if st, fb := post(ordinary("warm up")); st != http.StatusOK || fb != "" {
		t.Fatalf("ordinary request: status %d fallback %q", st, fb)
	}

	base := memtest.LiveHeap()
	cpu0 := cputime.Process()
	stop := heapPeak()
	st, fb := post(body)
	peak := stop() - base
	cpu := cputime.Process() - cpu0
	t.Logf("one 22 MB word: status %d fallback %q, process CPU %v, heap peak +%d MiB (%.1f bytes per body byte)",
		st, fb, cpu, peak>>20, float64(peak)/float64(len(body)))
	if st != http.StatusOK || fb != "prompt_too_costly" {
		t.Fatalf("one 22 MB word: status %d fallback %q, want 200 prompt_too_costly", st, fb)
	}
	if peak > 6*int64(len(body)) {
		t.Fatalf("one 22 MB word: heap peak +%d bytes, want at most 6 per body byte (%d)", peak, 6*len(body))
	}

	base = memtest.LiveHeap()
	stop = heapPeak()
	var wg sync.WaitGroup
	var ok atomic.Int32
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, fb := post(body); st == http.StatusOK && fb == "prompt_too_costly" {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	peak = stop() - base
	t.Logf("16 at once: %d answered with prompt_too_costly, heap peak +%d MiB", ok.Load(), peak>>20)
	if ok.Load() != 16 {
		t.Fatalf("16 at once: %d of 16 answered 200 with prompt_too_costly", ok.Load())
	}
	if peak > 16*6*int64(len(body)) {
		t.Fatalf("16 at once: heap peak +%d bytes, want at most 16 x 6 per body byte", peak)
	}
	if st, fb := post(ordinary("still serving")); st != http.StatusOK || fb != "" {
		t.Fatalf("after the long words: status %d fallback %q", st, fb)
	}
	if grown := memtest.LiveHeap() - base; grown > 8<<20 {
		t.Fatalf("live heap after GC grew %d KiB over 17 long-word requests", grown>>10)
	}
}

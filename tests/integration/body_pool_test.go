package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPooledBodiesStayApart: kvroute reads request bodies into recycled buffers (caddymodule
// bodypool.go). Through the Caddyfile.example chain (TLS, HTTP/1.1 and HTTP/2 clients), 8
// clients send 240 chat requests of distinct bodies from 1 kB to 900 kB; one worker answers
// every fourth request before reading its body (and then reads it slowly), the case where the
// proxy may still be writing a body when the request is over. Every body that reached a worker
// whole must be the client's exact bytes: a buffer recycled too early would show another
// request's bytes.
func TestPooledBodiesStayApart(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: sends 240 bodies of up to 900 kB over HTTP/1.1 and HTTP/2 with a slow-reading worker, ~5 s")
	}
	var mu sync.Mutex
	seen := map[string]string{} // X-Body-SHA256 sent → sha256 of what the worker read
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		want := r.Header.Get("X-Body-SHA256")
		if want == "" { // not one of the test's requests (the edge's readiness probe)
			w.WriteHeader(http.StatusOK)
			return
		}
		if r.Header.Get("X-Early") == "1" {
			// answer first, then read the body slowly after the answer went out
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"early":true}`)
			_ = http.NewResponseController(w).Flush()
			time.Sleep(5 * time.Millisecond)
		}
		h := sha256.New()
		_, err := io.Copy(h, r.Body)
		if err != nil {
			return // the proxy gave up on this body: nothing whole to compare
		}
		mu.Lock()
		seen[want] = hex.EncodeToString(h.Sum(nil))
		mu.Unlock()
		if r.Header.Get("X-Early") != "1" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true}`)
		}
	})
	ws := httptest.NewServer(mux)
	t.Cleanup(ws.Close)
	e := startEdge(t, edgeConfig{Workers: []string{ws.Listener.Addr().String()}})
	var wg sync.WaitGroup
	errs := make(chan error, 240)
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := e.client(c%2 == 1)
			defer cl.CloseIdleConnections()
			rng := rand.New(rand.NewPCG(uint64(c), 3))
			for i := range 30 {
				n := 1000 + rng.IntN(900<<10)
				body := chatBody(fmt.Sprintf("client %d request %d ", c, i) + strings.Repeat(string(rune('a'+rng.IntN(26))), n))
				sum := sha256.Sum256(body)
				req, _ := http.NewRequest(http.MethodPost, e.https+"/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Body-SHA256", hex.EncodeToString(sum[:]))
				if i%4 == 3 {
					req.Header.Set("X-Early", "1")
				}
				res, err := cl.Do(req)
				if err != nil {
					errs <- fmt.Errorf("client %d request %d: %w", c, i, err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("client %d request %d: status %d", c, i, res.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	time.Sleep(200 * time.Millisecond) // the early answers' bodies finish reading
	mu.Lock()
	defer mu.Unlock()
	whole := 0
	for sent, got := range seen {
		if sent != got {
			t.Errorf("a worker read a body with sha256 %s for a request that sent %s", got, sent)
		}
		whole++
	}
	if whole < 180 {
		t.Errorf("only %d of 240 bodies reached the worker whole", whole)
	}
	t.Logf("%d bodies compared", whole)
}

package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// waitHealthy waits (bounded) until /kvroute/workers reports worker id healthy == want.
func waitHealthy(t *testing.T, e *edgeEnv, id string, want bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for workerHealthy(t, e, id) != want {
		if time.Now().After(deadline) {
			t.Fatalf("worker %s: /kvroute/workers healthy never became %v", id, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRevivedWorkerServesInsideFailWindow: with `fail_duration 30s` and `max_fails 1` (the
// passive health settings the docs used to recommend), a worker that failed, restarted and was
// revived by kvroute's probe must get traffic at once, not after Caddy's 30 s fail window: when
// the other worker then dies, every request is served by the revived worker instead of being
// answered 503 without an attempt.
func TestRevivedWorkerServesInsideFailWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: kills and restarts a worker and waits for kvroute's health probe to revive it, ~3 s")
	}
	w0, w1 := newFakeWorker(t, "w0"), newFakeWorker(t, "w1")
	app := "\t\thealth_checks {\n\t\t\tinterval 300ms\n\t\t\ttimeout 200ms\n\t\t}\n"
	e := startEdge(t, edgeConfig{Workers: []string{w0.addr(), w1.addr()}, Proxy: "\t\t\tfail_duration 30s\n\t\t\tmax_fails 1\n", App: app})
	cl := e.client(false)
	defer cl.CloseIdleConnections()
	send := func(n int) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, e.https+"/v1/chat/completions", bytes.NewReader(chatBody(fmt.Sprintf("fail window %d: %s", n, longText("fw", 8)))))
		req.Header.Set("Content-Type", "application/json")
		res, err := cl.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", n, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, res.Header.Get("X-Kvroute-Worker")
	}

	// 1. w1 dies; concurrent requests reach it until one fails with 502 (no retries: that is an
	// attempt to w1 that failed, which Caddy's passive health counts for 30 s).
	w1.kill()
	deadline := time.Now().Add(5 * time.Second)
	n := 0
	var failedAt time.Time
	var mu sync.Mutex
	for failedAt.IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("no attempt reached the dead worker w1: no 502")
		}
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			n++
			wg.Add(1)
			go func(n int) {
				defer wg.Done()
				if code, _ := send(n); code == http.StatusBadGateway {
					mu.Lock()
					failedAt = time.Now()
					mu.Unlock()
				}
			}(n)
		}
		wg.Wait()
	}
	waitHealthy(t, e, "w1", false)

	// 2. w1 restarts and kvroute's probe revives it; Caddy's fail window is still open.
	w1.start(t)
	waitHealthy(t, e, "w1", true)

	// 3. w0 dies and kvroute's probe marks it down: every request must go to w1.
	w0.kill()
	waitHealthy(t, e, "w0", false)
	served, failed := 0, 0
	for i := 0; i < 10; i++ {
		n++
		code, worker := send(n)
		if code == http.StatusOK && worker == "w1" {
			served++
		} else {
			failed++
			t.Logf("request %d: status %d worker %q", n, code, worker)
		}
	}
	if since := time.Since(failedAt); since >= 30*time.Second {
		t.Fatalf("the check ran %s after w1's failure, outside Caddy's 30s fail window", since)
	}
	t.Logf("%s after w1's counted failure (inside the 30s fail window): %d/10 served by the revived w1, %d failed", time.Since(failedAt).Round(time.Millisecond), served, failed)
	if failed != 0 {
		t.Errorf("%d of 10 requests failed while the revived worker w1 was up (Caddy fail window); want 0", failed)
	}
}

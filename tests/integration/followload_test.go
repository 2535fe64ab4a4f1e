package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// workerLoads returns requests_in_flight of every worker in /kvroute/workers.
func workerLoads(t *testing.T, e *edgeEnv) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, w := range adminWorkers(t, e) {
		out[w.WorkerID] = w.InFlight
	}
	return out
}

// decisionsOf sums caddy_kvroute_decisions_total over the series whose worker label is id.
func decisionsOf(t *testing.T, e *edgeEnv, id string) float64 {
	t.Helper()
	return sumSamples(t, getText(t, http.DefaultClient, e.admin+"/metrics"), "caddy_kvroute_decisions_total", `worker="`+id+`"`)
}

// TestLoadAndDecisionsFollowTheServingWorker: when the chosen worker is dead (killed, not yet
// known down: probes every minute) and `lb_retries 1` sends the request to the other worker, the
// request's active load (requests_in_flight in /kvroute/workers) and its
// caddy_kvroute_decisions_total{worker} count belong to the worker that serves it, not to the
// dead one the decision named.
func TestLoadAndDecisionsFollowTheServingWorker(t *testing.T) {
	w0, w1 := newFakeWorker(t, "w0"), newFakeWorker(t, "w1")
	w1.gate = make(chan struct{})
	app := "\t\thealth_checks {\n\t\t\tinterval 1m\n\t\t}\n"
	e := startEdge(t, edgeConfig{Workers: []string{w0.addr(), w1.addr()}, App: app,
		Proxy: "\t\t\tlb_retries 1\n\t\t\tlb_retry_match {\n\t\t\t\tmethod POST\n\t\t\t}\n"})
	cl := e.client(false)
	defer cl.CloseIdleConnections()
	w0.kill()
	d0, d1 := decisionsOf(t, e, "w0"), decisionsOf(t, e, "w1")

	// Requests one at a time until one chose the dead w0 (its failed attempt marks w0 down).
	n := 0
	for ; n < 40 && workerHealthy(t, e, "w0"); n++ {
		done := make(chan int, 1)
		go func(n int) {
			req, _ := http.NewRequest(http.MethodPost, e.https+"/v1/chat/completions", bytes.NewReader(chatBody(fmt.Sprintf("follow %d: %s", n, longText("fl", 8)))))
			req.Header.Set("Content-Type", "application/json")
			res, err := cl.Do(req)
			if err != nil {
				done <- -1
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			done <- res.StatusCode
		}(n)
		// while w1 holds the request, the load is accounted on w1 alone
		deadline := time.Now().Add(3 * time.Second)
		var loads map[string]int64
		for {
			loads = workerLoads(t, e)
			if loads["w1"] == 1 && w1.inflight.Load() == 1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if loads["w1"] != 1 || loads["w0"] != 0 {
			t.Errorf("request %d held by w1: requests_in_flight w0=%d w1=%d, want 0 1", n, loads["w0"], loads["w1"])
		}
		w1.gate <- struct{}{}
		if code := <-done; code != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200 (retried on w1)", n, code)
		}
	}
	if workerHealthy(t, e, "w0") {
		t.Fatalf("no decision chose the dead w0 in %d requests", n)
	}
	dd0, dd1 := decisionsOf(t, e, "w0")-d0, decisionsOf(t, e, "w1")-d1
	t.Logf("%d requests after w0 died, the last one chosen for w0 and retried on w1: decisions_total w0 +%v, w1 +%v", n, dd0, dd1)
	if dd0 != 0 || dd1 != float64(n) {
		t.Errorf("caddy_kvroute_decisions_total: w0 +%v, w1 +%v; want +0, +%d (every request was served by w1)", dd0, dd1, n)
	}
}

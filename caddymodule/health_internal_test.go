package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/registry"
)

func healthWorkers(eps ...string) []registry.Worker {
	ws := make([]registry.Worker, len(eps))
	for i, ep := range eps {
		ws[i] = registry.Worker{WorkerID: string(rune('a' + i)), Endpoint: ep}
	}
	return ws
}

// TestWorkerHealthRoutable: a failed worker is down (not chosen: decisionWorkers) until it is
// marked alive, and only evidence newer than the failure revives it; a worker that leaves the
// list, or comes back at another endpoint, loses its down mark.
func TestWorkerHealthRoutable(t *testing.T) {
	changes := map[string]bool{}
	h := newWorkerHealth(zap.NewNop(), func(id string, ok bool) { changes[id] = ok })
	ws := healthWorkers("127.0.0.1:1", "127.0.0.1:2")
	h.fail("a", "127.0.0.1:1", "test")
	if !h.isDown("a") || h.isDown("b") || changes["a"] {
		t.Fatalf("a down: a %v, b %v, gauge %v", h.isDown("a"), h.isDown("b"), changes)
	}
	h.fail("b", "127.0.0.1:2", "test")
	if !h.isDown("a") || !h.isDown("b") {
		t.Fatal("all down: not both down")
	}
	h.ok("a", "test", time.Now().Add(-time.Minute))
	if !h.isDown("a") {
		t.Fatal("evidence older than the failure revived the worker")
	}
	h.ok("a", "test", time.Now())
	if h.isDown("a") || !changes["a"] {
		t.Fatalf("a alive: down %v, gauge %v", h.isDown("a"), changes)
	}
	h.forget(ws)
	if !h.isDown("b") {
		t.Error("a listed worker at its endpoint lost its down mark")
	}
	h.forget(healthWorkers("127.0.0.1:1", "127.0.0.1:9")) // b re-pointed by a reload
	if h.isDown("b") {
		t.Error("a worker listed at another endpoint keeps the old endpoint's down mark")
	}
	h.fail("b", "127.0.0.1:9", "test")
	h.forget(ws[:1])
	if h.isDown("b") {
		t.Error("an unlisted worker keeps its state")
	}
}

// TestProberRound: a probe answered 2xx marks alive, any other answer or a dial error marks
// down, and a registry heartbeat newer than the failure revives a worker with probes off.
func TestProberRound(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer ok.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer bad.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadAddr := dead.Listener.Addr().String()
	dead.Close()

	ws := healthWorkers(ok.Listener.Addr().String(), bad.Listener.Addr().String(), deadAddr)
	h := newWorkerHealth(zap.NewNop(), func(string, bool) {})
	h.fail("a", "127.0.0.1:1", "test")
	cfg := HealthChecks{}
	cfg.setDefaults()
	p := &prober{cfg: cfg, client: &http.Client{}, health: h, workers: func() []registry.Worker { return ws }}
	p.round(context.Background())
	if h.isDown("a") || !h.isDown("b") || !h.isDown("c") {
		t.Fatalf("after a round: a %v b %v c %v, want alive, down, down", h.isDown("a"), h.isDown("b"), h.isDown("c"))
	}

	since, _ := h.downSince("c")
	p.cfg.Interval = -1 // probes off: only heartbeats revive
	p.lastSeen = func(id string) (time.Time, bool) { return since.Add(-time.Second), true }
	p.round(context.Background())
	if !h.isDown("c") {
		t.Fatal("a heartbeat older than the failure revived the worker")
	}
	p.lastSeen = func(id string) (time.Time, bool) { return since.Add(time.Second), true }
	p.round(context.Background())
	if h.isDown("c") {
		t.Fatal("a heartbeat after the failure did not revive the worker")
	}
}

package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/tick"
	"github.com/kvroute/kvroute/kvevents/registry"
)

// Defaults of the active health checks of registered workers (issue 11 item 2).
const (
	DefaultHealthURI      = "/health" // vLLM and SGLang both answer GET /health with 200
	DefaultHealthInterval = 5 * time.Second
	DefaultHealthTimeout  = 2 * time.Second
)

// HealthChecks configures the router's own view of which workers answer. A dial error, a refused
// or reset connection, or a 502/503/504 produced by the proxy for a worker marks it down on this
// replica at once: the router stops scoring it (its cached blocks stay in the index, their credit
// is ignored) and the selection policy skips it, until it proves alive again: a successful active
// probe of URI, a registry heartbeat written after the failure, or a successful request. Without
// this, a killed worker's warm cache and idle load made it the cheapest choice until its registry
// record expired.
type HealthChecks struct {
	// URI is probed with GET on every worker (static and registered); a 2xx answer is healthy.
	// Default: /health.
	URI string `json:"uri,omitempty"`

	// Interval between probes of each worker; a negative value turns active probes off (passive
	// detection stays on). Default: 5s.
	Interval caddy.Duration `json:"interval,omitempty"`

	// Timeout of one probe. Default: 2s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

func (h *HealthChecks) setDefaults() {
	if h.URI == "" {
		h.URI = DefaultHealthURI
	}
	if h.Interval == 0 {
		h.Interval = caddy.Duration(DefaultHealthInterval)
	}
	if h.Timeout == 0 {
		h.Timeout = caddy.Duration(DefaultHealthTimeout)
	}
}

// workerHealth is one replica's record of the workers marked down, by worker id. Safe for
// concurrent use; a nil *workerHealth has every worker healthy (an unprovisioned app).
type workerHealth struct {
	mu   sync.Mutex
	down map[string]downMark // worker id → the failure that marked it down

	onChange func(id string, healthy bool)
	logger   *zap.Logger
}

// downMark is when a worker was marked down, and at which endpoint.
type downMark struct {
	at       time.Time
	endpoint string // "" when not known
}

func newWorkerHealth(logger *zap.Logger, onChange func(string, bool)) *workerHealth {
	return &workerHealth{down: map[string]downMark{}, logger: logger, onChange: onChange}
}

// fail marks worker id down at endpoint (or keeps it down, with the newer failure time).
func (h *workerHealth) fail(id, endpoint, cause string) {
	if h == nil || id == "" {
		return
	}
	h.mu.Lock()
	_, was := h.down[id]
	h.down[id] = downMark{at: time.Now(), endpoint: endpoint}
	h.mu.Unlock()
	if !was {
		h.logger.Warn("worker marked down", zap.String("worker_id", id), zap.String("cause", cause))
		if h.onChange != nil {
			h.onChange(id, false)
		}
	}
}

// ok marks worker id alive on evidence gathered from time since on (a probe or an attempt that
// started then): evidence older than the failure that marked it down is ignored, so a slow probe
// or request that began before a worker died cannot bring it back.
func (h *workerHealth) ok(id string, cause string, since time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	failed, was := h.down[id]
	if was && since.Before(failed.at) {
		h.mu.Unlock()
		return
	}
	delete(h.down, id)
	h.mu.Unlock()
	if was {
		h.logger.Info("worker alive again", zap.String("worker_id", id), zap.String("cause", cause))
	}
	if h.onChange != nil {
		h.onChange(id, true)
	}
}

// isDown reports whether worker id is marked down.
func (h *workerHealth) isDown(id string) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	_, d := h.down[id]
	h.mu.Unlock()
	return d
}

// downSince returns when worker id was marked down.
func (h *workerHealth) downSince(id string) (time.Time, bool) {
	h.mu.Lock()
	m, d := h.down[id]
	h.mu.Unlock()
	return m.at, d
}

// forget drops the state of workers no longer listed, and of workers listed at another endpoint
// than the one that failed (a reload that points a worker id somewhere else starts it healthy:
// the down mark was about the old address).
func (h *workerHealth) forget(ws []registry.Worker) {
	if h == nil {
		return
	}
	listed := make(map[string]string, len(ws))
	for _, w := range ws {
		listed[w.WorkerID] = w.Endpoint
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, m := range h.down {
		if ep, ok := listed[id]; !ok || m.endpoint != "" && ep != m.endpoint {
			delete(h.down, id)
		}
	}
}

// prober probes every worker's health URI at each interval.
type prober struct {
	cfg      HealthChecks
	client   *http.Client
	health   *workerHealth
	workers  func() []registry.Worker
	lastSeen func(id string) (time.Time, bool) // registry heartbeat; nil without a registry
}

// run probes until ctx ends. With probes off (a negative interval) it still revives down
// workers on registry heartbeats, every DefaultHealthInterval.
func (p *prober) run(ctx context.Context) {
	every := time.Duration(p.cfg.Interval)
	if every <= 0 {
		every = DefaultHealthInterval
	}
	tick.Every(ctx, every, func() { p.round(ctx) })
}

// round probes every current worker once, concurrently, and revives down workers whose registry
// record was rewritten after their failure.
func (p *prober) round(ctx context.Context) {
	var wg sync.WaitGroup
	for _, w := range p.workers() {
		if since, down := p.health.downSince(w.WorkerID); down && p.lastSeen != nil {
			if seen, ok := p.lastSeen(w.WorkerID); ok && seen.After(since) {
				p.health.ok(w.WorkerID, "registry heartbeat", seen)
			}
		}
		if p.cfg.Interval <= 0 {
			continue
		}
		wg.Add(1)
		go func(w registry.Worker) {
			defer wg.Done()
			start := time.Now()
			if err := p.probe(ctx, w.Endpoint); err != nil {
				if ctx.Err() != nil {
					return // the app stopped, not the worker
				}
				p.health.fail(w.WorkerID, w.Endpoint, "health probe: "+err.Error())
				return
			}
			p.health.ok(w.WorkerID, "health probe", start)
		}(w)
	}
	wg.Wait()
}

func (p *prober) probe(ctx context.Context, endpoint string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(p.cfg.Timeout))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+endpoint+p.cfg.URI, nil)
	if err != nil {
		return err
	}
	res, err := p.client.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("status %d", res.StatusCode)
	}
	return nil
}

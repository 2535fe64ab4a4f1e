package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/kvroute/kvroute/kvevents/registry"
)

func init() {
	caddy.RegisterModule(Selection{})
}

// Selection is the `http.reverse_proxy.selection_policies.kvroute` policy. It picks the upstream
// whose dial address (normalized host:port) is the endpoint the kvroute handler chose, if that
// upstream is available (upstreamAvailable: kvroute's health record over Caddy's passive fail
// count); else the first available of the decision's next-best candidates; else the fallback
// policy, and when that finds none (Caddy's fail window), the least-loaded upstream kvroute has up. Requests without a kvroute decision (the
// handler did not run) and "no preference" decisions go to the fallback.
//
// Caddy calls the policy once per attempt, so Select also hands each attempt to the request's
// attempt bookkeeping (attempts.go): a fresh reader over the request body the handler read (exact
// Content-Length), so retries and `request_buffers` send the same bytes; the failed attempt
// before it marked down; {http.vars.kvroute.worker} following the worker that serves the attempt.
//
// The decision comes from the handler's own computation, never from client-supplied hints, so a
// client cannot steer the upstream beyond what its request content earns.
type Selection struct {
	// FallbackRaw is the policy used when the decision names no available upstream.
	// Default: `least_conn`.
	FallbackRaw json.RawMessage `json:"fallback,omitempty" caddy:"namespace=http.reverse_proxy.selection_policies inline_key=policy"`

	fallback reverseproxy.Selector
	app      *App
}

// CaddyModule returns the Caddy module information.
func (Selection) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.selection_policies.kvroute",
		New: func() caddy.Module { return new(Selection) },
	}
}

// Provision loads the fallback policy and gets the kvroute app.
func (s *Selection) Provision(ctx caddy.Context) error {
	if s.FallbackRaw == nil {
		s.FallbackRaw = caddyconfig.JSONModuleObject(reverseproxy.LeastConnSelection{}, "policy", "least_conn", nil)
	}
	mod, err := ctx.LoadModule(s, "FallbackRaw")
	if err != nil {
		return fmt.Errorf("loading fallback selection policy: %w", err)
	}
	s.fallback = mod.(reverseproxy.Selector)
	appIface, err := ctx.App("kvroute")
	if err != nil {
		return fmt.Errorf("getting kvroute app: %w", err)
	}
	s.app = appIface.(*App)
	return nil
}

// Select returns the upstream for this attempt, or nil when none is available. Caddy calls it
// once per proxy attempt and tells a policy nothing else, so it is also where kvroute observes an
// attempt: the request's attempt bookkeeping (attempts.go) hears that an attempt begins and where
// it goes; the choice itself is choose's, which only selects.
func (s *Selection) Select(pool reverseproxy.UpstreamPool, r *http.Request, w http.ResponseWriter) *reverseproxy.Upstream {
	d := DecisionFrom(r.Context())
	if d == nil {
		return s.fallback.Select(pool, r, w)
	}
	d.attempts.begin(r, s.app)
	c := s.choose(pool, r, w, d)
	if c.up != nil {
		d.attempts.record(c.up.Dial, c.endpoint, c.worker, d.moveLoad)
	}
	return c.up
}

// choice is the policy's pick for one attempt: the upstream (nil for none), its normalized
// endpoint ("" when its dial address is none) and the worker serving there ("" when no known
// worker).
type choice struct {
	up       *reverseproxy.Upstream
	endpoint string
	worker   string
}

// choose picks the upstream of this attempt without recording anything: the first available of
// the decision's ranked endpoints no earlier attempt of the request went to (so a retry goes to
// the next-best worker even when no health check has marked the failed one down yet), else the
// fallback policy over the untried upstreams kvroute has up, else the least-loaded of those.
func (s *Selection) choose(pool reverseproxy.UpstreamPool, r *http.Request, w http.ResponseWriter, d *Decision) choice {
	if d.pinned != "" {
		return s.choosePinned(pool, d)
	}
	var up *reverseproxy.Upstream
	for _, ep := range d.attempts.next(d.ranked()) {
		if s.app.endpointDown(ep) {
			continue
		}
		if up = s.app.pickEndpoint(pool, ep); up != nil {
			break
		}
	}
	if up == nil {
		routable := s.app.routablePool(s.app.requestPool(d, d.attempts.untried(pool)))
		if up = s.fallback.Select(routable, r, w); up == nil {
			// the fallback policy asks Caddy's Available(), which stays false for the whole
			// fail_duration after a counted failure even when kvroute has seen the worker
			// recover: choose among the upstreams kvroute has up itself
			up = s.app.leastLoadedAvailable(routable)
		}
	}
	if up == nil {
		return choice{}
	}
	c := choice{up: up}
	if ep, err := registry.NormalizeEndpoint(up.Dial); err == nil {
		c.endpoint = ep
		if wk, ok := s.app.WorkerByEndpoint(ep); ok {
			c.worker = wk.WorkerID
		}
	}
	return c
}

// choosePinned returns the pinned worker's upstream for the first attempt when it is available,
// else none: a stored response exists on that worker only, so no retry or fallback goes elsewhere
// (the handler answers response_worker_unavailable).
func (s *Selection) choosePinned(pool reverseproxy.UpstreamPool, d *Decision) choice {
	ep := d.Chosen.Endpoint
	if len(d.attempts.next([]string{ep})) == 0 || s.app.endpointDown(ep) {
		return choice{}
	}
	up := s.app.pickEndpoint(pool, ep)
	if up == nil {
		return choice{}
	}
	return choice{up: up, endpoint: ep, worker: d.pinned}
}

// modelPool returns the upstreams of pool that are workers of model when kvroute knows a worker of
// it (static or registered, up or down): a request for a model is never sent to another model's
// worker, even when all of its own are down (it then gets 503, or an attempt on its own workers).
// For a model no worker declares (or none), pool is returned whole: the workers answer as they do
// for an unknown model.
func (a *App) modelPool(model string, pool reverseproxy.UpstreamPool) reverseproxy.UpstreamPool {
	if model == "" {
		return pool
	}
	eps := map[string]bool{}
	for _, w := range a.WorkerList() {
		if w.Model == model {
			eps[w.Endpoint] = true
		}
	}
	if len(eps) == 0 {
		return pool
	}
	out := make(reverseproxy.UpstreamPool, 0, len(pool))
	for _, up := range pool {
		if ep, err := registry.NormalizeEndpoint(up.Dial); err == nil && eps[ep] {
			out = append(out, up)
		}
	}
	return out
}

// pickEndpoint returns the available upstream (App.upstreamAvailable) of pool whose normalized
// dial address is ep.
func (a *App) pickEndpoint(pool reverseproxy.UpstreamPool, ep string) *reverseproxy.Upstream {
	if ep == "" {
		return nil
	}
	for _, up := range pool {
		if n, err := registry.NormalizeEndpoint(up.Dial); err == nil && n == ep && a.upstreamAvailable(up) {
			return up
		}
	}
	return nil
}

// upstreamAvailable reports whether up may get an attempt. For an upstream that is not a worker
// kvroute knows, it is Caddy's Available(). For a known worker (static or registered), kvroute's
// health record decides over Caddy's passive fail count: both see the same failed attempts, but
// only kvroute also sees the recovery (a probe, a registry heartbeat, a served request), while
// Caddy keeps a failed upstream unhealthy for the whole fail_duration. So a known worker is
// available when it is not full, kvroute does not have it down, and Caddy either has it healthy
// or has it unhealthy with counted fails (the passive window). Caddy unhealthy with zero counted
// fails (an active health check or a circuit breaker) stays unavailable.
func (a *App) upstreamAvailable(up *reverseproxy.Upstream) bool {
	ep, err := registry.NormalizeEndpoint(up.Dial)
	if err != nil {
		return up.Available()
	}
	w, ok := a.WorkerByEndpoint(ep)
	if !ok {
		return up.Available()
	}
	if up.Full() || a.health.Load().isDown(w.WorkerID) {
		return false
	}
	return up.Healthy() || up.Host.Fails() > 0
}

// leastLoadedAvailable returns the upstream of pool with the fewest requests in flight (Caddy's
// count) among those upstreamAvailable accepts, the first on a tie; nil when none is.
func (a *App) leastLoadedAvailable(pool reverseproxy.UpstreamPool) *reverseproxy.Upstream {
	var best *reverseproxy.Upstream
	for _, up := range pool {
		if !a.upstreamAvailable(up) {
			continue
		}
		if best == nil || up.Host.NumRequests() < best.Host.NumRequests() {
			best = up
		}
	}
	return best
}

// Interface guards
var (
	_ caddy.Provisioner     = (*Selection)(nil)
	_ reverseproxy.Selector = (*Selection)(nil)
)

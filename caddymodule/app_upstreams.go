package caddymodule

import (
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/kvroute/kvroute/kvevents/registry"
)

// Upstream choice helpers of the `kvroute` app, used by the selection policy (selection.go) and
// the upstream source (upstreams.go) on every proxy attempt: which upstreams serve the request's
// model, which are available by kvroute's health record, the attempt outcomes reported to it.

// requestPool returns the upstreams of pool a decision's request may go to: for a request that
// names a LoRA adapter (the router's mark, or, when the decision has none — a decider error routed
// on load —, a model no worker declares but some worker lists as an adapter), the workers that list
// it; when none does (adapter_not_served), the workers of its base model when kvroute knows one,
// else pool whole; for any other request, modelPool (the workers of its model). A request for an
// adapter is never sent to a worker that does not serve it while one that does is known (up or
// down), as a request for a model never goes to another model's worker.
func (a *App) requestPool(d *Decision, pool reverseproxy.UpstreamPool) reverseproxy.UpstreamPool {
	name := d.Adapter
	if name == "" {
		if d.Model == "" || a.declaresModel(d.Model) {
			return a.modelPool(d.Model, pool)
		}
		name = d.Model
	}
	eps := map[string]bool{}
	for _, w := range a.WorkerList() {
		if _, ok := w.Adapter(name); ok {
			eps[w.Endpoint] = true
		}
	}
	if len(eps) > 0 {
		return endpointPool(pool, eps)
	}
	if d.Adapter != "" {
		return a.modelPool(d.AdapterBase, pool)
	}
	return pool // a model no worker declares or lists: the workers answer for it
}

// declaresModel reports whether some worker (static or registered) has model as its model.
func (a *App) declaresModel(model string) bool {
	for _, w := range a.WorkerList() {
		if w.Model == model {
			return true
		}
	}
	return false
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

// endpointDown reports whether the worker at endpoint ep is marked down.
func (a *App) endpointDown(ep string) bool {
	w, ok := a.WorkerByEndpoint(ep)
	return ok && a.health.Load().isDown(w.WorkerID)
}

// routablePool returns pool without the upstreams of workers marked down; all of pool when that
// leaves none.
func (a *App) routablePool(pool reverseproxy.UpstreamPool) reverseproxy.UpstreamPool {
	out := make(reverseproxy.UpstreamPool, 0, len(pool))
	for _, up := range pool {
		if ep, err := registry.NormalizeEndpoint(up.Dial); err != nil || !a.endpointDown(ep) {
			out = append(out, up)
		}
	}
	if len(out) == 0 {
		return pool
	}
	return out
}

// markFailed marks the worker at endpoint ep down after a failed proxy attempt.
func (a *App) markFailed(ep, cause string) {
	if w, ok := a.WorkerByEndpoint(ep); ok {
		a.health.Load().fail(w.WorkerID, w.Endpoint, cause)
	}
}

// markServed marks the worker at endpoint ep alive after it answered an attempt made at time at.
func (a *App) markServed(ep string, at time.Time) {
	if w, ok := a.WorkerByEndpoint(ep); ok && a.health.Load().isDown(w.WorkerID) {
		a.health.Load().ok(w.WorkerID, "request served", at)
	}
}

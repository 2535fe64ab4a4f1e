package caddymodule

import (
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/kvroute/kvroute/kvevents/registry"
)

// attempts is the bookkeeping of one request's proxy attempts, and nothing else: which upstreams
// were tried, which attempt is still unjudged, the worker of the latest attempt, and the body each
// attempt sends. The selection policy chooses (Selection.choose) without writing any of it.
//
// Caddy's reverse_proxy tells a selection policy nothing about an attempt's outcome: its loop
// (reverseproxy.go, proxyLoopIteration, Caddy v2.11.9) calls Select, makes the round trip, and on
// a failure counts it in its own bookkeeping (countFailure) before calling Select again. kvroute
// observes the same attempts at the two points it has: the policy being asked (begin: the
// attempt before this one failed; record: this one goes there) and the handler getting the
// proxy's result (finish: the last attempt's outcome). Safe for concurrent use (a late attempt's
// goroutine may still read while a retry begins). Lock order: docs/LOCKS.md.
type attempts struct {
	mu sync.Mutex
	// tried holds the normalized dial addresses of the attempts so far, in order.
	tried []string
	// pending is the endpoint of the latest attempt not yet judged ("" for none), pendingAt
	// when it was selected.
	pending   string
	pendingAt time.Time
	// served is the worker id of the latest attempt ("" when its upstream is no known worker);
	// attempted whether there was one.
	served    string
	attempted bool

	// body is the request body every attempt sends; nil without a body. Set by the handler
	// before the proxy runs, never changed after.
	body *replayBody
}

// attemptHealth is what the bookkeeping reports an attempt's outcome to: the app's worker
// health record (health.go).
type attemptHealth interface {
	// markFailed marks the worker at endpoint ep down after a failed attempt.
	markFailed(ep, cause string)
	// markServed marks the worker at endpoint ep alive after it answered an attempt selected at.
	markServed(ep string, at time.Time)
}

// begin is called when the proxy is about to make an attempt (Caddy asks the policy). Caddy asks
// again only after the previous attempt failed (a dial error, a refused or reset connection, a
// transport error), so that attempt's worker is marked down on this replica; and r gets a fresh
// reader over the exact body, replacing whatever the proxy made of it before (request_buffers)
// or an earlier attempt consumed.
func (a *attempts) begin(r *http.Request, h attemptHealth) {
	if prev, _ := a.takePending(); prev != "" {
		h.markFailed(prev, "proxy attempt failed")
	}
	if a.body != nil {
		a.body.install(r)
	}
}

// record notes that the attempt goes to upstream dial (the policy's choice) at endpoint ep ("" when
// dial is no valid endpoint), served by worker ("" when no known worker); moveLoad, when not
// nil, moves the request's load accounting to that worker (called outside the lock).
func (a *attempts) record(dial, ep, worker string, moveLoad func(worker string)) {
	tried := ep
	if tried == "" {
		tried = dial
	}
	a.mu.Lock()
	a.tried = append(a.tried, tried)
	if ep != "" {
		a.pending, a.pendingAt = ep, time.Now()
	}
	a.served, a.attempted = worker, true
	a.mu.Unlock()
	if worker != "" && moveLoad != nil {
		moveLoad(worker)
	}
}

// finish judges the last attempt by the proxy's result: err nil (an answer) marks its worker
// alive, a transport failure (transportFailed: the proxy's 502 or 504) marks it down; any other
// outcome says nothing about the worker. An attempt is judged once.
func (a *attempts) finish(h attemptHealth, err error, transportFailed bool) {
	last, at := a.takePending()
	if last == "" {
		return
	}
	switch {
	case err == nil:
		h.markServed(last, at)
	case transportFailed:
		h.markFailed(last, err.Error())
	}
}

// takePending returns and clears the endpoint of the latest unjudged attempt and when it was
// selected.
func (a *attempts) takePending() (string, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ep, at := a.pending, a.pendingAt
	a.pending = ""
	return ep, at
}

// wasTried reports whether an attempt of this request already went to endpoint ep.
func (a *attempts) wasTried(ep string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.triedLocked(ep)
}

func (a *attempts) triedLocked(ep string) bool {
	for _, t := range a.tried {
		if t == ep {
			return true
		}
	}
	return false
}

// next returns the endpoints of ranked (best first) no attempt went to yet, in order: after a
// failure the next attempt goes to the next-best worker, even before any health check marked
// the failed one down.
func (a *attempts) next(ranked []string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(ranked))
	for _, ep := range ranked {
		if !a.triedLocked(ep) {
			out = append(out, ep)
		}
	}
	return out
}

// untried returns pool without the upstreams earlier attempts used; the whole pool when every
// upstream was tried (the fallback policy then decides, as without kvroute).
func (a *attempts) untried(pool reverseproxy.UpstreamPool) reverseproxy.UpstreamPool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.tried) == 0 {
		return pool
	}
	out := make(reverseproxy.UpstreamPool, 0, len(pool))
	for _, up := range pool {
		ep, err := registry.NormalizeEndpoint(up.Dial)
		if err != nil || !a.triedLocked(ep) {
			out = append(out, up)
		}
	}
	if len(out) == 0 {
		return pool
	}
	return out
}

// latest returns the worker of the latest attempt and whether there was one.
func (a *attempts) latest() (worker string, attempted bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.served, a.attempted
}

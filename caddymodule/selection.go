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

// Interface guards
var (
	_ caddy.Provisioner     = (*Selection)(nil)
	_ reverseproxy.Selector = (*Selection)(nil)
)

package caddymodule

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/router"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// Decision is the routing decision of one request (the per-request kind of kvroute's three kinds
// of state; see doc.go): the router's outcome (router.Result) and the bookkeeping of the request's
// proxy attempts (attempts). The handler stores it in the request context
// (DecisionFrom) before calling the next handler; the kvroute selection policy reads it on every
// proxy attempt.
type Decision struct {
	// RequestID is the request's X-Request-Id (the client's, or a generated one).
	RequestID string
	// Result is the outcome as the router made it (the routing core's Decider) or as another
	// Decider states it. What the handler and the policy read of it: Model; Chosen, the worker
	// (nil: no preference, the policy's fallback picks); Ranked, best first, whose available
	// entries other than Chosen are the next-best workers tried when the chosen one is not
	// available; Fallback ("" when exact); OverlapBlocks and TotalBlocks; Costs (worker id →
	// DESIGN.md §7 cost, for the [ROUTING] line); Detail (why a fallback happened, for debug
	// logs); Body, when set, the bytes the proxy sends instead of the client's (the media
	// identities spliced in, DESIGN.md §1 step 6).
	router.Result

	// handle releases the request's load accounting (nil when nothing is accounted); an attempt
	// on another worker moves the load there (Result.PrefillOn, moveLoad).
	handle *scheduler.Handle
	// counted is set once the decision went to caddy_kvroute_decisions_total.
	counted atomic.Bool

	// attempts is the bookkeeping of the proxy's attempts (attempts.go), including the body
	// they replay. The var {http.vars.kvroute.worker} reads its latest worker (servedVar), so a
	// retry changes the var without writing Caddy's vars map, which an earlier attempt's dial
	// may still be reading.
	attempts attempts

	// pinned is the worker that alone may serve this request ("" for none): the worker holding
	// the stored response it refers to (responses.go). The policy never picks another.
	pinned string
}

// Served returns the id of the worker of the latest proxy attempt ("" when its upstream is no
// known worker); the decision's worker before any attempt.
func (d *Decision) Served() string {
	if served, attempted := d.attempts.latest(); attempted {
		return served
	}
	return d.WorkerID()
}

// servedOverlap returns the cached prefix, in blocks, of the worker of the latest proxy attempt
// (Result.OverlapOn; 0 when its upstream is no known worker); the decision's before any attempt.
func (d *Decision) servedOverlap() int {
	served, attempted := d.attempts.latest()
	if !attempted {
		return d.OverlapBlocks
	}
	return d.OverlapOn(served)
}

// servedVar is the value of {http.vars.kvroute.worker}: Caddy's replacer renders a
// fmt.Stringer through String, at the time the placeholder is read (caddy.ToString).
type servedVar struct{ d *Decision }

func (v servedVar) String() string { return v.d.Served() }

// servedOverlapVar is the value of {http.vars.kvroute.overlap_blocks}: the overlap of the worker
// that served (a retry on another worker reports that worker's, so the header and log fields
// built from the vars never pair one worker's id with another's overlap).
type servedOverlapVar struct{ d *Decision }

func (v servedOverlapVar) String() string { return strconv.Itoa(v.d.servedOverlap()) }

type decisionKey struct{}

// WithDecision returns ctx carrying d.
func WithDecision(ctx context.Context, d *Decision) context.Context {
	return context.WithValue(ctx, decisionKey{}, d)
}

// DecisionFrom returns the decision stored by the kvroute handler, or nil.
func DecisionFrom(ctx context.Context) *Decision {
	d, _ := ctx.Value(decisionKey{}).(*Decision)
	return d
}

// RouteInput is what the handler hands the Decider for one request.
type RouteInput struct {
	// Request is the client request (its body already consumed; use Body).
	Request *http.Request
	// RequestID is the request id set on the forwarded request.
	RequestID string
	// Body is the exact request body (nil when the handler did not read it: not a chat or
	// completions POST). It must not be modified.
	Body []byte
	// Workers is the current worker list (static and live), sorted by id; shared, read-only.
	Workers []registry.Worker
	// Available reports whether a worker may be chosen (not marked down); nil means all may.
	Available func(*router.Worker) bool

	// routed is Workers in the router's shape when the handler has it (converted once per list
	// change, workerSet); nil otherwise.
	routed []router.Worker
}

// Decider computes routing decisions. It is the hook for the routing core (template, tokens,
// media identities, index, scheduler): the handler calls Decide once per request after the body
// is read and checked. Implementations must be safe for concurrent use.
//
// A returned *reason.Error whose code is a client error (reason.Code.IsClientError) is answered
// with its 4xx and the JSON error body, and the request is not forwarded. Any other error is
// logged and the request routes on load alone (fallback index_unavailable unless the error
// carries another code). A nil Decision means no preference.
type Decider interface {
	Decide(ctx context.Context, in *RouteInput) (*Decision, error)
}

// NoPreference is the Decider used until the routing core is installed: it expresses no
// preference, so the selection policy's fallback picks the upstream.
type NoPreference struct{}

// Decide returns a decision without a worker, marked not_routed (no model_dir: nothing is routed
// by KV overlap, and such decisions must not count as exact).
func (NoPreference) Decide(context.Context, *RouteInput) (*Decision, error) {
	return notRouted(), nil
}

// notRouted returns a decision without a worker, marked not_routed.
func notRouted() *Decision {
	return &Decision{Result: router.Result{Fallback: reason.NotRouted}}
}

// ranked returns the endpoints the policy tries, best first: the chosen worker's, then those of
// the other available candidates (Result.Ranked); none without a chosen worker (no preference).
func (d *Decision) ranked() []string {
	if d.Chosen == nil {
		return nil
	}
	out := make([]string, 0, len(d.Ranked)+1)
	if d.Chosen.Endpoint != "" {
		out = append(out, d.Chosen.Endpoint)
	}
	for _, c := range d.Ranked {
		if c.Available && c.WorkerID != d.Chosen.WorkerID {
			out = append(out, c.Endpoint)
		}
	}
	return out
}

// moveLoad moves the request's load accounting to worker id, the worker of the proxy's attempt,
// so the scheduler sees the load where it really is.
func (d *Decision) moveLoad(id string) {
	if d.handle != nil {
		d.handle.Move(index.WorkerKey{ID: id}, d.PrefillOn(id))
	}
}

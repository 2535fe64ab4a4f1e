package caddymodule

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/kvroute/kvroute/routing/reason"
	"github.com/kvroute/kvroute/routing/router"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// maxExplainBody caps the body POST /kvroute/explain reads.
const maxExplainBody = DefaultMaxBodySize

// ExplainResponse is the body of POST /kvroute/explain (DESIGN.md §10).
type ExplainResponse struct {
	Model       string             `json:"model"`
	Fallback    *string            `json:"fallback"`
	Detail      string             `json:"detail,omitempty"`
	TotalBlocks int                `json:"total_blocks"`
	Media       []ExplainMedia     `json:"media"`
	Candidates  []ExplainCandidate `json:"candidates"`
	Decision    ExplainDecision    `json:"decision"`

	// CostModel is the scheduler's cost model, "ttft" or "linear" (what the candidates' terms
	// mean); "" when no candidate was scored.
	CostModel string `json:"cost_model"`
	// RequestTokens is the prompt length the cost used.
	RequestTokens int `json:"request_tokens"`
}

// ExplainMedia is one media item of the routing view.
type ExplainMedia struct {
	Kind     string `json:"kind"`
	Identity string `json:"identity"`
	Frames   int    `json:"frames"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
	GridTHW  [3]int `json:"grid_thw"`
	Tokens   int    `json:"tokens"`
}

// ExplainCandidate is one scored worker: its cost, the terms the cost is the sum of (ttft:
// uncached_tokens + queued_prefill_tokens + queue_tokens; linear: prefill_blocks + decode_blocks;
// the other model's terms are 0) and the active load they came from.
type ExplainCandidate struct {
	WorkerID      string  `json:"worker_id"`
	Endpoint      string  `json:"endpoint"`
	OverlapBlocks int     `json:"overlap_blocks"`
	Cost          float64 `json:"cost"`
	Available     bool    `json:"available"`
	// Terms are the parts of cost (scheduler.Terms).
	Terms scheduler.Terms `json:"terms"`
	// ActivePrefillTokens, ActiveDecodeBlocks and ActiveRequests are the worker's load as this
	// router accounts it.
	ActivePrefillTokens int64 `json:"active_prefill_tokens"`
	ActiveDecodeBlocks  int64 `json:"active_decode_blocks"`
	ActiveRequests      int64 `json:"active_requests"`
	// Busy is set when a busy threshold (max_active_prefill_tokens, max_active_decode_blocks)
	// is exceeded: the worker is skipped unless every available one is busy.
	Busy bool `json:"busy"`
	// RecentRequests is the worker's decayed count of the requests this router routed to it
	// recently; OverBalance is set when it is over the ttft model's load bound (balance_factor):
	// the worker is skipped unless every available one is.
	RecentRequests float64 `json:"recent_requests"`
	OverBalance    bool    `json:"over_balance"`
}

// ExplainDecision names the worker the request would go to ("" when the policy's fallback
// would pick).
type ExplainDecision struct {
	WorkerID string `json:"worker_id"`
	Endpoint string `json:"endpoint"`
}

// handleExplain routes a chat request body without forwarding it or accounting its load.
// A `path` query parameter names the request path (default /v1/chat/completions).
func handleExplain(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errors.New("method not allowed")}
	}
	a, err := runningApp()
	if err != nil {
		return err
	}
	rc := a.routingCore()
	if rc == nil {
		return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: errors.New("no model_dir configured: nothing to explain")}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxExplainBody+1))
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("reading body: %w", err)}
	}
	if len(body) > maxExplainBody {
		return caddy.APIError{HTTPStatus: http.StatusRequestEntityTooLarge, Err: errors.New("body too large")}
	}
	path := r.URL.Query().Get("path")
	if path == "" {
		path = "/v1/chat/completions"
	}
	res, err := rc.router.Route(r.Context(), &router.Input{Path: path, Body: body, Workers: a.routable().routed}) // as the handler routes: without workers marked down
	if err != nil {
		var re *reason.Error
		if errors.As(err, &re) && re.Code.IsClientError() {
			w.Header().Set("Content-Type", "application/json")
			writeError(w, re)
			return nil
		}
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	return writeJSON(w, explainResponse(res))
}

func explainResponse(res *router.Result) ExplainResponse {
	out := ExplainResponse{Model: res.Model, TotalBlocks: res.TotalBlocks, Detail: res.Detail,
		Media: []ExplainMedia{}, Candidates: []ExplainCandidate{}}
	out.CostModel, out.RequestTokens = res.CostModel, res.RequestTokens
	if res.Fallback != "" {
		f := string(res.Fallback)
		out.Fallback = &f
	}
	for _, m := range res.Media {
		out.Media = append(out.Media, ExplainMedia{Kind: m.Kind, Identity: m.Identity, Frames: m.Frames,
			Width: m.Width, Height: m.Height, GridTHW: m.GridTHW, Tokens: m.Tokens})
	}
	for _, c := range res.Ranked {
		out.Candidates = append(out.Candidates, ExplainCandidate{WorkerID: c.WorkerID, Endpoint: c.Endpoint,
			OverlapBlocks: c.OverlapBlocks, Cost: c.Cost, Available: c.Available, Terms: c.Terms,
			ActivePrefillTokens: c.Load.PrefillTokens, ActiveDecodeBlocks: c.Load.DecodeBlocks,
			ActiveRequests: c.Load.Requests, Busy: c.Busy, RecentRequests: c.RecentRequests, OverBalance: c.OverBalance})
	}
	if res.Chosen != nil {
		out.Decision = ExplainDecision{WorkerID: res.Chosen.WorkerID, Endpoint: res.Chosen.Endpoint}
	}
	return out
}

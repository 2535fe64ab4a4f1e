package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/router"
)

// maxExplainBody caps the body POST /kvroute/explain reads.
const maxExplainBody = DefaultMaxBodySize

// ExplainResponse is the body of POST /kvroute/explain (DESIGN.md §10): a view of router.Result
// whose media and candidates are the router's own types (router.MediaSummary, router.Candidate),
// so a field added there reaches explain without a copy here.
type ExplainResponse struct {
	Model string `json:"model"`
	// Adapter is the model when it names a LoRA adapter (its blocks are hashed with its name and
	// it goes only to the workers listing it); absent otherwise.
	Adapter  string  `json:"adapter,omitempty"`
	Fallback *string `json:"fallback"` // null when routed exactly
	Detail   string  `json:"detail,omitempty"`
	// TotalBlocks is the request's complete blocks.
	TotalBlocks int                   `json:"total_blocks"`
	Media       []router.MediaSummary `json:"media"`      // [] when none
	Candidates  []router.Candidate    `json:"candidates"` // every scored worker, best first; [] when none
	Decision    ExplainDecision       `json:"decision"`

	// CostModel is the scheduler's cost model, "ttft", "ttft2" or "linear" (what the candidates' terms
	// mean); "" when no candidate was scored.
	CostModel string `json:"cost_model"`
	// RequestTokens is the prompt length the cost used.
	RequestTokens int `json:"request_tokens"`
	// Affinity is set when the request fell back on media kvroute did not decode: the media's
	// key and the rendezvous worker credited with its estimated tokens (the candidates' `affinity`
	// term); absent otherwise.
	Affinity *router.Affinity `json:"affinity,omitempty"`
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
	// The body's own problems are answered as the handler answers them (kvroute's JSON error
	// body with its reason code); method and availability errors stay in Caddy's admin form.
	// The handler's body reader (body.go): the same limit checks, truncation and timeout codes.
	// No deadline of its own (0): the admin server's read timeout (Caddy's admin.go) applies.
	body, pooled, err := readBody(w, r, maxExplainBody, 0)
	if err != nil {
		var re *reason.Error
		if !errors.As(err, &re) {
			re = reason.Wrap(reason.BodyInvalid, err, "reading the request body failed")
		}
		writeError(w, shapeOpenAI, re)
		return nil
	}
	defer pooled.put() // after the answer is written: nothing below keeps the body
	path := r.URL.Query().Get("path")
	if path == "" {
		path = "/v1/chat/completions"
	}
	ws, available := a.decisionWorkers() // as the handler routes
	rin := &router.Input{Path: path, Body: body, Workers: ws.routed, Available: available}
	if st := a.runningNATS(); st != nil {
		rin.IndexUnavailable = st.indexUnavailable()
	}
	res, err := rc.router.Route(r.Context(), rin)
	if err != nil {
		var re *reason.Error
		if errors.As(err, &re) && re.Code.IsClientError() {
			w.Header().Set("Content-Type", "application/json")
			writeError(w, shapeFor(path, nil), re)
			return nil
		}
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	return writeJSON(w, explainResponse(res))
}

// explainResponse is the explain view of res.
func explainResponse(res *router.Result) ExplainResponse {
	out := ExplainResponse{Model: res.Model, Adapter: res.Adapter, Detail: res.Detail, TotalBlocks: res.TotalBlocks,
		Media: res.Media, Candidates: res.Ranked, CostModel: res.CostModel, RequestTokens: res.RequestTokens, Affinity: res.Affinity}
	if res.Fallback != "" {
		f := string(res.Fallback)
		out.Fallback = &f
	}
	if out.Media == nil {
		out.Media = []router.MediaSummary{}
	}
	if out.Candidates == nil {
		out.Candidates = []router.Candidate{}
	}
	if res.Chosen != nil {
		out.Decision = ExplainDecision{WorkerID: res.Chosen.WorkerID, Endpoint: res.Chosen.Endpoint}
	}
	return out
}

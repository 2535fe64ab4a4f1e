package router

import (
	"github.com/kvroute/kvroute/kv"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/mediaport"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// The router's input and outcome types, apart from the steps that fill them: one Input in, one
// Result out. They are the only types of the outcome chain: caddymodule's Decision embeds Result,
// POST /kvroute/explain lists Candidate and MediaSummary as they are (their JSON tags are the
// DESIGN.md §10 keys), so a field is added here once.

// Input is one request to route.
type Input struct {
	// Path is the request path (e.g. /v1/chat/completions).
	Path string
	// Body is the exact request body; it is only read.
	Body []byte
	// Workers is the current worker list.
	Workers []Worker
	// Available reports whether a worker's upstream can take requests; nil means all can.
	Available func(w *Worker) bool
	// IndexUnavailable, when not empty, says why the index cannot hold the workers' KV events
	// (e.g. NATS not connected since the start): the request routes on load alone, fallback
	// index_unavailable with this detail.
	IndexUnavailable string
}

// Candidate is one scored worker: the one candidate type of the routing outcome, read by POST
// /kvroute/explain (its JSON is the explain `candidates` entry of DESIGN.md §10, plus the cost
// terms and load) and by the selection policy, whose next-best workers are the available ones
// after the chosen (caddymodule.Decision).
type Candidate struct {
	WorkerID      string  `json:"worker_id"`
	Endpoint      string  `json:"endpoint"`
	OverlapBlocks int     `json:"overlap_blocks"`
	Cost          float64 `json:"cost"`
	// Available is false when the worker's upstream cannot take requests (Input.Available): such
	// a candidate is scored and listed but never chosen.
	Available bool `json:"available"`
	// Terms are the parts of Cost under the scheduler's cost model (ttft: uncached_tokens +
	// queued_prefill_tokens + queue_tokens; linear: prefill_blocks + decode_blocks; the other
	// model's terms are 0).
	Terms scheduler.Terms `json:"terms"`
	// Load is the worker's active load as this router accounts it, the terms' source; embedded so
	// its keys (active_prefill_tokens, active_decode_blocks, active_requests) sit in the
	// candidate's JSON.
	scheduler.Load
	// Busy is set when a busy threshold (max_active_prefill_tokens, max_active_decode_blocks) is
	// exceeded: the worker is skipped unless every available one is busy.
	Busy bool `json:"busy"`
	// RecentRequests is the worker's decayed count of the requests this router routed to it
	// recently; OverBalance is set when it is over the ttft model's load bound (balance_factor):
	// the worker is skipped unless every available one is (scheduler.Scored).
	RecentRequests float64 `json:"recent_requests"`
	OverBalance    bool    `json:"over_balance"`
}

// MediaSummary describes one media item of the routing view (explain's `media` entries,
// DESIGN.md §10).
type MediaSummary struct {
	Kind     string `json:"kind"`
	Identity string `json:"identity"`
	Frames   int    `json:"frames"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
	GridTHW  [3]int `json:"grid_thw"`
	Tokens   int    `json:"tokens"`
}

// Result is the routing outcome of one request.
type Result struct {
	// Model is the request's model field.
	Model string
	// Adapter is the request's model when it names a LoRA adapter a worker lists (or listed:
	// Fallback adapter_not_served), else ""; AdapterBase is that adapter's base model when known.
	// The selection policy keeps such a request on the adapter's workers (or its base model's).
	Adapter, AdapterBase string
	// Fallback is "" when routing was exact, else the reason code (DESIGN.md §8).
	Fallback reason.Code
	// Detail says, for logs, why the fallback happened.
	Detail string
	// TotalBlocks is the number of complete blocks scored; OverlapBlocks the chosen worker's
	// cached prefix of them.
	TotalBlocks, OverlapBlocks int
	// RequestTokens is the prompt length used for the load terms.
	RequestTokens int
	// Chosen is the picked worker (nil: no preference, the policy's fallback picks). Ranked holds
	// every candidate, best first: the chosen one (Chosen points at Ranked[0]), then the others by
	// availability, cost and id.
	Chosen *Candidate
	Ranked []Candidate
	// Costs maps worker id to cost.
	Costs map[string]float64
	// CostModel is the scheduler's cost model (scheduler.CostTTFT or scheduler.CostLinear).
	CostModel string
	// Media summarizes the media items in prompt order (only when they were resolved).
	Media []MediaSummary
	// MediaItems is the number of media parts in the request (resolved or not).
	MediaItems int
	// Body is the body to forward: the client's bytes, with each media part's uuid spliced in
	// when identities are forwarded (Forwarded).
	Body      []byte
	Forwarded bool
	// PreviousResponseID is a Responses request's previous_response_id ("" for none or another
	// path): the follow-up must reach the worker that stored that response (DESIGN.md §1.1).
	PreviousResponseID string
	// StoresResponse is set for a Responses request with store true (the default): the worker
	// keeps the response it makes, and its id must be learned from the answer.
	StoresResponse bool
	// ResponseFieldsRead is set when the router read the two fields above (a Responses POST it
	// converted): without it the handler reads them itself (no model_dir, a request the router did
	// not see).
	ResponseFieldsRead bool

	// Affinity is set when the request fell back on media it did not decode and was routed by
	// the media's key (affinity.go; explain's `affinity`).
	Affinity *Affinity

	decision    scheduler.Decision
	hasDecision bool
	// hashes and matched are the request's block hashes and each worker id's index match (its
	// longest over dp ranks), kept under ttft2 for Begin's Index.Touch of the chosen worker's
	// cached prefix.
	hashes  []kv.BlockHash
	matched map[string]index.AgedOverlap
	// mediaKey is the key of the first fetched media item that did not decode (mediaView).
	mediaKey *mediaport.Key
	// affinity is what score passes the scheduler (nil: no affinity).
	affinity *scheduler.Affinity
}

// WorkerID returns the chosen worker's id; "" for no preference.
func (res *Result) WorkerID() string {
	if res.Chosen == nil {
		return ""
	}
	return res.Chosen.WorkerID
}

// Endpoint returns the chosen worker's endpoint (normalized host:port); "" for no preference.
func (res *Result) Endpoint() string {
	if res.Chosen == nil {
		return ""
	}
	return res.Chosen.Endpoint
}

// OverlapOn returns the request's cached prefix, in blocks, on the worker with id workerID: the
// decision's OverlapBlocks for the chosen worker, the candidate's own for another ranked one, 0
// for a worker that is no candidate (an upstream no routing decision knew).
func (res *Result) OverlapOn(workerID string) int {
	if res == nil {
		return 0
	}
	if res.Chosen != nil && res.Chosen.WorkerID == workerID {
		return res.OverlapBlocks
	}
	for _, c := range res.Ranked {
		if c.WorkerID == workerID {
			return c.OverlapBlocks
		}
	}
	return 0
}

// PrefillOn returns the request's uncached prompt tokens on the worker with id workerID (its own
// overlap; 0 without a decision), for scheduler.Handle.Move when the request goes to another
// worker than Chosen.
func (res *Result) PrefillOn(workerID string) int64 {
	if res == nil || !res.hasDecision {
		return 0
	}
	return res.decision.PrefillOn(index.WorkerKey{ID: workerID})
}

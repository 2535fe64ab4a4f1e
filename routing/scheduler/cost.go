package scheduler

import (
	"fmt"
	"math"

	"github.com/kvroute/kvroute/kv/index"
)

// The cost models (Config.CostModel).
const (
	// CostTTFT (the default before issue 26) scores the time to first token the worker would give
	// the request, in prefill tokens: the request's uncached tokens, plus the prefill tokens
	// already waiting on the worker, plus queue_wait_tokens per sequence over the worker's running
	// limit, with a load bound on the recently routed requests (balance_factor 1.1).
	CostTTFT = "ttft"
	// CostLinear is DESIGN.md §7's cost, Dynamo's linear policy over prefill and decode blocks.
	CostLinear = "linear"
	// CostTTFT2 (the default, also meant by ""; issue 26) is CostTTFT with the cached prefix
	// credited as far as it survives in the worker's LRU cache the prefill queued ahead of it
	// (SurvivingBlocks, CreditedTokens), a prefix pending on the worker credited in full (PendingBlocks), plus the prefill the request delays later requests by
	// (DelayedTokens), with the wait for a running slot priced against max_running or, when that
	// is not configured, each worker's learned limit (slots.go), a loose load bound on the requests
	// in flight now (DefaultInFlightFactor 1.5, markOverInFlight) instead of those routed over a
	// window, and ties going to the worker with the fewest recent
	// requests (fewestRecent). docs/architecture.md, "Cost model", has the evidence.
	CostTTFT2 = "ttft2"
)

// Terms are the parts of one candidate's cost, for explain and logs. The ttft and ttft2 models fill
// the token terms (ttft2 also InFlightBound, CreditedTokens, BusyShare and DelayedTokens), the linear model the
// block terms.
type Terms struct {
	// UncachedTokens is the request's prompt tokens not in the worker's cached prefix:
	// max(request_tokens − overlap_blocks · block_size, 0) (ttft).
	UncachedTokens int64 `json:"uncached_tokens"`
	// QueuedPrefillTokens is the prefill work ahead of the request on the worker: the uncached
	// tokens of routed requests that have not produced a first byte (ttft), less PrefillDoneTokens
	// (ttft2).
	QueuedPrefillTokens int64 `json:"queued_prefill_tokens"`
	// WaitingSequences is how many sequences, this request included, would be over the worker's
	// running limit: max(active_requests + 1 − max_running, 0), 0 when max_running is 0 (ttft;
	// ttft2 without max_running: the learned limit, LearnedMaxRunning, instead).
	WaitingSequences int64 `json:"waiting_sequences"`
	// QueueTokens is WaitingSequences · queue_wait_tokens (ttft).
	QueueTokens float64 `json:"queue_tokens"`
	// PrefillBlocks is the linear model's prefill term:
	// prefill_load_scale · max(prefill_blocks − overlap_credit · overlap_blocks, 0) (linear).
	PrefillBlocks float64 `json:"prefill_blocks"`
	// DecodeBlocks is the linear model's decode term: active_decode_blocks + ceil(request_tokens /
	// block_size) (linear).
	DecodeBlocks float64 `json:"decode_blocks"`
	// Affinity is the credit, in the model's units, of the rendezvous worker of media the router
	// did not decode, subtracted from its cost (affinity.go); 0 on every other candidate.
	Affinity float64 `json:"affinity"`
	// InFlightBound is the ttft2 model's load bound: the most requests in flight a worker may hold,
	// this one included (ttft2).
	InFlightBound float64 `json:"in_flight_bound,omitempty"`
	// CreditedTokens is the cached prefix the ttft2 model credits: surviving_blocks · block_size
	// (at most request_tokens), and at least the pending prefix pending_blocks · block_size, which
	// always survives (ttft2).
	CreditedTokens float64 `json:"credited_tokens,omitempty"`
	// PrefillDoneTokens is the part of the worker's oldest queued prefill estimated to have run
	// (progress.go): the tokens its learned prefill time per token covers since that prefill began,
	// at most its own. ttft2 subtracts it from QueuedPrefillTokens (ttft2).
	PrefillDoneTokens int64 `json:"prefill_done_tokens,omitempty"`
	// OverrunTokens is, once the worker's oldest queued prefill has run past 1.5 × its accounted
	// tokens + 512 (progress.go: its credit was evicted), the rest of that request's whole prompt still to
	// run: its prompt tokens − the tokens its time so far covers. ttft2 adds it to
	// QueuedPrefillTokens and to the prefill the cached prefix must survive (ttft2).
	OverrunTokens int64 `json:"overrun_tokens,omitempty"`
	// BusyShare is the share of the available workers with prefill queued or running (ttft2).
	BusyShare float64 `json:"busy_share,omitempty"`
	// DelayedTokens is (request_tokens − CreditedTokens) · BusyShare: the prefill this request adds in front of the
	// requests that will queue behind it on a busy cluster (ttft2).
	DelayedTokens float64 `json:"delayed_tokens,omitempty"`
	// PendingBlocks is the prefix, in blocks, that requests this router sent to the worker and
	// that have not finished share with this one; counted as cached (OverlapBlocks is at least
	// this) because the worker stores their blocks before this request's prefill starts
	// (pending.go) (ttft2).
	PendingBlocks int `json:"pending_blocks,omitempty"`
	// PendingRequests is how many requests in flight on the worker share all of PendingBlocks
	// with this one: the herd the request would join there (ttft2).
	PendingRequests int `json:"pending_requests,omitempty"`
	// HerdBound is the most requests sharing one pending prefix that a worker may hold, this one
	// included: max(2, ceil(balance_factor · (herd + 1) / available workers)), herd being the
	// sum of PendingRequests over the available workers (balance.go; ttft2).
	HerdBound float64 `json:"herd_bound,omitempty"`
	// ColdRequest is set when some available worker credits a prefix but none ColdShare of the
	// request's tokens: the credits are not compared (CreditedTokens 0 on every candidate) and the
	// queues decide (applyTTFT2; ttft2).
	ColdRequest bool `json:"cold_request,omitempty"`
	// LearnedMaxRunning is the worker's running limit as the router learned it (slots.go), which
	// ttft2 uses for WaitingSequences and QueueTokens when max_running is not configured; 0 while
	// unknown (no wait term) and whenever max_running is configured (ttft2).
	LearnedMaxRunning int64 `json:"learned_max_running,omitempty"`
	// SurvivingBlocks is the part of the cached prefix, in blocks, that stays in the worker's LRU
	// cache while the prefill queued ahead of the request (active_prefill_tokens / block_size
	// blocks) is stored; CacheBlocks is the worker's learned eviction age in blocks, 0 while unknown (then
	// the whole prefix survives) (kv/index/age.go; ttft2).
	SurvivingBlocks int     `json:"surviving_blocks,omitempty"`
	CacheBlocks     float64 `json:"cache_blocks,omitempty"`
}

// Score returns one worker's cost and its terms under the configured model.
//
// ttft2 (the default) is computed by Select (applyTTFT2), which needs every candidate's load: the
// cached prefix credited as far as it survives the queued prefill, the uncached rest counted
// 1 + busy_share times, plus the queued prefill and the queue term.
//
// ttft (the default before issue 26), in prefill tokens, so that cost × the worker's prefill time per token
// estimates the time to first token:
//
//	cost = max(request_tokens − overlap_blocks·block_size, 0) + active_prefill_tokens
//	       + queue_wait_tokens · max(active_requests + 1 − max_running, 0)   (max_running > 0)
//
// (queue_wait_tokens 0 means 1024.)
//
// Decode load is not a cost term: a decoding sequence slows the worker's prefill little while it
// runs, and it bites through the running limit (the queue term) and KV memory (the
// max_active_decode_blocks busy threshold). The model is SGLang's cache-aware policy with the
// balance gate replaced by an estimate of the wait (sgl-router src/policies/cache_aware.rs), and
// Dynamo's prefill term with overlap_score_weight → ∞ and decode_blocks moved into busy thresholds
// (lib/llm/src/kv_router/scheduler.rs); docs/architecture.md, "Cost model".
//
// Balance is not a cost term: with ttft, Select skips workers over the load bound (BalanceFactor,
// balance.go). linear is DESIGN.md §7 (see Cost).
func (c *Config) Score(load Load, requestTokens, blockSize, overlapBlocks int) (float64, Terms) {
	if c.CostModel == CostLinear {
		bs := float64(blockSize)
		prefill := (float64(load.PrefillTokens) + float64(requestTokens)) / bs
		t := Terms{
			PrefillBlocks: c.PrefillLoadScale * math.Max(prefill-c.OverlapCredit*float64(overlapBlocks), 0),
			DecodeBlocks:  float64(load.DecodeBlocks) + math.Ceil(float64(requestTokens)/bs),
		}
		return t.PrefillBlocks + t.DecodeBlocks, t
	}
	t := Terms{
		UncachedTokens:      max(int64(requestTokens)-int64(overlapBlocks)*int64(blockSize), 0),
		QueuedPrefillTokens: max(load.PrefillTokens, 0),
	}
	if c.MaxRunning > 0 {
		t.WaitingSequences = max(load.Requests+1-c.MaxRunning, 0)
		wait := c.QueueWaitTokens
		if wait == 0 {
			wait = DefaultQueueWaitTokens
		}
		t.QueueTokens = float64(t.WaitingSequences) * wait
	}
	return float64(t.UncachedTokens+t.QueuedPrefillTokens) + t.QueueTokens, t
}

// Cost is Score without the terms. For the linear model (DESIGN.md §7), in float64:
// prefill_blocks = (active_prefill_tokens + request_tokens) / block_size,
// decode_blocks = active_decode_blocks + ceil(request_tokens / block_size),
// cost = prefill_load_scale · max(prefill_blocks − overlap_credit · overlap_blocks, 0) + decode_blocks.
func (c *Config) Cost(load Load, requestTokens, blockSize, overlapBlocks int) float64 {
	cost, _ := c.Score(load, requestTokens, blockSize, overlapBlocks)
	return cost
}

// validateModel checks the cost model's name and its own parameters.
func (c *Config) validateModel() error {
	switch c.CostModel {
	case "", CostTTFT, CostLinear, CostTTFT2:
	default:
		return fmt.Errorf("cost must be %s, %s or %s, got %q", CostTTFT2, CostTTFT, CostLinear, c.CostModel)
	}
	if c.BalanceFactor > 0 && c.BalanceFactor < 1 || math.IsNaN(c.BalanceFactor) || math.IsInf(c.BalanceFactor, 0) {
		return fmt.Errorf("balance_factor must be >= 1 (0: default, negative: off), got %v", c.BalanceFactor)
	}
	if c.BalanceWindow < 0 {
		return fmt.Errorf("balance_window must be >= 0, got %d", c.BalanceWindow)
	}
	if c.MaxRunning < 0 {
		return fmt.Errorf("max_running must be >= 0, got %d", c.MaxRunning)
	}
	if c.QueueWaitTokens < 0 || math.IsNaN(c.QueueWaitTokens) || math.IsInf(c.QueueWaitTokens, 0) {
		return fmt.Errorf("queue_wait_tokens must be a finite number >= 0, got %v", c.QueueWaitTokens)
	}
	return nil
}

// applyTTFT2 rescores every candidate under the ttft2 model, which needs all candidates' loads:
//
//	queued_prefill_tokens = active_prefill_tokens − prefill_done_tokens + overrun_tokens (progress.go)
//	surviving_blocks      = the leading overlap blocks whose age + (active_prefill_tokens +
//	                        overrun_tokens) / block_size stays within the worker's learned
//	                        cache_blocks (all while unknown)
//	credited_tokens       = max(min(surviving_blocks · block_size, request_tokens),
//	                            min(pending_blocks · block_size, request_tokens)),
//	                        0 on every candidate when the largest is below ColdShare · request_tokens
//	uncached'             = request_tokens − credited_tokens
//	cost                  = uncached' · (1 + busy_share) + queued_prefill_tokens + queue_tokens
//
// A cached prefix is credited when it survives: while the prefill queued ahead of the request runs,
// the worker's LRU cache stores its blocks and evicts the least recently used, so a prefix last used
// long ago may be gone when the request's own prefill starts (kv/index/age.go learns the ages and the
// eviction age from the worker's KV events). This replaced a decay by the excess queue (Dynamo's
// credit_decay shape, lib/llm/src/kv_router), a stand-in for the same loss. busy_share is the share
// of the available candidates with prefill tokens in flight. costs (the decision's map) is updated.
//
// A cold request (ColdRequest: no worker credits ColdShare of it) is placed on the queues alone,
// ties going to the worker with the fewest recent requests: a short prefix every busy worker holds
// (a system prompt) would otherwise keep the cold requests off a worker that does not hold it yet,
// and, under a load that never builds a queue, keep that worker idle and its cache empty for good
// (bench/quality, issue 26 seventh pass: one of four workers got no request in about one run of
// ten). sgl-router's cache-aware policy (src/policies/cache_aware.rs) does the same below its
// cache_threshold, sending such a request to the worker with the smallest tree.
func applyTTFT2(scored []Scored, costs map[index.WorkerKey]float64, requestTokens, blockSize int) {
	avail, busy := 0, 0
	for _, sc := range scored {
		if sc.Available {
			avail++
			if sc.Load.PrefillTokens > 0 {
				busy++
			}
		}
	}
	share := 0.0
	if avail > 0 {
		share = float64(busy) / float64(avail)
	}
	r := float64(max(requestTokens, 0))
	bs := float64(max(blockSize, 1))
	best := 0.0
	for i := range scored {
		sc := &scored[i]
		t := &sc.Terms
		q := max(sc.Load.PrefillTokens-t.PrefillDoneTokens, 0) + t.OverrunTokens
		t.QueuedPrefillTokens = q
		t.CacheBlocks = sc.CacheBlocks
		// Every block of the prefill queued ahead is stored before this one starts, the part
		// already run included: an engine stores a prefill's blocks when it ends (with chunked
		// prefill, per chunk; those are then counted twice, which credits less).
		t.SurvivingBlocks = index.Surviving(sc.Ages, sc.OverlapBlocks, sc.CacheBlocks, float64(max(sc.Load.PrefillTokens, 0)+t.OverrunTokens)/bs)
		t.CreditedTokens = math.Min(float64(t.SurvivingBlocks)*bs, r)
		// A pending prefix always survives: the request that stores it is in the queue ahead of
		// this one, so its blocks are the most recently stored when this prefill starts.
		t.CreditedTokens = math.Max(t.CreditedTokens, math.Min(float64(sc.PendingBlocks)*bs, r))
		sc.expectedCached = t.CreditedTokens
		t.BusyShare = share
		if sc.Available {
			best = math.Max(best, t.CreditedTokens)
		}
	}
	cold := best > 0 && best < ColdShare*r // without any credit there is nothing to set aside
	for i := range scored {
		sc := &scored[i]
		t := &sc.Terms
		if cold {
			t.ColdRequest, t.CreditedTokens = true, 0
		}
		uncached := r - t.CreditedTokens
		t.DelayedTokens = uncached * share
		sc.Cost = uncached + t.DelayedTokens + float64(t.QueuedPrefillTokens) + t.QueueTokens
		costs[sc.Worker] = sc.Cost
	}
}

// ColdShare is the share of a request's tokens below which the ttft2 model does not compare the
// workers' credits (applyTTFT2). sgl-router's cache_threshold plays this part at 0.5; 0.2 sets
// aside a system prompt ahead of a long request and keeps comparing a credit that is a real share
// of it, a document or a conversation (docs/architecture.md, "Cost model", seventh pass).
const ColdShare = 0.2

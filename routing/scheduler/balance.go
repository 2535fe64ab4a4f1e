package scheduler

import (
	"math"
	"sync"

	"github.com/kvroute/kvroute/kv/index"
)

// Defaults of the ttft model's load bound.
const (
	// DefaultBalanceFactor is the default BalanceFactor: a worker may take up to 1.1× its fair
	// share of the recent requests (HAProxy's hash-balance-factor 110). bench/quality: 1.25 let
	// the requests per worker drift to 1.35 max/min on the repeated-video workload, 1.1 kept it at
	// 1.07 with the same hit rate within 1 %.
	DefaultBalanceFactor = 1.1
	// DefaultInFlightFactor is the default BalanceFactor of ttft2 (the default model), whose bound
	// counts the requests in flight now: a worker may hold up to 1.5× its fair share of them. It
	// is loose on purpose: it does not decide between workers on conversation traffic (trace
	// replay, 3 slices × 2 rounds: TTFT mean 0.94×, 0.86×, 0.39× linear's with it, 0.92×, 0.88×,
	// 0.40× without; 1.1 cost time there, docs/architecture.md "Cost model"), it stops a herd: a
	// burst of identical requests, each credited the first one's pending prefix, which the cost
	// alone sends to one worker (TestTextRouting, issue 4).
	DefaultInFlightFactor = 1.5
	// DefaultBalanceWindow is the default BalanceWindow, in routed requests per available worker.
	DefaultBalanceWindow = 25
	// pruneBelow drops a worker's recent count once it decayed below this (a worker that left).
	pruneBelow = 1e-3
)

// recentLoad counts the requests this scheduler routed to each worker, decayed by
// (1 − 1/(window · workers)) per routed request, so the counts cover about the last window requests
// per worker. It feeds the load bound
// of consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam, SODA 2018): a worker
// may take a request while its count + 1 ≤ ceil(factor · (total + 1) / available workers).
type recentLoad struct {
	mu     sync.Mutex
	window float64
	counts map[index.WorkerKey]float64
}

func newRecentLoad(window int) *recentLoad {
	return &recentLoad{window: float64(window), counts: map[index.WorkerKey]float64{}}
}

// add records one request routed to w among `workers` available workers.
func (r *recentLoad) add(w index.WorkerKey, workers int) {
	decay := 1 - 1/(r.window*float64(max(workers, 1)))
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, c := range r.counts {
		if c *= decay; c < pruneBelow {
			delete(r.counts, k)
		} else {
			r.counts[k] = c
		}
	}
	r.counts[w]++
}

// snapshot returns the counts of ws.
func (r *recentLoad) snapshot(ws []Candidate) []float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]float64, len(ws))
	for i, c := range ws {
		out[i] = r.counts[c.Worker]
	}
	return out
}

// balanceBound is ceil(factor · (total + 1) / n): the most recent requests one of n workers may
// hold, this one included.
func balanceBound(factor, total float64, n int) float64 {
	return math.Ceil(factor * (total + 1) / float64(n))
}

func (c *Config) balanceFactor() float64 {
	switch {
	case c.BalanceFactor == 0 && c.Model() == CostTTFT2:
		return DefaultInFlightFactor
	case c.BalanceFactor == 0:
		return DefaultBalanceFactor
	case c.BalanceFactor < 0:
		return 0
	}
	return c.BalanceFactor
}

func (c *Config) balanceWindow() int {
	if c.BalanceWindow == 0 {
		return DefaultBalanceWindow
	}
	return c.BalanceWindow
}

// markOverInFlight sets RecentRequests and, unless the bound is off (factor 0), the ttft2 model's
// load bound: a candidate is over it when its requests in flight now, this one included, exceed
// ceil(factor · (in flight on the available candidates + 1) / available). The bound counts what is
// running or queued on the worker now, not what was routed to it over a window: requests that
// finished (a conversation's earlier turns) no longer count against the worker that caches the
// conversation.
//
// It stops only a request that would join a herd there (OverBalance): a request that rides the
// worker (rides: its credit is a pending prefix at least as long as the index's) while more than
// the herd bound of requests in flight there share that prefix, or that rides its affinity
// (applyAffinity). A rider adds next to no prefill, so the queue model lets any number of them
// pile onto one worker (a burst of identical requests, or of one undecoded clip); what the herd
// costs there — the decode batch, KV memory, one worker's failure taking every request — is
// outside the model and the bound stands in for it. The herd bound,
//
//	herd_bound = max(2, ceil(factor · (herd + 1) / available)),   herd = Σ pending_requests,
//
// is the in-flight bound applied to the requests sharing this one's prefix; it lets a request
// always join one: the next turn of a conversation rides only its previous turn, which is no herd,
// and sending it elsewhere loses the whole conversation's prefix (issue 26, seventh pass: slice
// 3300:150@1.3, TTFT mean 0.85× linear's with every rider over the in-flight bound stopped, 0.79×
// with the bound off, which the herd bound keeps). A request credited by the index alone brings
// its own uncached prefill and sees the queue, so the model prices it; bounding it only cost hits
// (fifth pass: 1.11–1.15× linear's with every request bounded).
func (s *Scheduler) markOverInFlight(scored []Scored, cands []Candidate, factor float64, available int) {
	for i, c := range s.recent.snapshot(cands) {
		scored[i].RecentRequests = c // the tie-break reads them, with or without the bound
	}
	if factor == 0 {
		return
	}
	total, herd := 0.0, 0.0
	for i := range scored {
		if scored[i].Available {
			total += float64(max(scored[i].Load.Requests, 0))
			herd += float64(max(scored[i].PendingRequests, 0))
		}
	}
	bound := balanceBound(factor, total, available)
	herdBound := max(minHerd, balanceBound(factor, herd, available))
	for i := range scored {
		sc := &scored[i]
		sc.Terms.InFlightBound = bound
		sc.overInFlight = sc.Available && float64(sc.Load.Requests)+1 > bound
		if rides(sc) {
			sc.Terms.HerdBound = herdBound
			sc.OverBalance = sc.overInFlight && float64(sc.PendingRequests)+1 > herdBound
		}
	}
}

// minHerd is the herd bound's floor: a request may always join one request in flight that shares
// its prefix (its conversation's previous turn).
const minHerd = 2

// fewestRecent keeps the tied candidates with the fewest recently routed requests (ttft2): a choice
// the cache and the queues do not decide (a cold prompt on idle workers) goes where it restores the
// long-run balance instead of to a random worker.
func fewestRecent(tied []int, scored []Scored) []int {
	lo := math.Inf(1)
	for _, i := range tied {
		lo = math.Min(lo, scored[i].RecentRequests)
	}
	var out []int
	for _, i := range tied {
		if scored[i].RecentRequests == lo {
			out = append(out, i)
		}
	}
	return out
}

// rides reports whether the candidate's credit is a pending prefix at least as long as the
// index's overlap: the request shares its prefix with a request still in flight there.
func rides(sc *Scored) bool {
	return sc.PendingBlocks > 0 && sc.PendingBlocks >= sc.OverlapBlocks
}

package router

import (
	"context"
	"math"
	"sort"
	"time"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// Scoring (DESIGN.md §1 steps 5 and 7): each worker's overlap from the index, the scheduler's
// costs and choice turned into the Result's ranked candidates, and the load accounting of the
// request on the worker it goes to.

// loadOnly scores the workers on load alone (no prefix) and records the fallback.
func (r *Router) loadOnly(ctx context.Context, res *Result, workers []Worker, in *Input, code reason.Code, detail string) (*Result, error) {
	res.Fallback, res.Detail = code, detail
	bs := workers[0].BlockSize
	if bs <= 0 {
		bs = 1
	}
	_ = r.score(ctx, res, workers, in, nil, 0, bs)
	return res, nil
}

// score looks the hashes up, scores every worker and fills the decision fields of res.
func (r *Router) score(ctx context.Context, res *Result, workers []Worker, in *Input, hashes []kv.BlockHash, requestTokens, bs int) error {
	t := time.Now()
	if r.onHashes != nil {
		r.onHashes(hashes)
	}
	cfg := r.sched.Config()
	ttft2 := cfg.Model() == scheduler.CostTTFT2
	overlap := map[string]int{}
	if len(hashes) > 0 && ttft2 {
		// ttft2 also asks whether the cached prefix survives the prefill queued ahead of it
		// (kv/index/age.go): the match carries each worker's age profile.
		res.hashes, res.matched = hashes, map[string]index.AgedOverlap{}
		for _, o := range r.index.MatchAges(context.Background(), hashes) {
			if o.Blocks > overlap[o.Worker.ID] {
				overlap[o.Worker.ID] = o.Blocks
				res.matched[o.Worker.ID] = o
			}
		}
	} else if len(hashes) > 0 {
		for _, o := range r.index.Match(context.Background(), hashes) {
			if o.Blocks > overlap[o.Worker.ID] {
				overlap[o.Worker.ID] = o.Blocks
			}
		}
	}
	r.stage(ctx, "index", t)
	t = time.Now()
	// ttft2 also credits the prefix that requests in flight on a worker share with this one: the
	// worker caches it before this request's prefill starts, the index learns it later
	// (scheduler/pending.go).
	var keys []uint64
	if cfg.Model() == scheduler.CostTTFT2 && len(hashes) > 0 {
		keys = scheduler.PrefixKeys(hashes)
	}
	cands := make([]scheduler.Candidate, len(workers))
	for i := range workers {
		w := &workers[i]
		avail := in.Available == nil || in.Available(w)
		// the engine never reuses its prompt's last token (reuse.go): a prompt that fills its
		// last block is credited one block less than the index holds
		limit := ReuseCapBlocks(w.Engine, requestTokens, bs)
		ov := min(overlap[w.ID], limit)
		pend, herd := 0, 0
		if keys != nil {
			pend, herd = r.sched.Pending(index.WorkerKey{ID: w.ID}, keys)
			pend = min(pend, limit)
			ov = max(ov, pend)
		}
		cands[i] = scheduler.Candidate{Worker: index.WorkerKey{ID: w.ID}, Endpoint: w.Endpoint, Available: avail, OverlapBlocks: ov,
			PendingBlocks: pend, PendingRequests: herd}
		if m, ok := res.matched[w.ID]; ok {
			cands[i].Ages, cands[i].CacheBlocks = m.Ages, m.CacheBlocks
		}
	}
	res.RequestTokens = requestTokens
	res.CostModel = cfg.Model()
	d, err := r.sched.Select(scheduler.Request{Tokens: requestTokens, BlockSize: bs, Affinity: res.affinity, PrefixKeys: keys}, cands)
	if res.Affinity != nil {
		res.Affinity.WorkerID = d.AffinityWorker.ID
	}
	r.stage(ctx, "score", t)
	res.Costs = make(map[string]float64, len(d.Candidates))
	if len(d.Candidates) > 0 {
		res.Ranked = make([]Candidate, 0, len(d.Candidates)) // score runs once per Route
	}
	for _, c := range d.Candidates {
		res.Costs[c.Worker.ID] = c.Cost
		res.Ranked = append(res.Ranked, Candidate{WorkerID: c.Worker.ID, Endpoint: c.Endpoint, OverlapBlocks: c.OverlapBlocks,
			Cost: c.Cost, Available: c.Available, Terms: c.Terms, Load: c.Load, Busy: c.Busy,
			OverBalance: c.OverBalance, RecentRequests: c.RecentRequests})
	}
	if err != nil {
		if res.Fallback == "" {
			res.Detail = err.Error()
		}
		return err
	}
	sort.SliceStable(res.Ranked, func(i, j int) bool {
		a, b := res.Ranked[i], res.Ranked[j]
		if a.WorkerID == d.Worker.ID || b.WorkerID == d.Worker.ID {
			return a.WorkerID == d.Worker.ID
		}
		if a.Available != b.Available {
			return a.Available
		}
		return a.Cost < b.Cost || (a.Cost == b.Cost && a.WorkerID < b.WorkerID)
	})
	res.Chosen = &res.Ranked[0]
	res.OverlapBlocks = d.OverlapBlocks
	if math.IsNaN(d.Cost) {
		res.Detail = "cost is NaN"
	}
	res.decision, res.hasDecision = d, true
	return nil
}

// Begin accounts the routed request's load on its worker (DESIGN.md §1 step 7). It returns nil
// when there is nothing to account (no decision).
func (r *Router) Begin(res *Result) *scheduler.Handle {
	if res == nil || !res.hasDecision {
		return nil
	}
	// The chosen worker's engine reuses its cached prefix: that use is no KV event, so the
	// router stamps it for the age profiles (kv/index/age.go).
	if m, ok := res.matched[res.decision.Worker.ID]; ok {
		r.index.Touch(context.Background(), m.Worker, res.hashes, m.Blocks)
	}
	return r.sched.Begin(res.decision)
}

package router

import (
	"context"
	"testing"

	"github.com/kvroute/kvroute/kv"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// TestBeginTouchesCachedPrefix (ttft2): worker sim-a caches the request's prompt, then stores a
// 100-block prompt of another request and evicts a block (so its capacity is known: the most it
// held). The decision shows the capacity and the whole prefix surviving (nothing queued); Begin
// then stamps the prefix as used now, which the index's age profile shows (the first block's age
// falls from 101 to 1), since a full hit is no KV event.
func TestBeginTouchesCachedPrefix(t *testing.T) {
	body := wordsChatBody(600)
	r := newRouterWithCost(t, scheduler.CostTTFT2)
	ctx := context.Background()
	route := func() *Result {
		res, err := r.Route(ctx, &Input{Path: "/v1/chat/completions", Body: body, Workers: testWorkers()})
		if err != nil || res.Fallback != "" || res.Chosen == nil {
			t.Fatalf("route: %v %v", err, res)
		}
		return res
	}
	hashes := route().hashes
	if len(hashes) < 30 {
		t.Fatalf("%d block hashes", len(hashes))
	}
	a := index.WorkerKey{ID: "sim-a"}
	store := func(engine0 kv.EngineHash, locals []kv.BlockHash) {
		blocks := make([]index.StoredBlock, len(locals))
		for i, h := range locals {
			blocks[i] = index.StoredBlock{EngineHash: engine0 + kv.EngineHash(i), LocalHash: h}
			if i > 0 {
				blocks[i].Parent, blocks[i].HasParent = engine0+kv.EngineHash(i-1), true
			}
		}
		if err := r.index.Store(ctx, a, blocks); err != nil {
			t.Fatal(err)
		}
	}
	other := make([]kv.BlockHash, 100)
	for i := range other {
		other[i] = kv.BlockHash(1_000_000 + i)
	}
	store(1, hashes)
	store(10_000, other)
	r.index.Remove(ctx, a, []kv.EngineHash{10_099})
	capacity := float64(len(hashes) + len(other))
	firstAge := func() uint32 { return r.index.MatchAges(ctx, hashes)[0].Ages[0].Age }
	if got := firstAge(); got != 101 {
		t.Fatalf("first block's age before the request: %d, want 101", got)
	}

	res := route()
	if res.Chosen.WorkerID != "sim-a" {
		t.Fatalf("went to %s, the prompt is cached on sim-a", res.Chosen.WorkerID)
	}
	want := ReuseCapBlocks(kv.EngineVLLM, res.RequestTokens, 16)
	if tm := res.Chosen.Terms; tm.CacheBlocks != capacity || tm.SurvivingBlocks != want || tm.CreditedTokens != float64(want*16) {
		t.Fatalf("terms %+v, want cache_blocks %v and %d surviving blocks", tm, capacity, want)
	}
	h := r.Begin(res)
	defer h.Done()
	if got := firstAge(); got != 1 {
		t.Fatalf("first block's age after Begin: %d, want 1", got)
	}
}

package router

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// TestPendingPrefixFollowsInFlight (ttft2): a text request routed to a worker and not finished
// makes that worker the holder of its prefix for the next request sharing it, although the index
// (no KV events yet) holds nothing: the second request is credited the first's complete blocks
// there (terms.pending_blocks) and goes to the same worker. Once the first is done nothing is
// pending, and the index (empty) decides again: overlap 0. Under ttft the pending prefix is not
// credited.
func TestPendingPrefixFollowsInFlight(t *testing.T) {
	body := wordsChatBody(600)
	for _, model := range []string{scheduler.CostTTFT2, scheduler.CostTTFT} {
		r := newRouterWithCost(t, model)
		route := func() *Result {
			res, err := r.Route(context.Background(), &Input{Path: "/v1/chat/completions", Body: body, Workers: testWorkers()})
			if err != nil || res.Fallback != "" || res.Chosen == nil {
				t.Fatalf("%s: route: %v %v", model, err, res)
			}
			return res
		}
		first := route()
		if first.OverlapBlocks != 0 || first.TotalBlocks < 30 {
			t.Fatalf("%s: first request overlap %d of %d blocks", model, first.OverlapBlocks, first.TotalBlocks)
		}
		h := r.Begin(first)
		// Ten more routings while the first is in flight: each is pending-credited on its
		// worker, and none is begun, so only the first's prefix is held.
		for range 10 {
			second := route()
			want, wantPending := 0, 0
			if model == scheduler.CostTTFT2 {
				want = ReuseCapBlocks(testWorkers()[0].Engine, first.RequestTokens, 16)
				wantPending = want
			}
			if model == scheduler.CostTTFT2 && second.Chosen.WorkerID != first.Chosen.WorkerID {
				t.Fatalf("%s: second request went to %s, the first is in flight on %s", model, second.Chosen.WorkerID, first.Chosen.WorkerID)
			}
			var held Candidate
			for _, c := range second.Ranked {
				if c.WorkerID == first.Chosen.WorkerID {
					held = c
				}
			}
			if held.OverlapBlocks != want || held.Terms.PendingBlocks != wantPending {
				t.Fatalf("%s: candidate %s overlap %d pending %d, want %d and %d", model, held.WorkerID, held.OverlapBlocks, held.Terms.PendingBlocks, want, wantPending)
			}
		}
		h.Done()
		if after := route(); after.OverlapBlocks != 0 {
			t.Fatalf("%s: after the first is done: overlap %d, want 0", model, after.OverlapBlocks)
		}
	}
}

// wordsChatBody is a chat request whose one user message is n distinct words (w0 w1 …).
func wordsChatBody(n int) []byte {
	words := make([]string, n)
	for i := range words {
		words[i] = fmt.Sprintf("w%d", i)
	}
	return []byte(`{"model":"qwen","messages":[{"role":"user","content":"` + strings.Join(words, " ") + `"}]}`)
}

// newRouterWithCost is newTestRouter with the given cost model.
func newRouterWithCost(t *testing.T, model string) *Router {
	t.Helper()
	m, err := testModel()
	if err != nil {
		t.Fatal(err)
	}
	lm, err := layout.LoadModel(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := index.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := scheduler.DefaultConfig()
	cfg.CostModel = model
	s, err := scheduler.New(cfg, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(DefaultConfig(), m, lm, ix, s, nil, Hooks{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

package scheduler_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/kvroute/kvroute/routing/scheduler"
)

// TestLargeBlockSizes checks both cost models and the load accounting at the attention block sizes
// of hybrid models (528, 1056, 2096 tokens). Request: 5 complete blocks and 100 tokens more.
// Linear (DESIGN.md §7): w1 holds all 5 blocks and is idle: 100/bs + 6. w2 holds nothing:
// 5 + 100/bs + 6. w3 holds all 5 but carries 4 blocks of prefill and 3 decode blocks:
// (4bs + 5bs + 100)/bs − 5 + 3 + 6 = 13 + 100/bs. ttft (tokens): w1 100, w2 5bs + 100, w3 4bs + 100.
func TestLargeBlockSizes(t *testing.T) {
	for _, model := range []string{scheduler.CostLinear, scheduler.CostTTFT} {
		for _, bs := range []int{528, 1056, 2096} {
			t.Run(fmt.Sprint(model, bs), func(t *testing.T) {
				largeBlocks(t, model, bs)
			})
		}
	}
}

func largeBlocks(t *testing.T, model string, bs int) {
	t.Helper()
	cfg := scheduler.DefaultConfig()
	cfg.CostModel = model
	s := newSched(t, cfg, 1)
	s.Tracker().Adjust(w3, int64(4*bs), 3, 1)
	req := scheduler.Request{Tokens: 5*bs + 100, BlockSize: bs}
	d, err := s.Select(req, []scheduler.Candidate{cand(w1, 5), cand(w2, 0), cand(w3, 5)})
	if err != nil {
		t.Fatal(err)
	}
	frac := 100 / float64(bs)
	want := map[string]float64{"w1": frac + 6, "w2": 5 + frac + 6, "w3": 13 + frac}
	if model == scheduler.CostTTFT {
		want = map[string]float64{"w1": 100, "w2": float64(5*bs + 100), "w3": float64(4*bs + 100)}
	}
	for w, c := range d.Costs {
		if math.Abs(c-want[w.ID]) > 1e-9 {
			t.Errorf("cost of %s = %v, want %v", w.ID, c, want[w.ID])
		}
	}
	if d.Worker != w1 || d.TotalBlocks != 5 || d.DecodeBlocks != 6 || d.PrefillTokens != 100 {
		t.Fatalf("decision %v total %d decode %d prefill %d, want w1 5 6 100", d.Worker, d.TotalBlocks, d.DecodeBlocks, d.PrefillTokens)
	}
	h := s.Begin(d)
	if got := s.Tracker().Load(w1); got != (scheduler.Load{PrefillTokens: 100, DecodeBlocks: 6, Requests: 1}) {
		t.Errorf("after Begin: %+v", got)
	}
	h.Done()
}

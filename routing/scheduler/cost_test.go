package scheduler_test

import (
	"math"
	"testing"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// The issue-19 case: a 460-token request (block size 16) whose first 27 blocks (432 tokens) w1
// holds; w1 also runs one earlier request of 29 blocks that finished prefill and is decoding.
func TestTTFTCostPrefersCachedWorker(t *testing.T) {
	req := scheduler.Request{Tokens: 460, BlockSize: 16}
	cands := []scheduler.Candidate{cand(w1, 27), cand(w2, 0)}
	for _, tc := range []struct {
		name  string
		cfg   *scheduler.Config
		costs map[index.WorkerKey]float64
		pick  index.WorkerKey
	}{
		// ttft: w1 460 − 432 = 28 uncached tokens, nothing queued; w2 460.
		{"ttft", ttft(), map[index.WorkerKey]float64{w1: 28, w2: 460}, w1},
		// The default (nil, ""), ttft2: the same on workers with no prefill queued (nothing decays
		// the credit, busy share 0).
		{"default_is_ttft2", nil, map[index.WorkerKey]float64{w1: 28, w2: 460}, w1},
		{"empty_is_ttft2", &scheduler.Config{}, map[index.WorkerKey]float64{w1: 28, w2: 460}, w1},
		// linear: w1 max(460/16 − 27, 0) + (29 + 29) = 1.75 + 58 = 59.75; w2 28.75 + 29 = 57.75. The
		// decoding request outweighs the 27 cached blocks, and the cache is lost.
		{"linear", linear(), map[index.WorkerKey]float64{w1: 59.75, w2: 57.75}, w2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSched(t, tc.cfg, 1)
			s.Tracker().Adjust(w1, 0, 29, 1)
			d, err := s.Select(req, cands)
			if err != nil {
				t.Fatal(err)
			}
			if d.Costs[w1] != tc.costs[w1] || d.Costs[w2] != tc.costs[w2] || d.Worker != tc.pick {
				t.Errorf("costs %v pick %v, want %v pick %v", d.Costs, d.Worker, tc.costs, tc.pick)
			}
		})
	}
}

func TestTTFTTerms(t *testing.T) {
	req := scheduler.Request{Tokens: 460, BlockSize: 16}
	cands := []scheduler.Candidate{cand(w1, 27), cand(w2, 0), cand(w3, 1)}
	cfg := ttft()
	cfg.MaxRunning = 2
	s := newSched(t, cfg, 1)
	// w1 prefills a 500-token request and decodes another: 28 + 500 queued, and with 2 running the
	// request waits for a slot: + 1 · 1024 = 1552.
	s.Tracker().Adjust(w1, 500, 61, 2)
	// w2 runs one decoding request: 460 uncached, no queue (1 + 1 − 2 = 0).
	s.Tracker().Adjust(w2, 0, 30, 1)
	// w3 runs three: 460 − 16 = 444, waiting 3 + 1 − 2 = 2 sequences: + 2048 = 2492.
	s.Tracker().Adjust(w3, 0, 90, 3)
	d, err := s.Select(req, cands)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		cost  float64
		terms scheduler.Terms
	}{
		{1552, scheduler.Terms{UncachedTokens: 28, QueuedPrefillTokens: 500, WaitingSequences: 1, QueueTokens: 1024}},
		{460, scheduler.Terms{UncachedTokens: 460}},
		{2492, scheduler.Terms{UncachedTokens: 444, WaitingSequences: 2, QueueTokens: 2048}},
	}
	for i, w := range want {
		if got := d.Candidates[i]; got.Cost != w.cost || got.Terms != w.terms {
			t.Errorf("%v: cost %v terms %+v, want %v %+v", got.Worker, got.Cost, got.Terms, w.cost, w.terms)
		}
	}
	if d.Worker != w2 {
		t.Errorf("picked %v, want w2", d.Worker)
	}
	// Without max_running there is no queue term: w1 528 (still behind w2's 460 on queued prefill),
	// w3 444 wins.
	d, _ = newSchedWithLoads(t, ttft(), s).Select(req, cands)
	if d.Costs[w1] != 528 || d.Costs[w3] != 444 || d.Worker != w3 {
		t.Errorf("no max_running: costs %v pick %v", d.Costs, d.Worker)
	}
	// Linear terms: w2 prefill 460/16 = 28.75, decode 30 + 29 = 59.
	lin, _ := newSchedWithLoads(t, linear(), s).Select(req, cands)
	if tm := lin.Candidates[1].Terms; tm != (scheduler.Terms{PrefillBlocks: 28.75, DecodeBlocks: 59}) || lin.Costs[w2] != 87.75 {
		t.Errorf("linear w2 terms %+v cost %v", tm, lin.Costs[w2])
	}
}

// ttft is the ttft model (the default before issue 26) named explicitly, with the other defaults.
func ttft() *scheduler.Config {
	c := scheduler.DefaultConfig()
	c.CostModel = scheduler.CostTTFT
	return c
}

// newSchedWithLoads is a scheduler with cfg over s's tracker.
func newSchedWithLoads(t *testing.T, cfg *scheduler.Config, s *scheduler.Scheduler) *scheduler.Scheduler {
	t.Helper()
	n, err := scheduler.NewWithTracker(cfg, nil, s.Tracker())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Decode load bites through the busy threshold: w1 is cheapest by ttft but holds more decode
// blocks than max_active_decode_blocks, so w2 takes the request.
func TestTTFTDecodeBusy(t *testing.T) {
	cfg := ttft()
	cfg.MaxActiveDecodeBlocks = 40
	s := newSched(t, cfg, 1)
	s.Tracker().Adjust(w1, 0, 58, 2)
	d, err := s.Select(scheduler.Request{Tokens: 460, BlockSize: 16}, []scheduler.Candidate{cand(w1, 27), cand(w2, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if d.Worker != w2 || !d.Candidates[0].Busy || d.Candidates[0].Cost != 28 || d.Cost != 460 {
		t.Errorf("picked %v (cost %v), w1 %+v", d.Worker, d.Cost, d.Candidates[0])
	}
}

func TestCostModelValidation(t *testing.T) {
	for _, c := range []scheduler.Config{
		{CostModel: "quadratic"},
		{MaxRunning: -1},
		{QueueWaitTokens: -1},
		{QueueWaitTokens: math.NaN()},
		{QueueWaitTokens: math.Inf(1)},
	} {
		if _, err := scheduler.New(&c, nil); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	for _, m := range []string{"", scheduler.CostTTFT, scheduler.CostLinear, scheduler.CostTTFT2} {
		if _, err := scheduler.New(&scheduler.Config{CostModel: m}, nil); err != nil {
			t.Errorf("cost %q: %v", m, err)
		}
	}
	if d := scheduler.DefaultConfig(); d.Model() != "ttft2" || d.QueueWaitTokens != 0 || d.MaxRunning != 0 {
		t.Errorf("defaults %+v", d)
	}
	for _, m := range []string{"linear", "ttft", "ttft2"} {
		if got := (&scheduler.Config{CostModel: m}).Model(); got != m {
			t.Errorf("model name %q: %q", m, got)
		}
	}
	// queue_wait_tokens set: one waiting sequence costs 100 tokens.
	c := &scheduler.Config{MaxRunning: 1, QueueWaitTokens: 100}
	if cost, tm := c.Score(scheduler.Load{Requests: 1}, 32, 16, 1); cost != 116 || tm.QueueTokens != 100 || tm.WaitingSequences != 1 {
		t.Errorf("queue_wait_tokens 100: cost %v terms %+v", cost, tm)
	}
}

// TestTTFT2Terms: a 480-token request; w1 caches 27 blocks (432 tokens) and has prefill queued,
// w2 is idle and cold, so half the workers are busy (busy_share 1/2) and w2's queue is the least.
//
// 96 queued on w1: credited 432 · 480 / (480 + 96) = 360, uncached 120, delayed 60, cost
// 120 + 60 + 96 = 276; w2: 480 + 240 = 720. Both models keep the cache (ttft: 48 + 96 = 144).
//
// 384 queued on w1: while they prefill, the cached prefix may leave w1's LRU, so the credit decays
// to 432 · 480 / 864 = 240: uncached 240, delayed 120, cost 240 + 120 + 384 = 744 > 720, and w2
// takes the request. ttft trades one for one and stays: 48 + 384 = 432 < 480.
func TestTTFT2Terms(t *testing.T) {
	req := scheduler.Request{Tokens: 480, BlockSize: 16}
	cands := []scheduler.Candidate{cand(w1, 27), cand(w2, 0)}
	for _, tc := range []struct {
		model                 string
		queued                int64
		want                  index.WorkerKey
		costW1, costW2        float64
		credited, share, dely float64
	}{
		{scheduler.CostTTFT2, 96, w1, 276, 720, 360, 0.5, 60},
		{scheduler.CostTTFT, 96, w1, 144, 480, 0, 0, 0},
		{scheduler.CostTTFT2, 384, w2, 744, 720, 240, 0.5, 120},
		{scheduler.CostTTFT, 384, w1, 432, 480, 0, 0, 0},
	} {
		s := newSched(t, &scheduler.Config{CostModel: tc.model}, 1)
		h := s.Tracker().Begin(w1, tc.queued, 30)
		d, err := s.Select(req, cands)
		if err != nil {
			t.Fatal(err)
		}
		c1, c2 := d.Candidates[0], d.Candidates[1]
		if d.Worker != tc.want || c1.Cost != tc.costW1 || c2.Cost != tc.costW2 || d.Costs[w1] != tc.costW1 ||
			c1.Terms.CreditedTokens != tc.credited || c1.Terms.BusyShare != tc.share || c1.Terms.DelayedTokens != tc.dely ||
			c1.Terms.UncachedTokens != 48 || c1.Terms.QueuedPrefillTokens != tc.queued || c1.OverBalance {
			t.Errorf("%s, %d queued: picked %v; w1 %+v; w2 %+v", tc.model, tc.queued, d.Worker, c1, c2)
		}
		if d.PrefillTokens != map[index.WorkerKey]int64{w1: 48, w2: 480}[d.Worker] {
			t.Errorf("%s: accounted prefill %d on %v", tc.model, d.PrefillTokens, d.Worker)
		}
		h.Done()
	}
}

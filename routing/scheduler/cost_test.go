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
// w2 is idle and cold, so half the workers are busy (busy_share 1/2).
//
// When the cached prefix survives the queue: credited 432, uncached 48, delayed 24, cost
// 48 + 24 + queued (96: 168; 384: 456); w2: 480 + 240 = 720. With 384 queued tokens (24 blocks
// stored before the request's prefill) on a worker whose engine evicts at age 60, blocks last used
// 40 blocks ago are gone (40 + 24 ≥ 60): with the first 20 blocks younger, 20 survive, credited
// 320, uncached 160, delayed 80, cost 160 + 80 + 384 = 624 < 720; with all 27 old none survive,
// cost 720 + 384 = 1104, and w2 takes the request. ttft trades one for one and stays: 48 + 384 = 432.
func TestTTFT2Terms(t *testing.T) {
	req := scheduler.Request{Tokens: 480, BlockSize: 16}
	// w1 caches 27 of the request's 30 blocks: the first 20 were used 10 blocks ago, the rest 40.
	young := []index.AgeStep{{Depth: 0, Age: 10}, {Depth: 20, Age: 40}}
	old := []index.AgeStep{{Depth: 0, Age: 40}}
	for _, tc := range []struct {
		model                 string
		queued                int64
		ages                  []index.AgeStep
		capacity              float64
		want                  index.WorkerKey
		costW1, costW2        float64
		surviving             int
		credited, share, dely float64
	}{
		// Capacity unknown: the whole prefix survives any queue.
		{scheduler.CostTTFT2, 96, young, 0, w1, 168, 720, 27, 432, 0.5, 24},
		{scheduler.CostTTFT2, 384, old, 0, w1, 456, 720, 27, 432, 0.5, 24},
		// Capacity 60 blocks: 6 queued blocks leave all 27; 24 evict what is 40 old (40 + 24 ≥ 60).
		{scheduler.CostTTFT2, 96, young, 60, w1, 168, 720, 27, 432, 0.5, 24},
		{scheduler.CostTTFT2, 384, young, 60, w1, 624, 720, 20, 320, 0.5, 80},
		{scheduler.CostTTFT2, 384, old, 60, w2, 1104, 720, 0, 0, 0.5, 240},
		// ttft credits the index's overlap whatever the queue.
		{scheduler.CostTTFT, 96, old, 60, w1, 144, 480, 0, 0, 0, 0},
		{scheduler.CostTTFT, 384, old, 60, w1, 432, 480, 0, 0, 0, 0},
	} {
		c1 := cand(w1, 27)
		c1.Ages, c1.CacheBlocks = tc.ages, tc.capacity
		cands := []scheduler.Candidate{c1, cand(w2, 0)}
		s := newSched(t, &scheduler.Config{CostModel: tc.model}, 1)
		h := s.Tracker().Begin(w1, tc.queued, 30)
		d, err := s.Select(req, cands)
		if err != nil {
			t.Fatal(err)
		}
		c1s, c2s := d.Candidates[0], d.Candidates[1]
		if d.Worker != tc.want || c1s.Cost != tc.costW1 || c2s.Cost != tc.costW2 || d.Costs[w1] != tc.costW1 ||
			c1s.Terms.SurvivingBlocks != tc.surviving || c1s.Terms.CreditedTokens != tc.credited ||
			c1s.Terms.BusyShare != tc.share || c1s.Terms.DelayedTokens != tc.dely ||
			c1s.Terms.UncachedTokens != 48 || c1s.Terms.QueuedPrefillTokens != tc.queued || c1s.OverBalance {
			t.Errorf("%s, %d queued, capacity %v: picked %v; w1 %+v; w2 %+v", tc.model, tc.queued, tc.capacity, d.Worker, c1s, c2s)
		}
		if tc.model == scheduler.CostTTFT2 && c1s.Terms.CacheBlocks != tc.capacity {
			t.Errorf("cache_blocks %v, want %v", c1s.Terms.CacheBlocks, tc.capacity)
		}
		// The prefill accounted on w1 until the first byte: ttft the overlap's rest (48); ttft2 what
		// it does not expect to survive (160 when 20 of the 27 blocks do, not 48: the other 7 are
		// prefilled again, and counting them as cached would make w1's queue look shorter).
		wantPrefill := int64(48)
		if tc.model == scheduler.CostTTFT2 {
			wantPrefill = 480 - int64(tc.credited)
		}
		if d.Worker == w2 {
			wantPrefill = 480
		}
		if d.PrefillTokens != wantPrefill {
			t.Errorf("%s, %d queued, capacity %v: accounted prefill %d on %v, want %d", tc.model, tc.queued, tc.capacity, d.PrefillTokens, d.Worker, wantPrefill)
		}
		if on := d.PrefillOn(w1); tc.model == scheduler.CostTTFT2 && on != 480-int64(tc.credited) {
			t.Errorf("%s, %d queued, capacity %v: prefill on w1 %d, want %d", tc.model, tc.queued, tc.capacity, on, 480-int64(tc.credited))
		}
		h.Done()
	}
}

// TestColdRequestsReachAnEmptyWorker: w1–w3 cache a 3-block system prompt, w4 nothing; cold
// requests of 30 blocks come one at a time (each done before the next, no queue anywhere). Their
// credits (3 blocks, 10 % of the request, below ColdShare) are not compared: every candidate costs
// 480, and the tie goes to the worker with the fewest recent requests: two each. Compared, w4 would
// cost 48 tokens more than the others for every such request and never get one while the load
// builds no queue (bench/quality saw one worker of four without a request). A request whose prompt
// w1 caches at 6 of 30 blocks (20 %) is not cold: it goes to w1 at 384 against 480.
func TestColdRequestsReachAnEmptyWorker(t *testing.T) {
	s := newSched(t, &scheduler.Config{CostModel: scheduler.CostTTFT2}, 1)
	req := scheduler.Request{Tokens: 480, BlockSize: 16}
	per := map[index.WorkerKey]int{}
	for i := range 8 {
		cands := []scheduler.Candidate{cand(w1, 3), cand(w2, 3), cand(w3, 3), cand(w4, 0)}
		d, err := s.Select(req, cands)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range d.Candidates {
			if c.Cost != 480 || !c.Terms.ColdRequest || c.Terms.CreditedTokens != 0 {
				t.Fatalf("request %d: %v cost %v, terms %+v; want 480, cold, nothing credited", i, c.Worker, c.Cost, c.Terms)
			}
		}
		per[d.Worker]++
		s.Begin(d).Done()
	}
	for _, w := range []index.WorkerKey{w1, w2, w3, w4} {
		if per[w] != 2 {
			t.Fatalf("cold requests per worker %v, want 2 each", per)
		}
	}
	d, err := s.Select(req, []scheduler.Candidate{cand(w1, 6), cand(w2, 3), cand(w3, 3), cand(w4, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if d.Worker != w1 || d.Costs[w1] != 384 || d.Costs[w4] != 480 || d.Candidates[0].Terms.ColdRequest {
		t.Fatalf("20 %% cached on w1: picked %v, costs %v, w1 terms %+v; want w1 at 384, not cold", d.Worker, d.Costs, d.Candidates[0].Terms)
	}
}

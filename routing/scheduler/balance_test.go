package scheduler_test

import (
	"math"
	"slices"
	"testing"

	"github.com/kvroute/kvroute/kv/index"

	"github.com/kvroute/kvroute/routing/scheduler"
)

// TestBalanceBound: w1 holds the request's prefix and is always cheapest. With the default bound
// (factor 1.1, window 25 per worker: decay 1 − 1/50 per routed request over 2 workers) it takes the
// first two requests, which stay in flight; then its recent count 1·decay + 1 = 1.98, plus this
// one, exceeds ceil(1.1 · (1.98 + 1) / 2) = 2, so the third goes to w2. Once w1's requests finished
// it is idle and never over the bound. Select alone (explain) counts nothing.
func TestBalanceBound(t *testing.T) {
	req := scheduler.Request{Tokens: 460, BlockSize: 16}
	cands := []scheduler.Candidate{cand(w1, 27), cand(w2, 0)}
	decay := 1 - 1/50.0
	s := newSched(t, ttft(), 1)
	var open []*scheduler.Handle
	for i := range 2 {
		d, err := s.Select(req, cands)
		if err != nil || d.Worker != w1 {
			t.Fatalf("request %d: %v %v", i, d.Worker, err)
		}
		h := s.Begin(d)
		h.FirstByte() // decoding: in flight, no prefill queued
		open = append(open, h)
	}
	for range 5 { // explain's Select: no Begin, no count
		_, _ = s.Select(req, cands)
	}
	d, err := s.Select(req, cands)
	if err != nil {
		t.Fatal(err)
	}
	c1, c2 := d.Candidates[0], d.Candidates[1]
	if d.Worker != w2 || !c1.OverBalance || c1.Eligible || c1.RecentRequests != 1*decay+1 || c1.Cost != 28 ||
		c2.OverBalance || c2.RecentRequests != 0 || d.Cost != 460 {
		t.Errorf("third request: picked %v; w1 %+v; w2 %+v", d.Worker, c1, c2)
	}
	// Unavailable workers are not part of the fair share and never marked.
	un := cand(w3, 0)
	un.Available = false
	d, _ = s.Select(req, []scheduler.Candidate{cand(w1, 27), cand(w2, 0), un})
	if d.Candidates[2].OverBalance || d.Worker != w2 {
		t.Errorf("with an unavailable worker: picked %v, %+v", d.Worker, d.Candidates[2])
	}
	for _, h := range open {
		h.Done()
	}
	// Idle again: the same counts, but w1 has nothing in flight, so it takes the request.
	if d, _ = s.Select(req, cands); d.Worker != w1 || d.Candidates[0].OverBalance || d.Candidates[0].RecentRequests != 1*decay+1 {
		t.Errorf("idle w1: picked %v, w1 %+v", d.Worker, d.Candidates[0])
	}
	// The bound off (negative factor): w1 keeps every request. The linear model has no bound
	// (its decode term is its balance): nothing is counted or marked.
	for _, cfg := range []*scheduler.Config{{CostModel: scheduler.CostTTFT, BalanceFactor: -1}, {CostModel: scheduler.CostLinear, PrefillLoadScale: 1, OverlapCredit: 1}} {
		o := newSched(t, cfg, 1)
		for i := range 3 {
			d, _ := o.Select(req, cands)
			if c := d.Candidates[0]; c.OverBalance || c.RecentRequests != 0 || (cfg.CostModel == scheduler.CostTTFT && d.Worker != w1) {
				t.Errorf("%+v request %d: picked %v, w1 %+v", cfg, i, d.Worker, c)
			}
			o.Begin(d).FirstByte() // kept in flight
		}
	}
}

func TestBalanceValidation(t *testing.T) {
	for _, c := range []scheduler.Config{{BalanceFactor: 0.5}, {BalanceWindow: -1}} {
		if _, err := scheduler.New(&c, nil); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	for _, c := range []scheduler.Config{{BalanceFactor: -1}, {BalanceFactor: 1}, {BalanceFactor: 2, BalanceWindow: 7}} {
		if _, err := scheduler.New(&c, nil); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// TestInFlightBound (balance_factor 1.1 set: ttft2 has no bound by default): a conversation's turns go one after another to w1, which caches them. After
// ten finished turns and one turn in flight, the ttft model's window counts ten recent requests on
// w1 and skips it for the next turn (its recent count + 1 exceeds ceil(1.1 · (total + 1) / 2));
// ttft2 counts what is in flight now, one request: ceil(1.1 · (1 + 1) / 2) = 2 ≥ 1 + 1, so w1 keeps
// the turn. With two in flight w1 is over ttft2's bound too (2 + 1 > ceil(1.1 · 3 / 2) = 2), but the
// turn is credited by the index, not by a request in flight, so it does not ride and w1 keeps it
// (TestTTFT2InFlightBound has the riders).
func TestInFlightBound(t *testing.T) {
	req := scheduler.Request{Tokens: 460, BlockSize: 16}
	cands := []scheduler.Candidate{cand(w1, 27), cand(w2, 0)}
	for _, tc := range []struct {
		model  string
		stay   bool
		bound1 float64 // Terms.InFlightBound with one request in flight (ttft2 only)
	}{{scheduler.CostTTFT, false, 0}, {scheduler.CostTTFT2, true, 2}} {
		s := newSched(t, &scheduler.Config{CostModel: tc.model, BalanceFactor: 1.1}, 1)
		for range 10 {
			d, err := s.Select(req, cands)
			if err != nil || d.Worker != w1 {
				t.Fatalf("%s: sequential turn went to %v (%v)", tc.model, d.Worker, err)
			}
			s.Begin(d).Done()
		}
		d, _ := s.Select(req, cands)
		h := s.Begin(d)
		h.FirstByte()
		d, _ = s.Select(req, cands)
		if got := d.Worker == w1; got != tc.stay || d.Candidates[0].OverBalance == tc.stay || d.Candidates[0].Terms.InFlightBound != tc.bound1 {
			t.Errorf("%s: one in flight on w1: picked %v, w1 %+v", tc.model, d.Worker, d.Candidates[0])
		}
		if tc.model != scheduler.CostTTFT2 {
			h.Done()
			continue
		}
		h2 := s.Begin(d)
		h2.FirstByte()
		d, _ = s.Select(req, cands)
		if c := d.Candidates[0]; d.Worker != w1 || c.OverBalance || c.Terms.InFlightBound != 2 || c.Load.Requests != 2 {
			t.Errorf("ttft2, two in flight on w1: picked %v, w1 %+v", d.Worker, c)
		}
		h.Done()
		h2.Done()
	}
}

// TestFewestRecentTieBreak: cold requests (no overlap anywhere) on idle workers tie on cost; ttft2
// gives each to the tied worker with the fewest recently routed requests, so ten sequential cold
// requests alternate between two workers, 5 and 5, whatever the random source, with the load bound
// on or off.
func TestFewestRecentTieBreak(t *testing.T) {
	req := scheduler.Request{Tokens: 64, BlockSize: 16}
	cands := []scheduler.Candidate{cand(w1, 0), cand(w2, 0)}
	for seed := range uint64(4) {
		// odd seeds with the load bound off: the tie-break still reads the recent counts
		s := newSched(t, &scheduler.Config{CostModel: scheduler.CostTTFT2, BalanceFactor: -float64(seed % 2)}, seed)
		count := map[index.WorkerKey]int{}
		var prev index.WorkerKey
		for i := range 10 {
			d, err := s.Select(req, cands)
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 && d.Worker == prev {
				t.Fatalf("seed %d request %d went to %v again (recent %v, %v)", seed, i, d.Worker,
					d.Candidates[0].RecentRequests, d.Candidates[1].RecentRequests)
			}
			prev = d.Worker
			count[d.Worker]++
			s.Begin(d).Done()
		}
		if count[w1] != 5 || count[w2] != 5 {
			t.Errorf("seed %d: %v", seed, count)
		}
	}
}

// TestTTFT2InFlightBound: four identical requests whose 28 blocks w1 caches, each still in flight
// (decoding) when the next comes, so from the second on each rides the first's pending prefix on
// w1. With the bound off (balance_factor off) w1 keeps all four. With the default factor (1.5) w1
// takes the first three (bounds ceil(1.5 · 1 / 2) = 1, 2, 3) and the fourth, finding 3 in flight
// on w1, over ceil(1.5 · (3 + 1) / 2) = 3, goes to w2. With balance_factor 1.1 the third request
// finds 2 in flight on w1, over ceil(1.1 · (2 + 1) / 2) = 2, and goes to w2; the fourth finds 2
// and 1, both within ceil(1.1 · 4 / 2) = 3, and the prefix pending on both (the third holds it on
// w2): a tie on cost, which goes to w2, with fewer recent requests. Without prefix keys (nothing pending: each
// request is credited by the index alone) the bound does not stop them: w1 keeps all four.
func TestTTFT2InFlightBound(t *testing.T) {
	keys := scheduler.PrefixKeys(hashes(0, 28))
	for _, tc := range []struct {
		factor float64
		keys   []uint64
		want   []index.WorkerKey
	}{
		{-1, keys, []index.WorkerKey{w1, w1, w1, w1}},
		{0, keys, []index.WorkerKey{w1, w1, w1, w2}},
		{1.1, keys, []index.WorkerKey{w1, w1, w2, w2}},
		{0, nil, []index.WorkerKey{w1, w1, w1, w1}},
		{1.1, nil, []index.WorkerKey{w1, w1, w1, w1}},
	} {
		s := newSched(t, &scheduler.Config{CostModel: scheduler.CostTTFT2, BalanceFactor: tc.factor}, 1)
		req := scheduler.Request{Tokens: 460, BlockSize: 16, PrefixKeys: tc.keys}
		var got []index.WorkerKey
		for range 4 {
			cands := []scheduler.Candidate{cand(w1, 28), cand(w2, 0)}
			for i := range cands {
				cands[i].PendingBlocks, cands[i].PendingRequests = s.Pending(cands[i].Worker, tc.keys)
				cands[i].OverlapBlocks = max(cands[i].OverlapBlocks, cands[i].PendingBlocks)
			}
			d, err := s.Select(req, cands)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, d.Worker)
			s.Begin(d).FirstByte() // decoding: in flight, no prefill queued
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("balance_factor %v, %d prefix keys: %v, want %v", tc.factor, len(tc.keys), got, tc.want)
		}
	}
}

// TestHerdBoundLetsATurnRideItsPrevious: w1 of four workers holds three requests in flight (two
// other conversations, and turn 1 of this one, 20 blocks, decoding), over the in-flight bound
// ceil(1.5 · (3 + 1) / 4) = 2. Turn 2 (30 blocks, the first 20 turn 1's) rides turn 1's pending
// prefix there: one request shares it (pending_requests 1), within the herd bound max(2, ceil(1.5 ·
// 2 / 4)) = 2, so it stays with its conversation's cache. A copy of turn 2 rides turn 2 alone
// (1 of herd 1, bound 2) and stays too; a third copy finds two requests sharing all 30 blocks on
// w1, over max(2, ceil(1.5 · 3 / 4)) = 2, and starts the prompt on another worker. Before the herd
// bound, any rider over the in-flight bound was sent away: turn 2 lost its 20 cached blocks.
func TestHerdBoundLetsATurnRideItsPrevious(t *testing.T) {
	s := newSched(t, &scheduler.Config{CostModel: scheduler.CostTTFT2}, 1)
	all := hashes(0, 30)
	turn1, turn2 := scheduler.PrefixKeys(all[:20]), scheduler.PrefixKeys(all)
	s.Tracker().Begin(w1, 0, 10).FirstByte()
	s.Tracker().Begin(w1, 0, 10).FirstByte()
	selectOn := func(keys []uint64, cached map[index.WorkerKey]int) scheduler.Decision {
		t.Helper()
		var cands []scheduler.Candidate
		for _, w := range []index.WorkerKey{w1, w2, w3, w4} {
			c := cand(w, cached[w])
			c.PendingBlocks, c.PendingRequests = s.Pending(w, keys)
			c.OverlapBlocks = max(c.OverlapBlocks, c.PendingBlocks)
			cands = append(cands, c)
		}
		d, err := s.Select(scheduler.Request{Tokens: 16 * len(keys), BlockSize: 16, PrefixKeys: keys}, cands)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := selectOn(turn1, map[index.WorkerKey]int{w1: 20})
	if d.Worker != w1 {
		t.Fatalf("turn 1 went to %v, want w1 (its cache)", d.Worker)
	}
	s.Begin(d).FirstByte()
	for i, want := range []index.WorkerKey{w1, w1, w2} {
		d := selectOn(turn2, nil)
		c := d.Candidates[0]
		wantHerd, wantBound := 1, 2.0
		if i == 2 {
			wantHerd = 2
		}
		if c.Terms.InFlightBound != math.Ceil(1.5*float64(3+i+1)/4) || c.Terms.PendingRequests != wantHerd || c.Terms.HerdBound != wantBound ||
			(d.Worker == w1) != (want == w1) {
			t.Fatalf("copy %d of turn 2: picked %v; w1 terms %+v, over %v; want %v, herd %d, herd_bound %v", i, d.Worker, c.Terms, c.OverBalance, want, wantHerd, wantBound)
		}
		s.Begin(d).FirstByte()
	}
}

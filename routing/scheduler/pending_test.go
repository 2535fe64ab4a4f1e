package scheduler_test

import (
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/routing/scheduler"
)

func hashes(from, n int) []kv.BlockHash {
	out := make([]kv.BlockHash, n)
	for i := range out {
		out[i] = kv.BlockHash(from + i)
	}
	return out
}

// TestPrefixKeysChain: key i depends on the whole prefix 0..i, so equal keys mean equal prefixes;
// a prompt diverging at block 2 shares keys 0 and 1 only.
func TestPrefixKeysChain(t *testing.T) {
	a := scheduler.PrefixKeys(hashes(10, 4))
	b := scheduler.PrefixKeys([]kv.BlockHash{10, 11, 99, 13})
	if a[0] != b[0] || a[1] != b[1] || a[2] == b[2] || a[3] == b[3] {
		t.Fatalf("keys %x and %x: want the first two equal, the rest different", a, b)
	}
	c := scheduler.PrefixKeys([]kv.BlockHash{11})
	if c[0] == a[1] {
		t.Fatal("block 11 alone has the key of the prefix 10, 11")
	}
}

// TestPendingBlocks: a ttft2 request routed to w1 holds its 8 blocks as w1's pending prefix until
// Done; a second request sharing the first 5 blocks (and 3 of its own) sees 5 pending blocks on
// w1 and none on w2; after a Move to w2 the prefix is pending there instead, and after Done nowhere.
// Two requests over one prefix keep it until both are done. ttft holds nothing.
func TestPendingBlocks(t *testing.T) {
	s := newSched(t, &scheduler.Config{CostModel: scheduler.CostTTFT2}, 1)
	first := scheduler.PrefixKeys(hashes(0, 8))
	second := scheduler.PrefixKeys(append(hashes(0, 5), hashes(100, 3)...))
	cands := []scheduler.Candidate{cand(w1, 0), cand(w2, 0)}
	d, err := s.Select(scheduler.Request{Tokens: 128, BlockSize: 16, PrefixKeys: first}, []scheduler.Candidate{cand(w1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Begin(d)
	pend := func(w index.WorkerKey) int { return s.PendingBlocks(w, second) }
	if g1, g2 := pend(w1), pend(w2); g1 != 5 || g2 != 0 {
		t.Fatalf("pending after Begin: w1 %d, w2 %d; want 5, 0", g1, g2)
	}
	if got := s.PendingBlocks(w1, first); got != 8 {
		t.Fatalf("the routed request's own prefix: %d pending blocks, want 8", got)
	}
	h.FirstByte()
	if got := pend(w1); got != 5 {
		t.Fatalf("after the first byte: %d pending, want 5 (held until done)", got)
	}
	h.Move(w2, 0)
	if g1, g2 := pend(w1), pend(w2); g1 != 0 || g2 != 5 {
		t.Fatalf("pending after Move: w1 %d, w2 %d; want 0, 5", g1, g2)
	}
	h.Done()
	h.Done()
	if g1, g2 := pend(w1), pend(w2); g1 != 0 || g2 != 0 {
		t.Fatalf("pending after Done: w1 %d, w2 %d; want 0, 0", g1, g2)
	}

	// Two in flight over the same prefix on w1: released one by one.
	var hs []*scheduler.Handle
	for range 2 {
		d, err := s.Select(scheduler.Request{Tokens: 128, BlockSize: 16, PrefixKeys: first}, []scheduler.Candidate{cand(w1, 0)})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, s.Begin(d))
	}
	hs[0].Done()
	if got := pend(w1); got != 5 {
		t.Fatalf("one of two done: %d pending, want 5", got)
	}
	hs[1].Done()
	if got := pend(w1); got != 0 {
		t.Fatalf("both done: %d pending, want 0", got)
	}

	// ttft does not hold pending prefixes.
	tt := newSched(t, &scheduler.Config{CostModel: scheduler.CostTTFT}, 1)
	d, err = tt.Select(scheduler.Request{Tokens: 128, BlockSize: 16, PrefixKeys: first}, cands)
	if err != nil {
		t.Fatal(err)
	}
	defer tt.Begin(d).Done()
	if got := tt.PendingBlocks(d.Worker, second); got != 0 {
		t.Fatalf("ttft: %d pending blocks, want 0", got)
	}
}

// TestPendingTerm: Select reports a candidate's PendingBlocks in its terms and scores the overlap
// it is given (the router passes max(index overlap, pending)).
func TestPendingTerm(t *testing.T) {
	s := newSched(t, &scheduler.Config{CostModel: scheduler.CostTTFT2}, 1)
	c1 := cand(w1, 5)
	c1.PendingBlocks = 5
	d, err := s.Select(scheduler.Request{Tokens: 128, BlockSize: 16}, []scheduler.Candidate{c1, cand(w2, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if d.Worker != w1 || d.Candidates[0].Terms.PendingBlocks != 5 || d.Candidates[1].Terms.PendingBlocks != 0 || d.PrefillTokens != 128-80 {
		t.Fatalf("decision %v, terms %+v / %+v, prefill %d", d.Worker, d.Candidates[0].Terms, d.Candidates[1].Terms, d.PrefillTokens)
	}
}

// TestPendingHerd (issue 4's property under the default model): 8 identical 640-token requests
// arrive together on 2 idle workers. Each follower is credited the first one's pending prefix on
// its worker (cost = the 640 tokens queued there) while the other worker would prefill all of it
// with half the cluster busy (640 · 1.5 = 960), so the cost alone sends all 8 to one worker — what
// `balance_factor off` does. The default in-flight bound (1.5) admits the first worker's third
// request (ceil(1.5 · 3 / 2) = 3) but not its fourth (ceil(1.5 · 4 / 2) = 3): that one starts the
// prompt on the other worker, where the next ones are credited its pending prefix too, and ties go
// to the worker with fewer recent requests.
func TestPendingHerd(t *testing.T) {
	keys := scheduler.PrefixKeys(hashes(0, 40))
	for _, tc := range []struct {
		factor      float64
		first, most int // requests on the first worker after 6 and after all 8 requests
	}{{-1, 6, 8}, {0, 3, 5}} {
		s := newSched(t, &scheduler.Config{BalanceFactor: tc.factor}, 1)
		var order []index.WorkerKey
		for range 8 {
			cands := []scheduler.Candidate{cand(w1, 0), cand(w2, 0)}
			for i := range cands {
				p, n := s.Pending(cands[i].Worker, keys)
				cands[i].OverlapBlocks, cands[i].PendingBlocks, cands[i].PendingRequests = p, p, n
			}
			d, err := s.Select(scheduler.Request{Tokens: 640, BlockSize: 16, PrefixKeys: keys}, cands)
			if err != nil {
				t.Fatal(err)
			}
			s.Begin(d) // all 8 in flight, none has a first byte yet
			order = append(order, d.Worker)
		}
		count := func(n int) (c int) {
			for _, w := range order[:n] {
				if w == order[0] {
					c++
				}
			}
			return c
		}
		if count(6) != tc.first || count(8) > tc.most || count(8) < 8-tc.most {
			t.Errorf("balance_factor %v: %v: want %d of the first 6 and at most %d of 8 on the first worker", tc.factor, order, tc.first, tc.most)
		}
	}
}

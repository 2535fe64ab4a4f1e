package scheduler_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/routing/scheduler"
)

var (
	w1 = index.WorkerKey{ID: "w1"}
	w2 = index.WorkerKey{ID: "w2"}
	w3 = index.WorkerKey{ID: "w3"}
	w4 = index.WorkerKey{ID: "w4", DPRank: 1}
)

func newSched(t *testing.T, cfg *scheduler.Config, seed uint64) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(cfg, rand.NewPCG(seed, seed+1))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// linear is DESIGN.md §7's linear cost with its defaults.
func linear() *scheduler.Config {
	c := scheduler.DefaultConfig()
	c.CostModel = scheduler.CostLinear
	return c
}

func cand(w index.WorkerKey, overlap int) scheduler.Candidate {
	return scheduler.Candidate{Worker: w, Endpoint: w.ID + ":8000", Available: true, OverlapBlocks: overlap}
}

// Loads: w1 60 prefill tokens and 3 decode blocks, w2 and w3 idle. Request: 100 tokens, block size 16,
// so prefill_blocks = (active + 100)/16 and decode_blocks = active + 7.
func setLoads(s *scheduler.Scheduler) {
	s.Tracker().Adjust(w1, 60, 3, 1)
}

func TestCostExact(t *testing.T) {
	req := scheduler.Request{Tokens: 100, BlockSize: 16}
	cands := []scheduler.Candidate{cand(w1, 2), cand(w2, 5), cand(w3, 9)}
	tests := []struct {
		name string
		cfg  *scheduler.Config
		want map[index.WorkerKey]float64
		pick index.WorkerKey
	}{
		// w1: 1·(160/16 − 2) + 10 = 18; w2: 100/16 − 5 + 7 = 8.25; w3: max(6.25 − 9, 0) + 7 = 7.
		{"linear_defaults", linear(), map[index.WorkerKey]float64{w1: 18, w2: 8.25, w3: 7}, w3},
		// scale 2, credit 0.5: w1 2·(10 − 1) + 10 = 28; w2 2·(6.25 − 2.5) + 7 = 14.5; w3 2·1.75 + 7 = 10.5.
		{"scaled", &scheduler.Config{CostModel: scheduler.CostLinear, PrefillLoadScale: 2, OverlapCredit: 0.5},
			map[index.WorkerKey]float64{w1: 28, w2: 14.5, w3: 10.5}, w3},
		// No cache credit: w1 10 + 10 = 20, w2 and w3 6.25 + 7 = 13.25 (tie).
		{"no_credit", &scheduler.Config{CostModel: scheduler.CostLinear, PrefillLoadScale: 1}, map[index.WorkerKey]float64{w1: 20, w2: 13.25, w3: 13.25}, index.WorkerKey{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSched(t, tc.cfg, 1)
			setLoads(s)
			d, err := s.Select(req, cands)
			if err != nil {
				t.Fatalf("Select: %v", err)
			}
			if !reflect.DeepEqual(d.Costs, tc.want) {
				t.Errorf("Costs = %v, want %v", d.Costs, tc.want)
			}
			if tc.pick != (index.WorkerKey{}) && d.Worker != tc.pick {
				t.Errorf("Worker = %v, want %v", d.Worker, tc.pick)
			}
			if d.Cost != tc.want[d.Worker] || d.Endpoint != d.Worker.ID+":8000" {
				t.Errorf("decision cost %v endpoint %q for %v", d.Cost, d.Endpoint, d.Worker)
			}
			if d.TotalBlocks != 6 || d.DecodeBlocks != 7 || !reflect.DeepEqual(d.Overlaps, map[index.WorkerKey]int{w1: 2, w2: 5, w3: 9}) {
				t.Errorf("TotalBlocks %d DecodeBlocks %d Overlaps %v", d.TotalBlocks, d.DecodeBlocks, d.Overlaps)
			}
		})
	}
	// The direct formula, including a fractional prefill.
	c := linear()
	if got := c.Cost(scheduler.Load{PrefillTokens: 8, DecodeBlocks: 2}, 17, 16, 1); got != 0.5625+2+2 {
		t.Errorf("Cost = %v, want 4.5625", got)
	}
}

func TestTieBreakDistribution(t *testing.T) {
	s := newSched(t, nil, 7)
	req := scheduler.Request{Tokens: 64, BlockSize: 16}
	// ttft: w1, w2, w4 tie at cost 64 (idle, no overlap: 64 uncached tokens); w3 carries 16
	// prefill tokens: 80.
	s.Tracker().Adjust(w3, 16, 0, 0)
	cands := []scheduler.Candidate{cand(w1, 0), cand(w2, 0), cand(w3, 0), cand(w4, 0)}
	counts := map[index.WorkerKey]int{}
	const n = 30000
	for i := range n {
		d, err := s.Select(req, cands)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && !reflect.DeepEqual(d.Tied, []index.WorkerKey{w1, w2, w4}) {
			t.Errorf("Tied = %v, want [w1 w2 w4]", d.Tied)
		}
		counts[d.Worker]++
	}
	// Each tied worker: expectation 10000, sd ≈ 81.6; accept ±5 sd.
	for _, w := range []index.WorkerKey{w1, w2, w4} {
		if c := counts[w]; c < 9592 || c > 10408 {
			t.Errorf("%v picked %d times of %d, want about %d", w, c, n, n/3)
		}
	}
	if counts[w3] != 0 {
		t.Errorf("w3 (cost 5) picked %d times", counts[w3])
	}
	// The same seed gives the same sequence.
	a, b := newSched(t, nil, 99), newSched(t, nil, 99)
	for range 100 {
		da, _ := a.Select(req, cands[:2])
		db, _ := b.Select(req, cands[:2])
		if da.Worker != db.Worker {
			t.Fatal("seeded schedulers disagree")
		}
	}
}

func TestTemperatureSampling(t *testing.T) {
	const temp = 0.5
	s := newSched(t, &scheduler.Config{CostModel: scheduler.CostLinear, PrefillLoadScale: 1, OverlapCredit: 1, Temperature: temp}, 3)
	setLoads(s)
	req := scheduler.Request{Tokens: 100, BlockSize: 16}
	cands := []scheduler.Candidate{cand(w1, 2), cand(w2, 5), cand(w3, 9)}
	costs := map[index.WorkerKey]float64{w1: 18, w2: 8.25, w3: 7}
	total := 0.0
	p := map[index.WorkerKey]float64{}
	for w, c := range costs {
		p[w] = math.Exp(-(c - 7) / ((18 - 7) * temp))
		total += p[w]
	}
	const n = 40000
	counts := map[index.WorkerKey]int{}
	for range n {
		d, err := s.Select(req, cands)
		if err != nil {
			t.Fatal(err)
		}
		counts[d.Worker]++
	}
	for w := range costs {
		exp := n * p[w] / total
		sd := math.Sqrt(n * (p[w] / total) * (1 - p[w]/total))
		if got := float64(counts[w]); math.Abs(got-exp) > 5*sd {
			t.Errorf("%v picked %v times, expected %.0f ± %.0f", w, got, exp, 5*sd)
		}
	}
	// Equal costs under T > 0: uniform.
	u := newSched(t, &scheduler.Config{CostModel: scheduler.CostLinear, PrefillLoadScale: 1, OverlapCredit: 1, Temperature: 2}, 5)
	eq := []scheduler.Candidate{cand(w1, 0), cand(w2, 0)}
	c1 := 0
	for range 20000 {
		d, _ := u.Select(req, eq)
		if d.Worker == w1 {
			c1++
		}
	}
	if c1 < 9293 || c1 > 10707 { // ±5 sd of 10000
		t.Errorf("uniform case: w1 picked %d of 20000", c1)
	}
}

func TestBusyAndAvailability(t *testing.T) {
	req := scheduler.Request{Tokens: 100, BlockSize: 16}
	s := newSched(t, &scheduler.Config{CostModel: scheduler.CostLinear, PrefillLoadScale: 1, OverlapCredit: 1, MaxActiveDecodeBlocks: 5}, 1)
	s.Tracker().Adjust(w3, 0, 6, 1) // w3 busy: 6 > 5; cost 0 + 13 = 13
	cands := []scheduler.Candidate{cand(w1, 0), cand(w2, 5), cand(w3, 9)}
	d, err := s.Select(req, cands)
	if err != nil {
		t.Fatal(err)
	}
	if d.Worker != w2 || !d.Candidates[2].Busy || d.Candidates[2].Eligible {
		t.Errorf("busy w3: picked %v, scored %+v", d.Worker, d.Candidates[2])
	}
	// Every available worker busy: all take part again (w1 19.25, w2 14.25, w3 13).
	s.Tracker().Adjust(w1, 0, 6, 1)
	s.Tracker().Adjust(w2, 0, 6, 1)
	if d, _ = s.Select(req, cands); d.Worker != w3 || !d.Candidates[0].Eligible || d.Cost != 13 {
		t.Errorf("all busy: picked %v (cost %v), want w3 (13)", d.Worker, d.Cost)
	}
	// Prefill threshold.
	p := newSched(t, &scheduler.Config{CostModel: scheduler.CostLinear, PrefillLoadScale: 1, OverlapCredit: 1, MaxActivePrefillTokens: 50}, 1)
	setLoads(p) // w1 has 60 prefill tokens
	if d, _ = p.Select(req, []scheduler.Candidate{cand(w1, 9), cand(w2, 0)}); d.Worker != w2 {
		t.Errorf("prefill busy: picked %v, want w2", d.Worker)
	}
	// Unavailable: listed with its cost, never picked.
	un := cand(w3, 9)
	un.Available = false
	d, err = newSched(t, linear(), 1).Select(req, []scheduler.Candidate{cand(w1, 0), un})
	if err != nil || d.Worker != w1 || d.Candidates[1].Available || d.Costs[w3] != 7 {
		t.Errorf("unavailable: %v, %+v, err %v", d.Worker, d.Candidates[1], err)
	}
	if _, err = newSched(t, nil, 1).Select(req, []scheduler.Candidate{un}); !errors.Is(err, scheduler.ErrNoCandidates) {
		t.Errorf("none available: err %v", err)
	}
	if _, err = newSched(t, nil, 1).Select(scheduler.Request{Tokens: 1}, []scheduler.Candidate{cand(w1, 0)}); err == nil {
		t.Error("block size 0 accepted")
	}
	if _, err := scheduler.New(&scheduler.Config{Temperature: -1}, nil); err == nil {
		t.Error("negative temperature accepted")
	}
}

func TestLoadAccounting(t *testing.T) {
	s := newSched(t, linear(), 1)
	req := scheduler.Request{Tokens: 100, BlockSize: 16}
	d, err := s.Select(req, []scheduler.Candidate{cand(w1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if d.PrefillTokens != 68 || d.DecodeBlocks != 7 {
		t.Fatalf("PrefillTokens %d DecodeBlocks %d, want 68 7", d.PrefillTokens, d.DecodeBlocks)
	}
	h := s.Begin(d)
	if got := s.Tracker().Load(w1); got != (scheduler.Load{PrefillTokens: 68, DecodeBlocks: 7, Requests: 1}) {
		t.Errorf("after Begin: %+v", got)
	}
	// The load is seen by the next decision: prefill (68 + 100)/16 − 2 = 8.5, decode 7 + 7 = 14.
	if d2, _ := s.Select(req, []scheduler.Candidate{cand(w1, 2)}); d2.Cost != 22.5 {
		t.Errorf("cost with load = %v, want 22.5", d2.Cost)
	}
	h.FirstByte()
	h.FirstByte()
	if got := s.Tracker().Load(w1); got != (scheduler.Load{DecodeBlocks: 7, Requests: 1}) {
		t.Errorf("after FirstByte: %+v", got)
	}
	h.Done()
	h.Done()
	if got := s.Tracker().Load(w1); got != (scheduler.Load{}) {
		t.Errorf("after Done: %+v", got)
	}

	// Many requests released concurrently, each method called several times from several goroutines.
	var wg sync.WaitGroup
	hs := make([]*scheduler.Handle, 200)
	for i := range hs {
		hs[i] = s.Tracker().Begin([]index.WorkerKey{w1, w2}[i%2], int64(i), int64(i%5))
	}
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, h := range hs {
				if (i+g)%2 == 0 {
					h.FirstByte()
				}
				h.Done()
			}
		}()
	}
	wg.Wait()
	for _, w := range []index.WorkerKey{w1, w2} {
		if got := s.Tracker().Load(w); got != (scheduler.Load{}) {
			t.Errorf("%v load after all done: %+v", w, got)
		}
	}
	// Done without FirstByte releases both; a nil handle is a no-op.
	h = s.Tracker().Begin(w3, 10, 1)
	h.Done()
	var nilH *scheduler.Handle
	nilH.Done()
	if got := s.Tracker().Load(w3); got != (scheduler.Load{}) {
		t.Errorf("w3 after Done: %+v", got)
	}
}

// TestHandleMove: the load of a request the proxy sends to another worker than the decision
// chose follows it: before the first byte the prefill becomes the new worker's uncached tokens
// (its own overlap), decode blocks and the request move, and the releases apply to the new worker.
func TestHandleMove(t *testing.T) {
	s := newSched(t, linear(), 1)
	req := scheduler.Request{Tokens: 100, BlockSize: 16}
	d, err := s.Select(req, []scheduler.Candidate{cand(w1, 5), cand(w2, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if d.Worker != w1 || d.PrefillOn(w1) != 20 || d.PrefillOn(w2) != 68 {
		t.Fatalf("chose %v, PrefillOn w1 %d w2 %d; want w1, 20, 68", d.Worker, d.PrefillOn(w1), d.PrefillOn(w2))
	}
	h := s.Begin(d)
	h.Move(w2, d.PrefillOn(w2))
	if got := s.Tracker().Load(w1); got != (scheduler.Load{}) {
		t.Errorf("w1 after Move: %+v, want zero", got)
	}
	if got := s.Tracker().Load(w2); got != (scheduler.Load{PrefillTokens: 68, DecodeBlocks: 7, Requests: 1}) {
		t.Errorf("w2 after Move: %+v", got)
	}
	if h.Worker() != w2 {
		t.Errorf("Worker() = %v, want w2", h.Worker())
	}
	h.FirstByte()
	// after the first byte only decode blocks and the request move back
	h.Move(w1, 999)
	if got := s.Tracker().Load(w1); got != (scheduler.Load{DecodeBlocks: 7, Requests: 1}) {
		t.Errorf("w1 after FirstByte and Move back: %+v", got)
	}
	h.Done()
	h.Move(w2, 1) // no-op once done
	for _, w := range []index.WorkerKey{w1, w2} {
		if got := s.Tracker().Load(w); got != (scheduler.Load{}) {
			t.Errorf("%v after Done: %+v, want zero", w, got)
		}
	}
	var nilH *scheduler.Handle
	nilH.Move(w1, 1)
}

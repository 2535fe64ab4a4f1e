package scheduler_test

import (
	"testing"
	"time"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// fakeClock is a settable clock for the tracker's prefill progress.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClockedTracker() (*scheduler.Tracker, *fakeClock) {
	tr, c := scheduler.NewTracker(), &fakeClock{t: time.Unix(1_800_000_000, 0)}
	tr.SetClock(c.now)
	return tr, c
}

// TestPrefillProgress: the time per token is learned from a request's Begin (or the previous first
// byte, whichever is later) to its first byte, and the oldest request without a first byte is
// credited the tokens run since it started, capped at its own tokens.
func TestPrefillProgress(t *testing.T) {
	tr, clk := newClockedTracker()
	w := index.WorkerKey{ID: "w"}
	a := tr.Begin(w, 20000, 1250)
	clk.advance(500 * time.Millisecond)
	if got := tr.PrefillDone(w); got != 0 {
		t.Fatalf("done before any time per token is learned = %d, want 0", got)
	}
	clk.advance(500 * time.Millisecond)
	a.FirstByte() // 1 s for 20000 tokens: 50 µs per token
	b := tr.Begin(w, 10000, 625)
	clk.advance(200 * time.Millisecond)
	c := tr.Begin(w, 5000, 313)
	clk.advance(100 * time.Millisecond)
	if got := tr.PrefillDone(w); got != 6000 { // b: 0.3 s at 50 µs/token
		t.Fatalf("done on b after 0.3 s = %d, want 6000", got)
	}
	clk.advance(400 * time.Millisecond)
	if got := tr.PrefillDone(w); got != 10000 { // 0.7 s would be 14000: capped at b's tokens
		t.Fatalf("done on b after 0.7 s = %d, want its 10000 tokens", got)
	}
	b.FirstByte() // b took 0.7 s for 10000 tokens (70 µs): EWMA 50 + 0.2·20 = 54 µs
	clk.advance(108 * time.Millisecond)
	if got := tr.PrefillDone(w); got != 2000 { // c started at b's first byte: 0.108 s / 54 µs
		t.Fatalf("done on c 108 ms after b's first byte = %d, want 2000", got)
	}
	c.Done() // cancelled before its first byte: nothing learned, nothing left
	if got := tr.PrefillDone(w); got != 0 {
		t.Fatalf("done with nothing queued = %d, want 0", got)
	}
	d := tr.Begin(w, 5400, 338)
	clk.advance(270 * time.Millisecond)
	if got := tr.PrefillDone(w); got != 5000 { // still 54 µs: the cancelled c taught nothing
		t.Fatalf("done on d after 270 ms = %d, want 5000", got)
	}
	d.FirstByte()
}

// TestPrefillProgressSmallAndMoved: a prefill under 256 tokens teaches nothing (its time is the
// fixed per-request overhead), and a moved request leaves its first worker's queue.
func TestPrefillProgressSmallAndMoved(t *testing.T) {
	tr, clk := newClockedTracker()
	w1, w2 := index.WorkerKey{ID: "w1"}, index.WorkerKey{ID: "w2"}
	s := tr.Begin(w1, 200, 13)
	clk.advance(100 * time.Millisecond)
	s.FirstByte()
	big := tr.Begin(w1, 10000, 625)
	clk.advance(100 * time.Millisecond)
	if got := tr.PrefillDone(w1); got != 0 {
		t.Fatalf("done after a 200-token sample = %d, want 0 (nothing learned)", got)
	}
	clk.advance(400 * time.Millisecond)
	big.FirstByte() // 0.5 s / 10000: 50 µs
	m := tr.Begin(w1, 8000, 500)
	clk.advance(100 * time.Millisecond)
	m.Move(w2, 8000)
	if got := tr.PrefillDone(w1); got != 0 {
		t.Fatalf("w1 after the move = %d, want 0", got)
	}
	if got := tr.PrefillDone(w2); got != 0 { // w2 has learned nothing
		t.Fatalf("w2 = %d, want 0", got)
	}
	m.Done()
}

// TestTTFT2PrefillProgress: two workers each hold one 20000-token prefill; w1's began 0.8 s ago
// (16000 of its tokens have run at the learned 50 µs per token), w2's just now. ttft2 sends a cold
// request to w1 and shows the progress in the terms; ttft, which counts queued prefill whole,
// sees a tie.
func TestTTFT2PrefillProgress(t *testing.T) {
	for _, model := range []string{scheduler.CostTTFT2, scheduler.CostTTFT} {
		tr, clk := newClockedTracker()
		s, err := scheduler.NewWithTracker(&scheduler.Config{CostModel: model}, nil, tr)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []index.WorkerKey{w1, w2} { // teach both 50 µs per token
			h := tr.Begin(w, 20000, 1250)
			clk.advance(time.Second)
			h.FirstByte()
			h.Done()
		}
		a := tr.Begin(w1, 20000, 1250)
		clk.advance(800 * time.Millisecond)
		b := tr.Begin(w2, 20000, 1250)
		d, err := s.Select(scheduler.Request{Tokens: 4800, BlockSize: 16}, []scheduler.Candidate{cand(w1, 0), cand(w2, 0)})
		if err != nil {
			t.Fatal(err)
		}
		c1, c2 := d.Candidates[0].Terms, d.Candidates[1].Terms
		switch model {
		case scheduler.CostTTFT2: // 4800 · (1 + 1) + the queue left
			if d.Worker != w1 || c1.PrefillDoneTokens != 16000 || c1.QueuedPrefillTokens != 4000 || d.Candidates[0].Cost != 13600 ||
				c2.PrefillDoneTokens != 0 || c2.QueuedPrefillTokens != 20000 || d.Candidates[1].Cost != 29600 {
				t.Errorf("ttft2 picked %v; w1 %+v; w2 %+v", d.Worker, d.Candidates[0], d.Candidates[1])
			}
		case scheduler.CostTTFT:
			if c1.PrefillDoneTokens != 0 || c1.QueuedPrefillTokens != 20000 || d.Candidates[0].Cost != d.Candidates[1].Cost {
				t.Errorf("ttft: w1 %+v; w2 %+v", d.Candidates[0], d.Candidates[1])
			}
		}
		a.Done()
		b.Done()
	}
}

// TestSurvivalCountsTheRunningPrefill (ttft2): the prefill already run takes its tokens off the
// queue a request waits for, but not off the blocks stored ahead of it: an engine stores a
// prefill's blocks when it ends (the simulator, vLLM without chunked prefill), so all 20000 tokens
// (1250 blocks) of w1's running prefill still age w1's cached prefix. Aged 1000 blocks in a
// 2000-block cache, it does not survive them (1000 + 1250 > 2000), although the 4000 tokens left
// to run (250 blocks) alone would leave it; aged 700 it does (700 + 1250 ≤ 2000).
func TestSurvivalCountsTheRunningPrefill(t *testing.T) {
	tr, clk := newClockedTracker()
	s, err := scheduler.NewWithTracker(&scheduler.Config{}, nil, tr)
	if err != nil {
		t.Fatal(err)
	}
	h := tr.Begin(w1, 20000, 1250) // teach 50 µs per token
	clk.advance(time.Second)
	h.FirstByte()
	h.Done()
	a := tr.Begin(w1, 20000, 1250)
	defer a.Done()
	clk.advance(800 * time.Millisecond)
	for _, tc := range []struct {
		age       uint32
		surviving int
	}{{1000, 0}, {700, 100}} {
		c := cand(w1, 100)
		c.Ages, c.CacheBlocks = []index.AgeStep{{Depth: 0, Age: tc.age}}, 2000
		d, err := s.Select(scheduler.Request{Tokens: 4800, BlockSize: 16}, []scheduler.Candidate{c})
		if err != nil {
			t.Fatal(err)
		}
		tm := d.Candidates[0].Terms
		if tm.PrefillDoneTokens != 16000 || tm.QueuedPrefillTokens != 4000 || tm.SurvivingBlocks != tc.surviving {
			t.Errorf("aged %d: %+v, want 16000 done, 4000 queued, %d surviving", tc.age, tm, tc.surviving)
		}
	}
}

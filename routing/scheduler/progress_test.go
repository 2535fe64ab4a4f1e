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

// teach50us teaches each worker a prefill time per token of 50 µs: one 20000-token prefill whose
// first byte comes 1 s after its Begin.
func teach50us(tr *scheduler.Tracker, clk *fakeClock, ws ...index.WorkerKey) {
	for _, w := range ws {
		h := tr.Begin(w, 20000, 1250)
		clk.advance(time.Second)
		h.FirstByte()
		h.Done()
	}
}

// doneOn is the tracker's estimate of the prefill run on w (PrefillDone without the overrun).
func doneOn(tr *scheduler.Tracker, w index.WorkerKey) int64 {
	done, _ := tr.PrefillDone(w)
	return done
}

// TestPrefillProgress: the time per token is learned from a request's Begin (or the previous first
// byte, whichever is later) to its first byte, and the oldest request without a first byte is
// credited the tokens run since it started, capped at its own tokens.
func TestPrefillProgress(t *testing.T) {
	tr, clk := newClockedTracker()
	w := index.WorkerKey{ID: "w"}
	a := tr.Begin(w, 20000, 1250)
	clk.advance(500 * time.Millisecond)
	if got := doneOn(tr, w); got != 0 {
		t.Fatalf("done before any time per token is learned = %d, want 0", got)
	}
	clk.advance(500 * time.Millisecond)
	a.FirstByte() // 1 s for 20000 tokens: 50 µs per token
	b := tr.Begin(w, 10000, 625)
	clk.advance(200 * time.Millisecond)
	c := tr.Begin(w, 5000, 313)
	clk.advance(100 * time.Millisecond)
	if got := doneOn(tr, w); got != 6000 { // b: 0.3 s at 50 µs/token
		t.Fatalf("done on b after 0.3 s = %d, want 6000", got)
	}
	clk.advance(400 * time.Millisecond)
	if got := doneOn(tr, w); got != 10000 { // 0.7 s would be 14000: capped at b's tokens
		t.Fatalf("done on b after 0.7 s = %d, want its 10000 tokens", got)
	}
	b.FirstByte() // b took 0.7 s for 10000 tokens (70 µs): EWMA 50 + 0.2·20 = 54 µs
	clk.advance(108 * time.Millisecond)
	if got := doneOn(tr, w); got != 2000 { // c started at b's first byte: 0.108 s / 54 µs
		t.Fatalf("done on c 108 ms after b's first byte = %d, want 2000", got)
	}
	c.Done() // cancelled before its first byte: nothing learned, nothing left
	if got := doneOn(tr, w); got != 0 {
		t.Fatalf("done with nothing queued = %d, want 0", got)
	}
	d := tr.Begin(w, 5400, 338)
	clk.advance(270 * time.Millisecond)
	if got := doneOn(tr, w); got != 5000 { // still 54 µs: the cancelled c taught nothing
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
	if got := doneOn(tr, w1); got != 0 {
		t.Fatalf("done after a 200-token sample = %d, want 0 (nothing learned)", got)
	}
	clk.advance(400 * time.Millisecond)
	big.FirstByte() // 0.5 s / 10000: 50 µs
	m := tr.Begin(w1, 8000, 500)
	clk.advance(100 * time.Millisecond)
	m.Move(w2, 8000)
	if got := doneOn(tr, w1); got != 0 {
		t.Fatalf("w1 after the move = %d, want 0", got)
	}
	if got := doneOn(tr, w2); got != 0 { // w2 has learned nothing
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
		teach50us(tr, clk, w1, w2)
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
	teach50us(tr, clk, w1)
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

// TestPrefillOverrun (ttft2): a request credited 1187 cached blocks (18992 of its 20000 tokens)
// accounts 1008 tokens of prefill. When it has run for the time of 4000 tokens at the learned
// 50 µs per token, past 1.5 · 1008 + 512 = 2024, its credit was evicted: the worker's queue counts
// the rest of its whole prompt, 20000 − 4000 = 16000 tokens (overrun_tokens), which also ages the
// cached prefix of the next request (aged 1000 in a 2000-block cache, 63 + 1000 blocks ahead: it
// no longer survives). At 2000 tokens' time (under 2024) nothing is added yet, and a request
// accounted without its prompt (Tracker.Begin) never overruns.
func TestPrefillOverrun(t *testing.T) {
	tr, clk := newClockedTracker()
	s, err := scheduler.NewWithTracker(&scheduler.Config{}, nil, tr)
	if err != nil {
		t.Fatal(err)
	}
	teach50us(tr, clk, w1, w2)
	d, err := s.Select(scheduler.Request{Tokens: 20000, BlockSize: 16}, []scheduler.Candidate{cand(w1, 1187), cand(w2, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if d.Worker != w1 || d.PrefillTokens != 1008 {
		t.Fatalf("routed to %v accounting %d tokens, want w1 and 1008", d.Worker, d.PrefillTokens)
	}
	a := s.Begin(d)
	next := func() scheduler.Terms {
		c := cand(w1, 100)
		c.Ages, c.CacheBlocks = []index.AgeStep{{Depth: 0, Age: 1000}}, 2000
		d, err := s.Select(scheduler.Request{Tokens: 4800, BlockSize: 16}, []scheduler.Candidate{c, cand(w2, 0)})
		if err != nil {
			t.Fatal(err)
		}
		return d.Candidates[0].Terms
	}
	clk.advance(100 * time.Millisecond) // 2000 tokens' time
	if tm := next(); tm.PrefillDoneTokens != 1008 || tm.OverrunTokens != 0 || tm.QueuedPrefillTokens != 0 || tm.SurvivingBlocks != 100 {
		t.Errorf("at 2000 tokens' time: %+v, want 1008 done, no overrun, nothing queued, 100 surviving", tm)
	}
	clk.advance(100 * time.Millisecond) // 4000 tokens' time
	if tm := next(); tm.PrefillDoneTokens != 1008 || tm.OverrunTokens != 16000 || tm.QueuedPrefillTokens != 16000 || tm.SurvivingBlocks != 0 {
		t.Errorf("at 4000 tokens' time: %+v, want 1008 done, 16000 overrun and queued, 0 surviving", tm)
	}
	a.FirstByte()
	if done, over := tr.PrefillDone(w1); done != 0 || over != 0 {
		t.Errorf("after the first byte: done %d, overrun %d, want 0, 0", done, over)
	}
	a.Done()
	b := tr.Begin(w2, 1008, 1250) // no prompt given: its worst case is its own tokens
	clk.advance(200 * time.Millisecond)
	if done, over := tr.PrefillDone(w2); done != 1008 || over != 0 {
		t.Errorf("Tracker.Begin after 4000 tokens' time: done %d, overrun %d, want 1008, 0", done, over)
	}
	b.Done()
}

package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// The first two requests of a conversation and an unrelated one, Mooncake style: the second turn
// repeats the first turn's blocks 0 and 1 (block 1 was partial in turn one) and adds block 2.
const sample = `{"timestamp": 0, "input_length": 700, "output_length": 5, "hash_ids": [0, 1]}

{"timestamp": 10, "input_length": 1100, "output_length": 3, "hash_ids": [0, 1, 2]}
{"timestamp": 25, "input_length": 512, "output_length": 0, "hash_ids": [7]}
`

func TestParseTraceAndStats(t *testing.T) {
	recs, err := parseTrace(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[1].InputLength != 1100 || !slices.Equal(recs[1].HashIDs, []uint64{0, 1, 2}) || recs[2].Timestamp != 25 {
		t.Fatalf("parsed %+v", recs)
	}
	st := statsOf(recs)
	// 6 blocks, 4 distinct (0, 1, 2, 7), 2 reused (turn two's 0 and 1).
	want := sliceStats{Requests: 3, DistinctBlocks: 4, TotalBlocks: 6, Reuse: 2.0 / 6, InputTokens: 2312, OutputTokens: 8, DurationMS: 25}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	part := sliceTrace(recs, 1, 5)
	if len(part) != 2 || part[0].Timestamp != 0 || part[1].Timestamp != 15 || recs[1].Timestamp != 10 {
		t.Fatalf("slice %+v (original %+v)", part, recs)
	}
}

func TestParseTraceRejects(t *testing.T) {
	for _, bad := range []string{
		`{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": []}`,
		`{"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1, 2]}`,  // 2 blocks need > 512 tokens
		`{"timestamp": 0, "input_length": 1025, "output_length": 1, "hash_ids": [1, 2]}`, // > 2 blocks
		`{"timestamp": 5, "input_length": 5, "output_length": 1, "hash_ids": [1]}` + "\n" +
			`{"timestamp": 4, "input_length": 5, "output_length": 1, "hash_ids": [2]}`,
		`{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]`,
	} {
		if recs, err := parseTrace(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: parsed %+v, want an error", bad, recs)
		}
	}
}

// TestPromptTokens: equal hash-id prefixes give equal token prefixes, the prompt has exactly
// input_length tokens, the partial last block is the block's own prefix, every id is an ordinary
// vocabulary id, and the tokens are a function of the id alone (a memo changes nothing).
func TestPromptTokens(t *testing.T) {
	recs, err := parseTrace(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := promptTokens(recs[0], nil), promptTokens(recs[1], map[uint64][]uint32{})
	if len(p0) != 700 || len(p1) != 1100 {
		t.Fatalf("lengths %d, %d", len(p0), len(p1))
	}
	if !slices.Equal(p0, p1[:700]) {
		t.Fatal("the second turn does not start with the first turn's prompt")
	}
	b0, b1, b7 := blockTokens(0), blockTokens(1), blockTokens(7)
	if !slices.Equal(p1[512:1024], b1) || !slices.Equal(p1[:512], b0) {
		t.Fatal("blocks are not the hash ids' tokens")
	}
	if slices.Equal(b0[:16], b7[:16]) || slices.Equal(b0[:16], b1[:16]) {
		t.Fatal("different ids share their first tokens")
	}
	if !slices.Equal(blockTokens(7), b7) {
		t.Fatal("blockTokens is not deterministic")
	}
	seen := map[uint32]bool{}
	for _, id := range append(append(slices.Clone(b0), b1...), b7...) {
		if id >= vocabLimit {
			t.Fatalf("token id %d is an added/special id", id)
		}
		seen[id] = true
	}
	// 1536 draws from 151643 ids: a repeat-free draw is likely, far from a constant stream.
	if len(seen) < 1500 {
		t.Fatalf("only %d distinct ids in 1536 tokens", len(seen))
	}
}

func TestSummarize(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	got := summarize(d)
	want := latency{Mean: 50500 * time.Microsecond, P50: 50 * time.Millisecond, P95: 95 * time.Millisecond, P99: 99 * time.Millisecond}
	if got != want {
		t.Fatalf("summarize = %+v, want %+v", got, want)
	}
	if d[0] != 100*time.Millisecond {
		t.Fatal("summarize sorted its input in place")
	}
	if (summarize(nil) != latency{}) {
		t.Fatal("summary of nothing")
	}
	if s := summarize([]time.Duration{3 * time.Second}); s.P99 != 3*time.Second || s.P50 != 3*time.Second {
		t.Fatalf("one sample: %+v", s)
	}
}

func TestParsePoliciesAndSlices(t *testing.T) {
	ps, err := parsePolicies("kvroute, kvroute[cost linear;balance_factor -1],round_robin")
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[1].Name != "kvroute" || ps[1].Scheduler != "cost linear;balance_factor -1" || ps[2].Name != "round_robin" {
		t.Fatalf("policies %+v", ps)
	}
	if _, err := parsePolicies("random"); err == nil {
		t.Fatal("unknown policy accepted")
	}
	sl, err := parseSlices("0:200, 1800:50@1.5", 2)
	if err != nil || !slices.Equal(sl, []traceSlice{{0, 200, 2}, {1800, 50, 1.5}}) {
		t.Fatalf("slices %v, %v", sl, err)
	}
	for _, bad := range []string{"5", "1:2@0", "1:2@x", "-1:5", "1:0"} {
		if _, err := parseSlices(bad, 2); err == nil {
			t.Errorf("slice %q accepted", bad)
		}
	}
}

// TestRoundOrder: policies run as given in even rounds and reversed in odd ones.
func TestRoundOrder(t *testing.T) {
	for r, want := range [][]int{{0, 1, 2}, {2, 1, 0}, {0, 1, 2}} {
		if got := roundOrder(3, r); !slices.Equal(got, want) {
			t.Errorf("round %d: %v, want %v", r, got, want)
		}
	}
}

// TestSpreadAndRatioSummary: median of an odd and an even count, NaN left out, and the summary
// line of one kvroute policy against linear and round robin over two rounds.
func TestSpreadAndRatioSummary(t *testing.T) {
	if s := spreadOf([]float64{1.2, 0.8, math.NaN(), 1.0}); s.Median != 1.0 || s.Min != 0.8 || s.Max != 1.2 || len(s.Rounds) != 3 {
		t.Fatalf("odd: %+v", s)
	}
	if s := spreadOf([]float64{0.9, 0.7}); math.Abs(s.Median-0.8) > 1e-12 || s.String() != "0.80 [0.70–0.90] (0.90, 0.70)" {
		t.Fatalf("even: %+v %q", s, s.String())
	}
	res := func(mean, p95 time.Duration, hit float64) result {
		return result{TTFT: latency{Mean: mean * time.Millisecond, P95: p95 * time.Millisecond}, HitRate: hit}
	}
	rounds := []map[string]result{
		{"kvroute": res(800, 2000, 0.2), "kvroute[cost linear]": res(1000, 2500, 0.1), "round_robin": res(2000, 5000, 0.05)},
		{"kvroute": res(900, 3000, 0.3), "kvroute[cost linear]": res(1000, 2000, 0.2), "round_robin": res(3000, 6000, 0.1)},
	}
	got := ratioSummary([]string{"kvroute", "kvroute[cost linear]", "round_robin"}, rounds)
	want := []string{"| kvroute | 0.85 [0.80–0.90] (0.80, 0.90) | 1.75 [1.50–2.00] (2.00, 1.50) | 0.35 [0.30–0.40] (0.40, 0.30) | 0.45 [0.40–0.50] (0.40, 0.50) |"}
	if !slices.Equal(got, want) {
		t.Fatalf("summary\n%q\nwant\n%q", got, want)
	}
}

// TestJittered: a round's arrivals move by at most ±j and never before 0, the same for every call
// of that round, other ones in the next round; j = 0 keeps the recorded arrivals.
func TestJittered(t *testing.T) {
	at := make([]time.Duration, 200)
	for i := range at {
		at[i] = time.Duration(i) * 3 * time.Millisecond
	}
	if got := jittered(at, 0, 1); &got[0] != &at[0] {
		t.Fatal("jitter 0 changed the arrivals")
	}
	j := 5 * time.Millisecond
	r0, r0again, r1 := jittered(at, j, 0), jittered(at, j, 0), jittered(at, j, 1)
	if !slices.Equal(r0, r0again) {
		t.Fatal("one round's arrivals differ between calls")
	}
	moved, differ := 0, 0
	for i := range at {
		if d := r0[i] - at[i]; r0[i] < 0 || d > j || (d < -j && r0[i] != 0) {
			t.Fatalf("arrival %d: %v from %v (jitter %v)", i, r0[i], at[i], j)
		}
		if r0[i] != at[i] {
			moved++
		}
		if r0[i] != r1[i] {
			differ++
		}
	}
	if moved < 190 || differ < 190 {
		t.Fatalf("%d of 200 arrivals moved, %d differ between rounds", moved, differ)
	}
}

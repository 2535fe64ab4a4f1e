package main

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/kvroute/kvroute/internal/sim"
)

func seq(n int, base uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = base + uint32(i)
	}
	return out
}

// TestGreedyOracle: a, a, a, b over 2 workers with the 1.25 bound. The second a hits w0's 2 blocks
// (9 tokens: at most (9−1)/4 = 2 blocks hit); the third would too, but w0 is at the bound
// ceil(1.25·3/2) = 2, so it goes to w1 cold; b ties at 0 and goes to the worker with fewer requests.
func TestGreedyOracle(t *testing.T) {
	bc, err := sim.NewBlockCache(&sim.BlockCacheConfig{BlockSize: 4, Capacity: 100})
	if err != nil {
		t.Fatal(err)
	}
	chain := func(p []uint32) *sim.Chain {
		ch, err := bc.Chain(&sim.Prompt{Tokens: p})
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	a, b := chain(seq(9, 0)), chain(seq(9, 100))
	res, err := greedyOracle([]*sim.Chain{a, a, a, b}, 2, 100, 4, 1.25)
	if err != nil {
		t.Fatal(err)
	}
	if res.Cached != 8 || res.Prompt != 36 || !reflect.DeepEqual(res.PerWorker, []int{2, 2}) {
		t.Errorf("oracle %+v, want cached 8 of 36, per worker [2 2]", res)
	}
	if n := distinctBlocks([]*sim.Chain{a, a, b}); n != 4 {
		t.Errorf("distinct blocks %d, want 4", n)
	}
	// Unbounded (bound 2 over 2 workers): every a stays on w0.
	if res, _ = greedyOracle([]*sim.Chain{a, a, a, b}, 2, 100, 4, 2); res.Cached != 16 || !reflect.DeepEqual(res.PerWorker, []int{3, 1}) {
		t.Errorf("bound 2: %+v, want cached 16, per worker [3 1]", res)
	}
}

// TestWorkloads: the same seed gives the same bodies; chat turns wait for their previous turn, which
// is the same conversation one turn shorter.
func TestWorkloads(t *testing.T) {
	c := workloadConfig{N: 120, MaxTokens: 16, Seed: 3, Clips: 6, ClipWords: 50, Chats: 3, DocWords: 80}
	v1, v2 := videoWorkload(c), videoWorkload(c)
	if len(v1) != 120 || !reflect.DeepEqual(v1, v2) {
		t.Fatalf("video workload: %d requests, deterministic %v", len(v1), reflect.DeepEqual(v1, v2))
	}
	chats := 0
	for i, r := range v1 {
		if r.Kind != "chat" {
			if r.After != -1 {
				t.Errorf("request %d (%s) waits for %d", i, r.Kind, r.After)
			}
			continue
		}
		chats++
		if r.After < 0 {
			continue
		}
		prev := v1[r.After]
		var cur, before struct{ Messages []message }
		if r.After >= i || prev.Kind != "chat" || json.Unmarshal(r.Body, &cur) != nil || json.Unmarshal(prev.Body, &before) != nil ||
			len(cur.Messages) != len(before.Messages)+2 || !reflect.DeepEqual(cur.Messages[:len(before.Messages)], before.Messages) {
			t.Errorf("chat turn %d does not extend turn %d", i, r.After)
		}
	}
	if chats < 15 || chats > 45 {
		t.Errorf("%d chat turns of 120, want about a quarter", chats)
	}
	d := docsWorkload(c)
	distinct := map[string]bool{}
	for _, r := range d {
		distinct[string(r.Body[:bytes.Index(r.Body, []byte("\\n"))])] = true
	}
	if len(d) != 120 || len(distinct) < 96 || len(distinct) == 120 {
		t.Errorf("docs: %d requests, %d distinct documents: want few repeats", len(d), len(distinct))
	}
}

// TestH264Workload: deterministic, every clip exists in testdata, the video part comes first in the
// user message, and the Zipf draw repeats clips (the most drawn more often than the least).
func TestH264Workload(t *testing.T) {
	c := workloadConfig{N: 200, MaxTokens: 16, Seed: 5}
	a, b := h264Workload(c, "http://x"), h264Workload(c, "http://x")
	if len(a) != 200 || !reflect.DeepEqual(a, b) {
		t.Fatalf("%d requests, deterministic %v", len(a), reflect.DeepEqual(a, b))
	}
	for _, clip := range h264Clips {
		if _, err := os.Stat("../../testdata/" + clip); err != nil {
			t.Errorf("clip %s: %v", clip, err)
		}
	}
	counts := map[string]int{}
	for i, r := range a {
		var body struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		var parts []struct {
			Type     string `json:"type"`
			VideoURL struct {
				URL string `json:"url"`
			} `json:"video_url"`
		}
		if json.Unmarshal(r.Body, &body) != nil || len(body.Messages) != 2 || json.Unmarshal(body.Messages[1].Content, &parts) != nil ||
			len(parts) != 2 || parts[0].Type != "video_url" || parts[1].Type != "text" || r.Kind != "h264" || r.After != -1 {
			t.Fatalf("request %d: %s", i, r.Body)
		}
		counts[parts[0].VideoURL.URL]++
	}
	lo, hi := len(a), 0
	for _, n := range counts {
		lo, hi = min(lo, n), max(hi, n)
	}
	if len(counts) < 5 || hi < 3*lo {
		t.Errorf("clip counts %v: want repeats skewed to a few clips", counts)
	}
}

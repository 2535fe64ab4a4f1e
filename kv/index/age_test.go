package index_test

import (
	"context"
	"slices"
	"testing"

	"github.com/kvroute/kvroute/kv"
	"github.com/kvroute/kvroute/kv/index"
)

// TestAgesFollowTheLRU replays, on one worker with a 10-block LRU cache, three 4-block prompts:
// the third evicts the first one's two tail blocks. The index then knows the capacity (10, the
// most blocks held), and the age profile of the second prompt says exactly how many of its
// blocks survive each number of new blocks, as the LRU (internal/sim's BlockCache) would evict:
// after the third prompt the cache holds, newest first, P3 (4), P2 (4), P1's first two blocks.
func TestAgesFollowTheLRU(t *testing.T) {
	ctx := context.Background()
	x := newIndex(t, nil)
	p1, p2, p3 := []kv.BlockHash{1, 2, 3, 4}, []kv.BlockHash{11, 12, 13, 14}, []kv.BlockHash{21, 22, 23, 24}
	mustStore(t, x, wA, chain(0, 100, p1...))
	mustStore(t, x, wA, chain(0, 200, p2...))
	// Before any eviction the capacity is unknown: no profile.
	if got := x.MatchAges(ctx, p2); len(got) != 1 || got[0].Blocks != 4 || got[0].Ages != nil || got[0].CacheBlocks != 0 {
		t.Fatalf("before eviction: %+v", got)
	}
	if n := x.Remove(ctx, wA, []kv.EngineHash{103, 102, 999}); n != 2 {
		t.Fatalf("removed %d", n)
	}
	mustStore(t, x, wA, chain(0, 300, p3...))

	got := x.MatchAges(ctx, p2)
	want := []index.AgeStep{{Depth: 0, Age: 5}, {Depth: 1, Age: 6}, {Depth: 2, Age: 7}, {Depth: 3, Age: 8}}
	if len(got) != 1 || got[0].Blocks != 4 || got[0].CacheBlocks != 10 || !slices.Equal(got[0].Ages, want) {
		t.Fatalf("P2: %+v, want ages %v capacity 10", got, want)
	}
	for _, c := range []struct {
		budget float64
		want   int
	}{{0, 4}, {2, 4}, {3, 3}, {4, 2}, {5, 1}, {6, 0}} {
		if n := index.Surviving(got[0].Ages, 4, got[0].CacheBlocks, c.budget); n != c.want {
			t.Errorf("P2 after %v new blocks: %d survive, want %d", c.budget, n, c.want)
		}
	}
	if n := index.Surviving(got[0].Ages, 3, 10, 0); n != 3 {
		t.Errorf("capped at 3 blocks: %d", n)
	}
	if n := index.Surviving(nil, 4, 0, 1e9); n != 4 {
		t.Errorf("unknown capacity: %d survive, want all 4", n)
	}

	// P1's first two blocks are the oldest (ages 9, 10: one more block evicts the second)...
	if got := x.MatchAges(ctx, p1); got[0].Blocks != 2 || !slices.Equal(got[0].Ages, []index.AgeStep{{0, 9}, {1, 10}}) {
		t.Fatalf("P1: %+v", got)
	}
	// ...until a routed request reuses them: Touch makes them the newest (ages 1, 2). A touch
	// past what the worker holds stops at its last block.
	x.Touch(ctx, wA, p1, 4)
	if got := x.MatchAges(ctx, p1); !slices.Equal(got[0].Ages, []index.AgeStep{{0, 1}, {1, 2}}) {
		t.Fatalf("P1 after Touch: %+v", got)
	}
	// The two blocks were older than half the capacity (9, 10 > 5), so they moved ahead of every
	// other block: the LRU is now P1's two, P3, P2, and P2 is two positions older than before
	// (7..10: one more new block evicts its last).
	if got := x.MatchAges(ctx, p2); !slices.Equal(got[0].Ages, []index.AgeStep{{0, 7}, {1, 8}, {2, 9}, {3, 10}}) {
		t.Fatalf("P2 after P1's Touch: %+v, want ages 7..10", got)
	}
	if n := index.Surviving(x.MatchAges(ctx, p2)[0].Ages, 4, 10, 1); n != 3 {
		t.Errorf("P2 after P1's Touch and 1 new block: %d survive, want 3", n)
	}
	// A prefix touched again while young (ages 1, 2 ≤ 5) was already ahead of the blocks that
	// matter: the others do not age.
	x.Touch(ctx, wA, p1, 2)
	if got := x.MatchAges(ctx, p2); !slices.Equal(got[0].Ages, []index.AgeStep{{0, 7}, {1, 8}, {2, 9}, {3, 10}}) {
		t.Fatalf("P2 after P1's second Touch: %+v, want ages 7..10 still", got)
	}
	// Plain Match is unchanged.
	checkMatch(t, x, p2, ov(wA, 4))

	// A cleared cache evicts nothing until it is full again: capacity unknown.
	x.Clear(ctx, wA)
	mustStore(t, x, wA, chain(0, 100, p1...))
	if got := x.MatchAges(ctx, p1); got[0].Ages != nil || got[0].CacheBlocks != 0 {
		t.Fatalf("after Clear: %+v", got)
	}
}

// TestAgesProfileSteps: a 640-block prompt stored in one event, then another; after an eviction
// (capacity 1280) the first prompt's ages run 641..1279 along it, and its profile keeps a step
// only every 1280/64 = 20 blocks of age: 32 steps, each the exact age at its depth.
func TestAgesProfileSteps(t *testing.T) {
	ctx := context.Background()
	x := newIndex(t, nil)
	long := func(base kv.BlockHash) []kv.BlockHash {
		hs := make([]kv.BlockHash, 640)
		for i := range hs {
			hs[i] = base + kv.BlockHash(i)
		}
		return hs
	}
	a, b := long(10_000), long(20_000)
	mustStore(t, x, wA, chain(0, 100_000, a...))
	mustStore(t, x, wA, chain(0, 200_000, b...))
	x.Remove(ctx, wA, []kv.EngineHash{100_000 + 639})
	got := x.MatchAges(ctx, a)[0]
	if got.Blocks != 639 || got.CacheBlocks != 1280 || len(got.Ages) != 32 {
		t.Fatalf("blocks %d capacity %v, %d steps: %v", got.Blocks, got.CacheBlocks, len(got.Ages), got.Ages)
	}
	for i, s := range got.Ages {
		if s.Depth != 20*i || s.Age != uint32(641+s.Depth) {
			t.Fatalf("step %d: %+v, want depth %d age %d", i, s, 20*i, 641+20*i)
		}
	}
}

// TestAgesChunkedStore: a chain stored in two events (as vLLM stores a chunked prefill) ages as
// one: its first chunk is as recent as the chain's order says (depth d at age d + 1 + what came
// after), not as old as its own event.
func TestAgesChunkedStore(t *testing.T) {
	ctx := context.Background()
	x := newIndex(t, nil)
	c := []kv.BlockHash{1, 2, 3, 4, 5, 6, 7, 8}
	mustStore(t, x, wA, chain(0, 100, c[:4]...))
	mustStore(t, x, wA, chain(103, 104, c[4:]...))
	mustStore(t, x, wA, chain(0, 200, 11, 12))
	x.Remove(ctx, wA, []kv.EngineHash{201})
	got := x.MatchAges(ctx, c)[0]
	var want []index.AgeStep
	for d := range 8 {
		want = append(want, index.AgeStep{Depth: d, Age: uint32(d + 3)})
	}
	if got.Blocks != 8 || got.CacheBlocks != 10 || !slices.Equal(got.Ages, want) {
		t.Fatalf("%+v, want ages %v", got, want)
	}
}

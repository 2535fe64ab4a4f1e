package sim_test

import (
	"slices"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kvevents/codec"
)

func seqTokens(n int, base uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = base + uint32(i)
	}
	return out
}

func chain(t *testing.T, c *sim.BlockCache, p *sim.Prompt) *sim.Chain {
	t.Helper()
	ch, err := c.Chain(p)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestHitBlocksVLLMRule checks the admission hit of a repeated prompt: every complete block,
// except when the whole prompt is cached (a multiple of the block size), then one block less
// (vLLM computes at least the last token).
func TestHitBlocksVLLMRule(t *testing.T) {
	for _, tc := range []struct {
		tokens, want int
	}{{12, 2}, {14, 3}, {15, 3}, {16, 3}, {17, 4}, {3, 0}, {4, 0}} {
		c, err := sim.NewBlockCache(&sim.BlockCacheConfig{BlockSize: 4, Capacity: 100})
		if err != nil {
			t.Fatal(err)
		}
		ch := chain(t, c, &sim.Prompt{Tokens: seqTokens(tc.tokens, 100)})
		if got := c.HitBlocks(ch); got != 0 {
			t.Fatalf("%d tokens: first hit %d", tc.tokens, got)
		}
		if n := c.Commit(ch, nil); n != tc.tokens/4 {
			t.Fatalf("%d tokens: stored %d blocks", tc.tokens, n)
		}
		if got := c.HitBlocks(chain(t, c, &sim.Prompt{Tokens: seqTokens(tc.tokens, 100)})); got != tc.want {
			t.Errorf("%d tokens: second hit %d, want %d", tc.tokens, got, tc.want)
		}
	}
}

// TestChainDependsOnPrefixKeysAndSalt checks that an engine hash covers the whole prefix, the
// media identifier, its offset and the cache salt (only on block 0).
func TestChainDependsOnPrefixKeysAndSalt(t *testing.T) {
	c, err := sim.NewBlockCache(&sim.BlockCacheConfig{BlockSize: 4, Capacity: 100})
	if err != nil {
		t.Fatal(err)
	}
	toks := seqTokens(12, 7)
	span := []blocks.Span{{Start: 5, End: 7, Identity: 0xabc, Kind: blocks.Image}}
	base := chain(t, c, &sim.Prompt{Tokens: toks, Spans: span, Identifiers: []string{kv.Identity(0xabc).UUID()}})
	other := chain(t, c, &sim.Prompt{Tokens: toks, Spans: []blocks.Span{{Start: 5, End: 7, Identity: 0xabd, Kind: blocks.Image}}, Identifiers: []string{kv.Identity(0xabd).UUID()}})
	salted := chain(t, c, &sim.Prompt{Tokens: toks, Spans: span, Identifiers: []string{kv.Identity(0xabc).UUID()}, CacheSalt: "s"})
	verbatim := chain(t, c, &sim.Prompt{Tokens: toks, Spans: span, Identifiers: []string{"client-uuid"}})
	if base.Hashes[0] != other.Hashes[0] || base.Hashes[1] == other.Hashes[1] || base.Hashes[2] == other.Hashes[2] {
		t.Errorf("identity: %x vs %x", base.Hashes, other.Hashes)
	}
	if base.Hashes[0] == salted.Hashes[0] || base.Hashes[2] == salted.Hashes[2] {
		t.Errorf("salt: %x vs %x", base.Hashes, salted.Hashes)
	}
	if len(salted.Keys[0]) != 1 || salted.Keys[0][0].Str != "s" || salted.Keys[1][0].Kind != codec.KeyPair || salted.Keys[1][0].Offset != 1 {
		t.Errorf("salted keys %+v", salted.Keys)
	}
	if verbatim.Keys[1][0].Str != "client-uuid" || verbatim.Hashes[1] == base.Hashes[1] {
		t.Errorf("verbatim identifier keys %+v", verbatim.Keys)
	}
	if base.Keys[0] != nil || base.Keys[2] != nil {
		t.Errorf("blocks without media have keys: %+v", base.Keys)
	}
}

// TestEvictionPublishesBlockRemoved fills a 4-block cache with a 3-block chain, then stores another
// 3-block chain: the first chain's two tail blocks are evicted (tail first, so its first block
// stays a usable prefix) in one BlockRemoved event ahead of the BlockStored event.
func TestEvictionPublishesBlockRemoved(t *testing.T) {
	c, err := sim.NewBlockCache(&sim.BlockCacheConfig{BlockSize: 4, Capacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	var got [][]codec.Event
	emit := func(evs []codec.Event) { got = append(got, evs) }
	a := chain(t, c, &sim.Prompt{Tokens: seqTokens(12, 0)})
	b := chain(t, c, &sim.Prompt{Tokens: seqTokens(13, 500)})
	c.Commit(a, emit)
	c.Commit(b, emit)
	if len(got) != 2 || len(got[0]) != 1 || len(got[1]) != 2 {
		t.Fatalf("events %+v", got)
	}
	st := got[0][0]
	if st.Type != codec.BlockStored || st.HasParent || !slices.Equal(st.BlockHashes, a.Hashes) || len(st.TokenIDs) != 12 || st.Medium != "GPU" {
		t.Errorf("first store %+v", st)
	}
	rm, st2 := got[1][0], got[1][1]
	if rm.Type != codec.BlockRemoved || !slices.Equal(rm.BlockHashes, []kv.EngineHash{a.Hashes[2], a.Hashes[1]}) {
		t.Errorf("removed %+v, want %x", rm, []kv.EngineHash{a.Hashes[2], a.Hashes[1]})
	}
	if st2.Type != codec.BlockStored || !slices.Equal(st2.BlockHashes, b.Hashes) || !slices.Equal(st2.TokenIDs, seqTokens(12, 500)) {
		t.Errorf("second store %+v", st2)
	}
	if c.Len() != 4 {
		t.Errorf("cache holds %d blocks", c.Len())
	}
	// a's first block is still a hit; its second was evicted, so a repeat stores blocks 1 and 2
	// again with block 0 as parent.
	if hit := c.HitBlocks(a); hit != 1 {
		t.Errorf("hit %d after eviction", hit)
	}
	got = nil
	c.Commit(a, emit)
	last := got[0][len(got[0])-1]
	if !last.HasParent || last.Parent != a.Hashes[0] || !slices.Equal(last.BlockHashes, a.Hashes[1:]) {
		t.Errorf("restore %+v", last)
	}
	// A chain longer than the cache stores the prefix that fits.
	got = nil
	long := chain(t, c, &sim.Prompt{Tokens: seqTokens(40, 9000)})
	if n := c.Commit(long, emit); n != 4 {
		t.Errorf("stored %d of a 10-block chain in a 4-block cache", n)
	}
	c.Clear(emit)
	if c.Len() != 0 || got[len(got)-1][0].Type != codec.AllBlocksCleared {
		t.Errorf("clear: %d blocks, events %+v", c.Len(), got[len(got)-1])
	}
}

// TestPeekBlocksKeepsLRU: PeekBlocks answers what HitBlocks would without making the blocks
// recently used, so a peeked chain is still the first evicted; HitBlocks protects it.
func TestPeekBlocksKeepsLRU(t *testing.T) {
	for _, touch := range []bool{false, true} {
		c, err := sim.NewBlockCache(&sim.BlockCacheConfig{BlockSize: 4, Capacity: 2})
		if err != nil {
			t.Fatal(err)
		}
		a := chain(t, c, &sim.Prompt{Tokens: seqTokens(5, 0)})   // 1 block
		b := chain(t, c, &sim.Prompt{Tokens: seqTokens(5, 100)}) // 1 block
		n := chain(t, c, &sim.Prompt{Tokens: seqTokens(5, 200)}) // 1 block
		c.Commit(a, nil)
		c.Commit(b, nil) // LRU order: a (oldest), b
		if touch {
			if got := c.HitBlocks(a); got != 1 {
				t.Fatalf("HitBlocks(a) = %d", got)
			}
		} else if got := c.PeekBlocks(a); got != 1 {
			t.Fatalf("PeekBlocks(a) = %d", got)
		}
		c.Commit(n, nil) // evicts the least recently used block
		wantA, wantB := 0, 1
		if touch {
			wantA, wantB = 1, 0
		}
		if gotA, gotB := c.PeekBlocks(a), c.PeekBlocks(b); gotA != wantA || gotB != wantB {
			t.Errorf("touch=%v: after eviction a %d b %d, want %d %d", touch, gotA, gotB, wantA, wantB)
		}
	}
}

package snapshot_test

import (
	"context"
	"slices"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/testkit/kvhistory"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/snapshot"
)

// TestSnapshotRebuildsIndexExactly: a worker publishes a long random history; an index that applied
// every batch and an index built only from the Set's snapshot chunks hold the same entries, block for
// block (engine hash, parent, LocalBlockHash), and give the same overlap for every chain held.
func TestSnapshotRebuildsIndexExactly(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		h := kvhistory.New(seed)
		full, err := index.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		live := kvhistory.NewApplier(t, full, "w")
		set := snapshot.NewSet(0)
		set.Reset(true)
		dec := codec.NewDecoder()
		for range 3000 {
			p := kvhistory.Encode(t, h.Batch())
			live.Apply(p)
			b, err := dec.Decode(codec.VLLM, p)
			if err != nil {
				t.Fatal(err)
			}
			set.Apply(b)
		}
		want := kvhistory.Dumped(full, "w")
		if len(want) < 200 {
			t.Fatalf("seed %d: history leaves %d blocks; too few to test", seed, len(want))
		}
		rebuilt, _ := index.New(nil)
		snap := kvhistory.NewApplier(t, rebuilt, "w")
		chunks, blocks := 0, 0
		err = snapshot.Encode(set.Order(), 4<<10, func(p []byte, n int) error {
			chunks++
			blocks += n
			snap.Apply(p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got := kvhistory.Dumped(rebuilt, "w")
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: rebuilt index holds %d entries, the live one %d (first difference at %d)", seed, len(got), len(want), firstDiff(got, want))
		}
		if blocks != set.Len()+set.Placeholders() || chunks < 2 {
			t.Errorf("seed %d: %d blocks in %d chunks, want %d blocks and %d placeholders in several chunks", seed, blocks, chunks, set.Len(), set.Placeholders())
		}
		// Every held chain, as a request's local hashes, overlaps alike.
		for _, b := range want {
			q := chainOf(want, b.EngineHash)
			g := full.Match(context.Background(), q)
			r := rebuilt.Match(context.Background(), q)
			if !slices.Equal(g, r) {
				t.Fatalf("seed %d: overlap of chain ending at %x: live %v, rebuilt %v", seed, b.EngineHash, g, r)
			}
		}
		t.Logf("seed %d: %d blocks counting (set: %d held, %d placeholders), %d chunks", seed, len(want), set.Len(), set.Placeholders(), chunks)
	}
}

// chainOf returns the local hashes of the chain ending at engine hash x, root first.
func chainOf(blocks []index.StoredBlock, x kv.EngineHash) []kv.BlockHash {
	by := map[kv.EngineHash]index.StoredBlock{}
	for _, b := range blocks {
		by[b.EngineHash] = b
	}
	var q []kv.BlockHash
	for {
		b := by[x]
		q = append(q, b.LocalHash)
		if !b.HasParent {
			break
		}
		x = b.Parent
	}
	slices.Reverse(q)
	return q
}

func firstDiff(a, b []index.StoredBlock) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestSetBounded: beyond MaxBlocks the oldest blocks go first and are counted.
func TestSetBounded(t *testing.T) {
	s := snapshot.NewSet(10)
	for i := range 25 {
		toks := make([]uint32, kvhistory.BlockSize)
		s.Apply(&codec.Batch{Events: []codec.Event{{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{kv.EngineHash(100 + i)}, TokenIDs: toks, BlockSize: kvhistory.BlockSize}}})
	}
	if s.Len() != 10 || s.Evicted != 15 {
		t.Fatalf("len %d evicted %d, want 10 and 15", s.Len(), s.Evicted)
	}
	var got []kv.EngineHash
	for _, b := range s.Order().Blocks {
		got = append(got, b.Hash)
	}
	if want := []kv.EngineHash{115, 116, 117, 118, 119, 120, 121, 122, 123, 124}; !slices.Equal(got, want) {
		t.Fatalf("held %v, want the newest %v", got, want)
	}
}

// TestSetMirrorsIndex: the set keeps what the router's index keeps. A removed block with a block
// under it stays as a placeholder (sent, then removed again) until that block goes too; a block
// stored under a parent the set lacks, the rest of its event, a non-dense event and a CPU-tier
// announcement without tokens are not kept (the index refuses or skips them).
func TestSetMirrorsIndex(t *testing.T) {
	const bs = kvhistory.BlockSize
	s := snapshot.NewSet(0)
	toks := func(n int) []uint32 { return make([]uint32, n*bs) }
	view := func() (blocks, removed []kv.EngineHash) {
		v := s.Order()
		for _, b := range v.Blocks {
			blocks = append(blocks, b.Hash)
		}
		for _, b := range v.Removed {
			removed = append(removed, b.Hash)
		}
		return blocks, removed
	}
	s.Apply(&codec.Batch{Events: []codec.Event{
		{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{1, 2, 3}, TokenIDs: toks(3), BlockSize: bs},
		{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{10}, TokenIDs: toks(1)[:5], BlockSize: bs},                              // not dense
		{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{11, 12}, Parent: 10, HasParent: true, TokenIDs: toks(2), BlockSize: bs}, // unknown parent
		{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{1}, Medium: "CPU", HasMedium: true, BlockSize: bs},                      // ignored
		{Type: codec.BlockRemoved, BlockHashes: []kv.EngineHash{2}},
	}})
	if b, r := view(); !slices.Equal(b, []kv.EngineHash{1, 2, 3}) || !slices.Equal(r, []kv.EngineHash{2}) || s.Len() != 2 || s.Placeholders() != 1 {
		t.Fatalf("sent %v removed %v, %d held %d placeholders; want [1 2 3] [2], 2 and 1", b, r, s.Len(), s.Placeholders())
	}
	// Stored again, the placeholder is a block again.
	s.Apply(&codec.Batch{Events: []codec.Event{{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{2}, Parent: 1, HasParent: true, TokenIDs: toks(1), BlockSize: bs}}})
	if b, r := view(); !slices.Equal(b, []kv.EngineHash{1, 2, 3}) || len(r) != 0 || s.Len() != 3 {
		t.Fatalf("sent %v removed %v, %d held; want [1 2 3], none, 3", b, r, s.Len())
	}
	// Removed again and then its child: the placeholder goes with the child.
	s.Apply(&codec.Batch{Events: []codec.Event{{Type: codec.BlockRemoved, BlockHashes: []kv.EngineHash{2}}, {Type: codec.BlockRemoved, BlockHashes: []kv.EngineHash{3}}}})
	if b, r := view(); !slices.Equal(b, []kv.EngineHash{1}) || len(r) != 0 || s.Placeholders() != 0 {
		t.Fatalf("sent %v removed %v, %d placeholders; want [1], none, 0", b, r, s.Placeholders())
	}
	s.Apply(&codec.Batch{Events: []codec.Event{{Type: codec.AllBlocksCleared}}})
	if s.Len() != 0 || !s.Complete() {
		t.Fatalf("after AllBlocksCleared: len %d complete %v", s.Len(), s.Complete())
	}
}

// TestOrderSurvivesParentCycles: engine input that makes two blocks each other's parent (a block
// stored again under its own child) does not hang the walk; the cycle is left out.
func TestOrderSurvivesParentCycles(t *testing.T) {
	const bs = kvhistory.BlockSize
	s := snapshot.NewSet(0)
	toks := make([]uint32, bs)
	s.Apply(&codec.Batch{Events: []codec.Event{
		{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{1, 2}, TokenIDs: make([]uint32, 2*bs), BlockSize: bs},
		{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{1}, Parent: 2, HasParent: true, TokenIDs: toks, BlockSize: bs},
		{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{7}, TokenIDs: toks, BlockSize: bs},
		{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{8}, Parent: 8, HasParent: true, TokenIDs: toks, BlockSize: bs},
	}})
	var got []kv.EngineHash
	for _, b := range s.Order().Blocks {
		got = append(got, b.Hash)
	}
	if !slices.Equal(got, []kv.EngineHash{7}) {
		t.Fatalf("sent %v, want [7] (1 and 2 form a cycle, 8 names itself)", got)
	}
}

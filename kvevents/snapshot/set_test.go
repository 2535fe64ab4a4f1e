package snapshot_test

import (
	"context"
	"slices"
	"testing"

	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/routing/index"
)

// TestSnapshotRebuildsIndexExactly: a worker publishes a long random history; an index that applied
// every batch and an index built only from the Set's snapshot chunks hold the same entries, block for
// block (engine hash, parent, LocalBlockHash), and give the same overlap for every chain held.
func TestSnapshotRebuildsIndexExactly(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		h := newHistory(seed)
		full, err := index.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		live := newApplier(t, full, "w")
		set := snapshot.NewSet(0)
		set.Reset(true)
		dec := codec.NewDecoder()
		for range 3000 {
			p := encodeBatch(t, h.batch())
			live.apply(p)
			b, err := dec.Decode(codec.VLLM, p)
			if err != nil {
				t.Fatal(err)
			}
			set.Apply(b)
		}
		want := dumped(full, "w")
		if len(want) < 200 {
			t.Fatalf("seed %d: history leaves %d blocks; too few to test", seed, len(want))
		}
		rebuilt, _ := index.New(nil)
		snap := newApplier(t, rebuilt, "w")
		chunks, blocks := 0, 0
		err = snapshot.Encode(set.Order(), 4<<10, func(p []byte, n int) error {
			chunks++
			blocks += n
			snap.apply(p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got := dumped(rebuilt, "w")
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: rebuilt index holds %d entries, the live one %d (first difference at %d)", seed, len(got), len(want), firstDiff(got, want))
		}
		if blocks != len(want) || chunks < 2 {
			t.Errorf("seed %d: %d blocks in %d chunks, want %d blocks in several chunks", seed, blocks, chunks, len(want))
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
		t.Logf("seed %d: %d blocks held (set %d, evicted %d), %d chunks", seed, len(want), set.Len(), set.Evicted, chunks)
	}
}

// chainOf returns the local hashes of the chain ending at engine hash x, root first.
func chainOf(blocks []index.StoredBlock, x uint64) []uint64 {
	by := map[uint64]index.StoredBlock{}
	for _, b := range blocks {
		by[b.EngineHash] = b
	}
	var q []uint64
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
		toks := make([]uint32, blockSize)
		s.Apply(&codec.Batch{Events: []codec.Event{{Type: codec.BlockStored, BlockHashes: []uint64{uint64(100 + i)}, TokenIDs: toks, BlockSize: blockSize}}})
	}
	if s.Len() != 10 || s.Evicted != 15 {
		t.Fatalf("len %d evicted %d, want 10 and 15", s.Len(), s.Evicted)
	}
	var got []uint64
	for _, b := range s.Order() {
		got = append(got, b.Hash)
	}
	if want := []uint64{115, 116, 117, 118, 119, 120, 121, 122, 123, 124}; !slices.Equal(got, want) {
		t.Fatalf("held %v, want the newest %v", got, want)
	}
}

// TestOrderLeavesOutOrphans: a block whose parent the engine removed is kept (its parent may come
// back) but not sent, nor are its descendants; when the parent is stored again all of them are.
// A CPU-tier announcement without tokens and a non-dense event are not sent either.
func TestOrderLeavesOutOrphans(t *testing.T) {
	s := snapshot.NewSet(0)
	toks := func(n int) []uint32 { return make([]uint32, n*blockSize) }
	chain := codec.Event{Type: codec.BlockStored, BlockHashes: []uint64{1, 2, 3}, TokenIDs: toks(3), BlockSize: blockSize}
	s.Apply(&codec.Batch{Events: []codec.Event{
		chain,
		{Type: codec.BlockStored, BlockHashes: []uint64{10}, TokenIDs: toks(1)[:5], BlockSize: blockSize}, // not dense
		{Type: codec.BlockStored, BlockHashes: []uint64{11}, Parent: 10, HasParent: true, TokenIDs: toks(1), BlockSize: blockSize},
		{Type: codec.BlockStored, BlockHashes: []uint64{1}, Medium: "CPU", HasMedium: true, BlockSize: blockSize}, // ignored
		{Type: codec.BlockRemoved, BlockHashes: []uint64{2}},
	}})
	hashes := func() []uint64 {
		var out []uint64
		for _, b := range s.Order() {
			out = append(out, b.Hash)
		}
		return out
	}
	if got := hashes(); !slices.Equal(got, []uint64{1}) || s.Len() != 4 {
		t.Fatalf("sent %v of %d held, want [1] of 4", got, s.Len())
	}
	s.Apply(&codec.Batch{Events: []codec.Event{{Type: codec.BlockStored, BlockHashes: []uint64{2}, Parent: 1, HasParent: true, TokenIDs: toks(1), BlockSize: blockSize}}})
	if got := hashes(); !slices.Equal(got, []uint64{1, 3, 2}) && !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("sent %v, want 1, 2, 3 with parents first", got)
	}
	if got := hashes(); slices.Index(got, 2) > slices.Index(got, 3) {
		t.Fatalf("sent %v: 3 before its parent 2", got)
	}
	s.Apply(&codec.Batch{Events: []codec.Event{{Type: codec.AllBlocksCleared}}})
	if s.Len() != 0 || !s.Complete() {
		t.Fatalf("after AllBlocksCleared: len %d complete %v", s.Len(), s.Complete())
	}
}

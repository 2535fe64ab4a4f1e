package index_test

import (
	"context"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/index"
)

// TestSetLimits: lowered caps evict at once, keeping each worker's cached prefix (the oldest
// leaves go first, and a chain's leaf is its last block); raised caps let the index grow again;
// bounds New refuses are refused. The kvroute app calls SetLimits on every config load, since the
// index outlives reloads.
func TestSetLimits(t *testing.T) {
	ctx := context.Background()
	x, err := index.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	chain := func(base uint64, n int) ([]index.StoredBlock, []kv.BlockHash) {
		bs, hashes := make([]index.StoredBlock, n), make([]kv.BlockHash, n)
		for i := range bs {
			bs[i] = index.StoredBlock{EngineHash: kv.EngineHash(base + uint64(i)), LocalHash: kv.BlockHash(base<<8 + uint64(i)), Parent: kv.EngineHash(base + uint64(i) - 1), HasParent: i > 0}
			hashes[i] = bs[i].LocalHash
		}
		return bs, hashes
	}
	a, b := index.WorkerKey{ID: "a"}, index.WorkerKey{ID: "b"}
	ca, ha := chain(1000, 10)
	cb, hb := chain(2000, 10)
	if err := x.Store(ctx, a, ca); err != nil {
		t.Fatal(err)
	}
	if err := x.Store(ctx, b, cb); err != nil {
		t.Fatal(err)
	}
	overlap := func(hashes []kv.BlockHash) int {
		o := x.Match(ctx, hashes)
		if len(o) != 1 {
			t.Fatalf("match: %+v, want one worker", o)
		}
		return o[0].Blocks
	}

	if err := x.SetLimits(&index.Config{MaxBlocksPerWorker: 4}); err != nil {
		t.Fatal(err)
	}
	if got := x.Limits(); got.MaxBlocksPerWorker != 4 || got.MaxBlocks != 1<<24 || got.MaxWorkers != 4096 {
		t.Fatalf("limits %+v", got)
	}
	if st := x.Stats(); st.Entries != 8 || overlap(ha) != 4 || overlap(hb) != 4 {
		t.Fatalf("per-worker cap 4: %d entries, overlaps %d %d; want 8, 4, 4", st.Entries, overlap(ha), overlap(hb))
	}
	// total cap 6: the oldest leaves of any worker go first (a's, stored first)
	if err := x.SetLimits(&index.Config{MaxBlocksPerWorker: 4, MaxBlocks: 6}); err != nil {
		t.Fatal(err)
	}
	if st := x.Stats(); st.Entries != 6 || overlap(ha)+overlap(hb) != 6 {
		t.Fatalf("total cap 6: %d entries, overlaps %d + %d", st.Entries, overlap(ha), overlap(hb))
	}
	// defaults again: a chain of 10 is kept whole
	if err := x.SetLimits(nil); err != nil {
		t.Fatal(err)
	}
	cc, hc := chain(3000, 10)
	if err := x.Store(ctx, a, cc); err != nil {
		t.Fatal(err)
	}
	if overlap(hc) != 10 {
		t.Fatalf("after restoring the defaults: overlap %d of 10", overlap(hc))
	}
	for _, bad := range []*index.Config{{MaxBlocks: 1<<30 + 1}, {MaxBlocksPerWorker: 1<<30 + 1}, {MaxWorkers: 65536}} {
		if err := x.SetLimits(bad); err == nil {
			t.Errorf("SetLimits(%+v) accepted", *bad)
		}
	}
	if got := x.Limits(); got.MaxBlocksPerWorker != 1<<20 {
		t.Errorf("a refused SetLimits changed the limits: %+v", got)
	}
}

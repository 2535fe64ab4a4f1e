package index_test

import (
	"testing"

	"github.com/kvroute/kvroute/kv"
	"github.com/kvroute/kvroute/kv/index"
)

// BenchmarkMatchAges compares a lookup with age profiles (MatchAges, what ttft2 asks) and the
// router's Touch of a routed prefix with plain Match, on BenchmarkMatch's scenario (64 workers,
// 256-block chains, each held by two workers). Every worker has evicted once, so every matching
// worker's profile is built.
func BenchmarkMatchAges(b *testing.B) {
	bi := newBench("index")
	x := bi.(realIndex).x
	chains, _ := buildLookupScenario(bi)
	for w := range benchWorkers {
		// One evicted block per worker: a stored block under a fresh root, then removed.
		storeChain(bi, benchKey(w), []kv.BlockHash{kv.BlockHash(1<<60 + w)}, kv.EngineHash(1<<60+w), make([]index.StoredBlock, 0, 1))
		bi.remove(benchKey(w), []kv.EngineHash{kv.EngineHash(1<<60 + w)})
	}
	qs := lookupQueries(chains, 4096)
	b.Run("Match", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for ; b.Loop(); n++ {
			if len(x.Match(ctx, qs[n%len(qs)])) == 0 {
				b.Fatal("no overlap")
			}
		}
	})
	b.Run("MatchAges", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for ; b.Loop(); n++ {
			if got := x.MatchAges(ctx, qs[n%len(qs)]); len(got) == 0 || got[0].CacheBlocks == 0 {
				b.Fatal("no aged overlap")
			}
		}
	})
	b.Run("Touch", func(b *testing.B) {
		// Each query's longest holder, as the router touches the chosen worker's prefix.
		holders := make([]index.Overlap, len(qs))
		for i, q := range qs {
			for _, o := range x.Match(ctx, q) {
				if o.Blocks > holders[i].Blocks {
					holders[i] = o
				}
			}
		}
		n := 0
		for ; b.Loop(); n++ {
			i := n % len(qs)
			x.Touch(ctx, holders[i].Worker, qs[i], holders[i].Blocks)
		}
	})
}

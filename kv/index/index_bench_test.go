package index_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/cputime"
	"github.com/kvroute/kvroute/kv"
	"github.com/kvroute/kvroute/kv/index"
)

// Benchmarks run the index and the naive map-based index (naive_test.go) side by side on the same
// workload. The lookup scenario is DESIGN's sizing target: 64 workers, 4096 chains of 256 blocks
// (1,048,576 distinct blocks), each chain held in full by one worker and as a prefix of 64..256 blocks
// by a second; queries are 256 blocks, one in ten diverging at a random depth.

const (
	benchWorkers = 64
	benchChains  = 4096
	benchDepth   = 256
	benchEvent   = 16 // blocks per BlockStored event
)

func mix(a, b uint64) uint64 { return chainKey(a, b) }

type benchIndex interface {
	store(k index.WorkerKey, blocks []index.StoredBlock) error
	remove(k index.WorkerKey, hashes []kv.EngineHash)
	match(q []kv.BlockHash) []index.Overlap
}

type realIndex struct{ x *index.Index }

func (r realIndex) store(k index.WorkerKey, b []index.StoredBlock) error { return r.x.Store(ctx, k, b) }
func (r realIndex) remove(k index.WorkerKey, h []kv.EngineHash)          { r.x.Remove(ctx, k, h) }
func (r realIndex) match(q []kv.BlockHash) []index.Overlap               { return r.x.Match(ctx, q) }

func newBench(kind string) benchIndex {
	if kind == "naive" {
		return newNaive()
	}
	x, err := index.New(&index.Config{MaxBlocksPerWorker: 1 << 22, MaxBlocks: 1 << 24})
	if err != nil {
		panic(err)
	}
	return realIndex{x}
}

func benchKey(i int) index.WorkerKey { return index.WorkerKey{ID: fmt.Sprintf("worker-%02d", i)} }

// storeChain stores blocks[:n] of chain c (engine hashes unique per (chain, holder)) in events.
func storeChain(bi benchIndex, k index.WorkerKey, locals []kv.BlockHash, engineBase kv.EngineHash, buf []index.StoredBlock) {
	for s := 0; s < len(locals); s += benchEvent {
		e := min(s+benchEvent, len(locals))
		ev := buf[:0]
		for j := s; j < e; j++ {
			b := index.StoredBlock{EngineHash: engineBase + kv.EngineHash(j), LocalHash: locals[j]}
			if j > 0 {
				b.Parent, b.HasParent = engineBase+kv.EngineHash(j-1), true
			}
			ev = append(ev, b)
		}
		if err := bi.store(k, ev); err != nil {
			panic(err)
		}
	}
}

func chainLocals(c int) []kv.BlockHash {
	l := make([]kv.BlockHash, benchDepth)
	for j := range l {
		l[j] = kv.BlockHash(mix(uint64(c)+1, uint64(j)))
	}
	return l
}

// buildLookupScenario fills bi and returns the chains' local hashes and the (worker, block) entry count.
func buildLookupScenario(bi benchIndex) ([][]kv.BlockHash, int) {
	rng := rand.New(rand.NewPCG(42, 43))
	chains := make([][]kv.BlockHash, benchChains)
	buf := make([]index.StoredBlock, 0, benchEvent)
	entries := 0
	for c := range chains {
		chains[c] = chainLocals(c)
		first := rng.IntN(benchWorkers)
		second := (first + 1 + rng.IntN(benchWorkers-1)) % benchWorkers
		storeChain(bi, benchKey(first), chains[c], kv.EngineHash(c)<<20, buf)
		n := 64 + rng.IntN(benchDepth-64+1)
		storeChain(bi, benchKey(second), chains[c][:n], kv.EngineHash(c)<<20|1<<19, buf)
		entries += benchDepth + n
	}
	return chains, entries
}

func lookupQueries(chains [][]kv.BlockHash, n int) [][]kv.BlockHash {
	rng := rand.New(rand.NewPCG(7, 8))
	qs := make([][]kv.BlockHash, n)
	for i := range qs {
		q := slices.Clone(chains[rng.IntN(len(chains))])
		if rng.IntN(10) == 0 {
			d := 1 + rng.IntN(len(q)-1)
			for j := d; j < len(q); j++ {
				q[j] = kv.BlockHash(rng.Uint64())
			}
		}
		qs[i] = q
	}
	return qs
}

// BenchmarkMatch reports ns per 256-block lookup.
func BenchmarkMatch(b *testing.B) {
	for _, kind := range []string{"index", "naive"} {
		b.Run(kind, func(b *testing.B) {
			bi := newBench(kind)
			chains, _ := buildLookupScenario(bi)
			qs := lookupQueries(chains, 4096)
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cputime.Process()
			n := 0
			for ; b.Loop(); n++ {
				if len(bi.match(qs[n%len(qs)])) == 0 {
					b.Fatal("no overlap")
				}
			}
			if c1 := cputime.Process(); c0 > 0 {
				b.ReportMetric(float64((c1-c0).Nanoseconds())/float64(n), "cpu-ns/op")
			}
		})
	}
}

// BenchmarkMatchShared is the output-heavy case: all 64 workers hold the same 256-block chain.
func BenchmarkMatchShared(b *testing.B) {
	for _, kind := range []string{"index", "naive"} {
		b.Run(kind, func(b *testing.B) {
			bi := newBench(kind)
			locals := chainLocals(1)
			buf := make([]index.StoredBlock, 0, benchEvent)
			for w := range benchWorkers {
				storeChain(bi, benchKey(w), locals, kv.EngineHash(w)<<20, buf)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if got := bi.match(locals); len(got) != benchWorkers || got[0].Blocks != benchDepth {
					b.Fatalf("match: %d workers", len(got))
				}
			}
		})
	}
}

// BenchmarkMatchLatency times 100,000 single lookups (per benchmark iteration) and reports p50/p99 of
// wall time. On a shared machine the tail includes time the thread was descheduled; compare runs at
// similar load.
func BenchmarkMatchLatency(b *testing.B) {
	const lookups = 100_000
	for _, kind := range []string{"index", "naive"} {
		b.Run(kind, func(b *testing.B) {
			bi := newBench(kind)
			chains, _ := buildLookupScenario(bi)
			qs := lookupQueries(chains, 4096)
			lat := make([]time.Duration, lookups)
			b.ResetTimer()
			for b.Loop() {
				for i := range lat {
					t0 := time.Now()
					bi.match(qs[i%len(qs)])
					lat[i] = time.Since(t0)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[lookups/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[lookups*99/100].Nanoseconds()), "p99-ns")
			b.ReportMetric(float64(lat[lookups-1].Nanoseconds()), "max-ns")
		})
	}
}

// BenchmarkApply measures event application in steady state: per iteration one of 8 workers stores a
// new 256-block chain in 16-block events and removes the chain it stored 4096 chains earlier, so about
// 1M (worker, block) entries stay live. Engine hashes derive from the content (as vLLM's do), and half
// of each chain is a prefix shared with other chains, so a re-stored prefix refreshes existing blocks.
// Reported: blocks applied (stored + removed) per second.
func BenchmarkApply(b *testing.B) {
	const live = 4096
	for _, kind := range []string{"index", "naive"} {
		b.Run(kind, func(b *testing.B) {
			bi := newBench(kind)
			// Pre-generate a ring of chains (events and removal lists) so generation is not timed.
			const ringSize = 8192
			stores := make([][][]index.StoredBlock, ringSize)
			removes := make([][]kv.EngineHash, ringSize)
			for i := range ringSize {
				var parent kv.EngineHash
				rm := make([]kv.EngineHash, 0, benchDepth)
				var evs [][]index.StoredBlock
				for j := range benchDepth {
					local := mix(uint64(i)<<16, uint64(j))
					if j < benchDepth/2 {
						local = mix(uint64(i%1024)+1, uint64(j))
					}
					eng := kv.EngineHash(chainKey(uint64(parent), local))
					blk := index.StoredBlock{EngineHash: eng, LocalHash: kv.BlockHash(local), Parent: parent, HasParent: j > 0}
					if j%benchEvent == 0 {
						evs = append(evs, nil)
					}
					evs[len(evs)-1] = append(evs[len(evs)-1], blk)
					rm = append(rm, eng)
					parent = eng
				}
				slices.Reverse(rm) // engines evict leaves first
				stores[i], removes[i] = evs, rm
			}
			step := func(i int) {
				k := benchKey(i % 8)
				for _, ev := range stores[i%ringSize] {
					if err := bi.store(k, ev); err != nil {
						panic(err)
					}
				}
				if i >= live {
					bi.remove(benchKey((i-live)%8), removes[(i-live)%ringSize])
				}
			}
			for i := range live {
				step(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cputime.Process()
			n := 0
			for b.Loop() {
				step(live + n)
				n++
			}
			b.ReportMetric(float64(2*benchDepth*n)/b.Elapsed().Seconds(), "blocks/s")
			if c1 := cputime.Process(); c0 > 0 {
				b.ReportMetric(float64(2*benchDepth*n)/(c1-c0).Seconds(), "blocks/cpu-s")
			}
		})
	}
}

// BenchmarkMemory reports measured heap bytes per distinct block and per (worker, block) entry for the
// lookup scenario (runtime.ReadMemStats after GC, before and after building).
func BenchmarkMemory(b *testing.B) {
	for _, kind := range []string{"index", "naive"} {
		b.Run(kind, func(b *testing.B) {
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				bi := newBench(kind)
				_, entries := buildLookupScenario(bi)
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap := float64(after.HeapAlloc - before.HeapAlloc)
				b.ReportMetric(heap/float64(benchChains*benchDepth), "B/block")
				b.ReportMetric(heap/float64(entries), "B/entry")
				if r, ok := bi.(realIndex); ok {
					b.ReportMetric(float64(r.x.Stats().Bytes)/float64(entries), "est-B/entry")
				}
				runtime.KeepAlive(bi)
			}
		})
	}
}

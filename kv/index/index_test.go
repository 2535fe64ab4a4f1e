package index_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/index"
)

var (
	ctx = context.Background()
	wA  = index.WorkerKey{ID: "a"}
	wB  = index.WorkerKey{ID: "b"}
	wC  = index.WorkerKey{ID: "c"}
	wA1 = index.WorkerKey{ID: "a", DPRank: 1}
)

// chain builds stored blocks for local hashes, with engine hashes engine0, engine0+1, ..., the first
// under parent (0 = chain root).
func chain(parent, engine0 kv.EngineHash, locals ...kv.BlockHash) []index.StoredBlock {
	out := make([]index.StoredBlock, len(locals))
	for i, l := range locals {
		b := index.StoredBlock{EngineHash: engine0 + kv.EngineHash(i), LocalHash: l}
		if i > 0 {
			b.Parent, b.HasParent = engine0+kv.EngineHash(i-1), true
		} else if parent != 0 {
			b.Parent, b.HasParent = parent, true
		}
		out[i] = b
	}
	return out
}

func newIndex(t *testing.T, cfg *index.Config) *index.Index {
	t.Helper()
	x, err := index.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return x
}

func mustStore(t *testing.T, x *index.Index, k index.WorkerKey, blocks []index.StoredBlock) {
	t.Helper()
	if err := x.Store(ctx, k, blocks); err != nil {
		t.Fatalf("Store(%s): %v", k, err)
	}
}

func checkMatch(t *testing.T, x *index.Index, q []kv.BlockHash, want ...index.Overlap) {
	t.Helper()
	got := x.Match(ctx, q)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Match(%v) = %v, want %v", q, got, want)
	}
}

func ov(k index.WorkerKey, n int) index.Overlap { return index.Overlap{Worker: k, Blocks: n} }

func TestPrefixSemantics(t *testing.T) {
	x := newIndex(t, nil)
	mustStore(t, x, wA, chain(0, 100, 1, 2, 3, 4, 5))
	mustStore(t, x, wB, chain(0, 200, 1, 2, 3))
	mustStore(t, x, wC, chain(0, 300, 1, 2, 9))
	mustStore(t, x, wA1, chain(0, 400, 2, 3, 4)) // same hashes, other chain position
	checkMatch(t, x, []kv.BlockHash{1, 2, 3, 4, 5, 6}, ov(wA, 5), ov(wB, 3), ov(wC, 2))
	checkMatch(t, x, []kv.BlockHash{1, 2, 9, 4}, ov(wA, 2), ov(wB, 2), ov(wC, 3))
	checkMatch(t, x, []kv.BlockHash{2, 3, 4, 5}, ov(wA1, 3))
	checkMatch(t, x, []kv.BlockHash{7, 1, 2})
	checkMatch(t, x, nil)
	// A chain continued in a later event through its parent's engine hash.
	mustStore(t, x, wB, chain(202, 210, 4, 5, 6))
	checkMatch(t, x, []kv.BlockHash{1, 2, 3, 4, 5, 6}, ov(wA, 5), ov(wB, 6), ov(wC, 2))
	s := x.Stats()
	// Distinct nodes: 1,2,3,4,5 + 6 + 9 + (2,3,4 at root) = 10.
	if s.Blocks != 10 || s.Entries != 17 {
		t.Errorf("Stats blocks=%d entries=%d, want 10 and 17", s.Blocks, s.Entries)
	}
	if n := x.WorkerBlocks(wB); n != 6 {
		t.Errorf("WorkerBlocks(b) = %d, want 6", n)
	}
}

func TestRemoveMiddleBlock(t *testing.T) {
	x := newIndex(t, nil)
	mustStore(t, x, wA, chain(0, 100, 1, 2, 3, 4, 5))
	mustStore(t, x, wB, chain(0, 200, 1, 2, 3, 4, 5))
	if n := x.Remove(ctx, wA, []kv.EngineHash{102, 999}); n != 1 {
		t.Errorf("Remove known = %d, want 1", n)
	}
	q := []kv.BlockHash{1, 2, 3, 4, 5}
	checkMatch(t, x, q, ov(wA, 2), ov(wB, 5))
	if n := x.WorkerBlocks(wA); n != 4 {
		t.Errorf("WorkerBlocks(a) = %d, want 4", n)
	}
	// Storing the block again re-links the descendants that were kept.
	mustStore(t, x, wA, chain(101, 102, 3))
	checkMatch(t, x, q, ov(wA, 5), ov(wB, 5))
	// Removing the leaf and the placeholders under a removed middle go away with their last child.
	x.Remove(ctx, wA, []kv.EngineHash{102})
	x.Remove(ctx, wA, []kv.EngineHash{104, 103})
	checkMatch(t, x, q, ov(wA, 2), ov(wB, 5))
	if s := x.Stats(); s.Entries != 7 || s.Blocks != 5 {
		t.Errorf("Stats entries=%d blocks=%d, want 7 and 5", s.Entries, s.Blocks)
	}
	x.RemoveWorker(ctx, wB)
	x.Remove(ctx, wA, []kv.EngineHash{101, 100})
	if s := x.Stats(); s.Entries != 0 || s.Blocks != 0 {
		t.Errorf("after removing all: entries=%d blocks=%d, want 0 0", s.Entries, s.Blocks)
	}
}

func TestUnknownParent(t *testing.T) {
	x := newIndex(t, nil)
	mustStore(t, x, wA, chain(0, 100, 1, 2))
	mustStore(t, x, wB, chain(0, 200, 1, 2, 3))
	before := x.Stats()
	blocks := append(chain(101, 102, 3), index.StoredBlock{EngineHash: 500, Parent: 777, HasParent: true, LocalHash: 4})
	err := x.Store(ctx, wA, blocks)
	if !errors.Is(err, index.ErrUnknownParent) {
		t.Fatalf("Store err = %v, want ErrUnknownParent", err)
	}
	var up *index.UnknownParentError
	if !errors.As(err, &up) || up.Position != 1 || up.Parent != 777 || up.Worker != wA {
		t.Errorf("UnknownParentError = %+v, want position 1, parent 777, worker a", up)
	}
	// The block before the bad one is applied, nothing else changed.
	checkMatch(t, x, []kv.BlockHash{1, 2, 3, 4}, ov(wA, 3), ov(wB, 3))
	if after := x.Stats(); after.Entries != before.Entries+1 || after.Blocks != before.Blocks {
		t.Errorf("Stats after = %+v, before %+v", after, before)
	}
	// A parent only another worker holds is unknown too.
	if err := x.Store(ctx, wC, chain(100, 600, 2)); !errors.Is(err, index.ErrUnknownParent) {
		t.Errorf("foreign parent err = %v, want ErrUnknownParent", err)
	}
	// A removed (placeholder) parent is unknown.
	x.Remove(ctx, wB, []kv.EngineHash{201})
	if err := x.Store(ctx, wB, chain(201, 700, 9)); !errors.Is(err, index.ErrUnknownParent) {
		t.Errorf("removed parent err = %v, want ErrUnknownParent", err)
	}
}

func TestClearOneWorker(t *testing.T) {
	x := newIndex(t, nil)
	mustStore(t, x, wA, chain(0, 100, 1, 2, 3))
	mustStore(t, x, wA, chain(0, 110, 5, 6))
	mustStore(t, x, wB, chain(0, 200, 1, 2, 3))
	x.Remove(ctx, wA, []kv.EngineHash{101}) // leave a placeholder behind
	x.Clear(ctx, wA)
	checkMatch(t, x, []kv.BlockHash{1, 2, 3}, ov(wB, 3))
	checkMatch(t, x, []kv.BlockHash{5, 6})
	s := x.Stats()
	if s.Blocks != 3 || s.Entries != 3 {
		t.Errorf("Stats blocks=%d entries=%d, want 3 3", s.Blocks, s.Entries)
	}
	// The cleared worker starts again from roots; its old engine hashes are gone.
	if err := x.Store(ctx, wA, chain(102, 120, 4)); !errors.Is(err, index.ErrUnknownParent) {
		t.Errorf("store under cleared parent err = %v", err)
	}
	mustStore(t, x, wA, chain(0, 130, 1, 2))
	checkMatch(t, x, []kv.BlockHash{1, 2, 3}, ov(wA, 2), ov(wB, 3))
	x.RemoveWorker(ctx, wB)
	checkMatch(t, x, []kv.BlockHash{1, 2, 3}, ov(wA, 2))
	if s := x.Stats(); s.Blocks != 2 || len(s.Workers) != 1 {
		t.Errorf("after RemoveWorker: %+v", s)
	}
}

func TestLRUEviction(t *testing.T) {
	x := newIndex(t, &index.Config{MaxBlocksPerWorker: 4})
	mustStore(t, x, wA, chain(0, 10, 1, 2, 3)) // X
	mustStore(t, x, wA, chain(0, 20, 7, 8))    // Y: 5 entries, X's leaf goes
	checkMatch(t, x, []kv.BlockHash{1, 2, 3}, ov(wA, 2))
	checkMatch(t, x, []kv.BlockHash{7, 8}, ov(wA, 2))
	mustStore(t, x, wA, chain(0, 30, 9)) // X's new leaf (2) is now the oldest
	checkMatch(t, x, []kv.BlockHash{1, 2, 3}, ov(wA, 1))
	checkMatch(t, x, []kv.BlockHash{7, 8}, ov(wA, 2))
	// Refreshing Y's leaf makes Z the oldest leaf after X's root.
	mustStore(t, x, wA, chain(20, 21, 8))
	mustStore(t, x, wA, chain(0, 40, 11))
	mustStore(t, x, wA, chain(0, 50, 12))
	checkMatch(t, x, []kv.BlockHash{1})
	checkMatch(t, x, []kv.BlockHash{9})
	checkMatch(t, x, []kv.BlockHash{7, 8}, ov(wA, 2))
	s := x.Stats()
	if s.Entries != 4 || s.Evictions != 4 {
		t.Errorf("entries=%d evictions=%d, want 4 4", s.Entries, s.Evictions)
	}

	// The total cap evicts the oldest leaf of any worker.
	y := newIndex(t, &index.Config{MaxBlocks: 3})
	mustStore(t, y, wA, chain(0, 10, 1))
	mustStore(t, y, wB, chain(0, 20, 1, 2))
	mustStore(t, y, wC, chain(0, 30, 5))
	checkMatch(t, y, []kv.BlockHash{1, 2}, ov(wB, 2))
	checkMatch(t, y, []kv.BlockHash{5}, ov(wC, 1))
}

func TestDuplicateAndMovedEngineHashes(t *testing.T) {
	x := newIndex(t, nil)
	mustStore(t, x, wA, chain(0, 100, 1, 2))
	// Same content under another engine hash.
	mustStore(t, x, wA, []index.StoredBlock{{EngineHash: 150, Parent: 100, HasParent: true, LocalHash: 2}})
	x.Remove(ctx, wA, []kv.EngineHash{101})
	checkMatch(t, x, []kv.BlockHash{1, 2}, ov(wA, 2))
	x.Remove(ctx, wA, []kv.EngineHash{150})
	checkMatch(t, x, []kv.BlockHash{1, 2}, ov(wA, 1))
	// An engine hash reused for other content moves.
	mustStore(t, x, wA, chain(100, 101, 2))
	mustStore(t, x, wA, []index.StoredBlock{{EngineHash: 101, LocalHash: 8}})
	checkMatch(t, x, []kv.BlockHash{1, 2}, ov(wA, 1))
	checkMatch(t, x, []kv.BlockHash{8}, ov(wA, 1))
	// A self-referencing store is skipped.
	mustStore(t, x, wA, []index.StoredBlock{{EngineHash: 300, Parent: 300, HasParent: true, LocalHash: 3}})
	if n := x.WorkerBlocks(wA); n != 2 {
		t.Errorf("WorkerBlocks = %d, want 2", n)
	}
}

func TestManyWorkersBitsetGrowth(t *testing.T) {
	x := newIndex(t, nil)
	var want []index.Overlap
	for i := range 150 {
		k := index.WorkerKey{ID: "w", DPRank: i}
		n := 1 + i%7
		mustStore(t, x, k, chain(0, kv.EngineHash(1000*(i+1)), 1, 2, 3, 4, 5, 6, 7)[:n])
		want = append(want, ov(k, n))
	}
	checkMatch(t, x, []kv.BlockHash{1, 2, 3, 4, 5, 6, 7, 8}, want...)
	for i := 0; i < 150; i += 2 {
		x.RemoveWorker(ctx, index.WorkerKey{ID: "w", DPRank: i})
	}
	var odd []index.Overlap
	for i := 1; i < 150; i += 2 {
		odd = append(odd, want[i])
	}
	checkMatch(t, x, []kv.BlockHash{1, 2, 3, 4, 5, 6, 7, 8}, odd...)
	// Freed slots are reused.
	mustStore(t, x, wA, chain(0, 5, 1, 2, 3, 4, 5, 6, 7, 8, 9))
	got := x.Match(ctx, []kv.BlockHash{1, 2, 3, 4, 5, 6, 7, 8, 9})
	if got[0] != ov(wA, 9) || len(got) != 76 {
		t.Errorf("Match after slot reuse: first %v, len %d", got[0], len(got))
	}
}

// TestAgainstNaive applies random stores, removals and clears (small alphabets, so chains collide,
// engine hashes repeat and move, parents go missing) to the index and to the naive reference, and
// compares every lookup.
func TestAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := newIndex(t, nil)
	ref := newNaive()
	keys := []index.WorkerKey{wA, wB, wC, wA1}
	var queries [][]kv.BlockHash
	nonEmpty := 0
	for step := range 20000 {
		k := keys[rng.IntN(len(keys))]
		switch r := rng.IntN(100); {
		case r < 60:
			n := 1 + rng.IntN(6)
			var parent kv.EngineHash
			if rng.IntN(3) > 0 {
				parent = kv.EngineHash(1 + rng.Uint64N(60))
			}
			locals := make([]kv.BlockHash, n)
			for i := range locals {
				locals[i] = kv.BlockHash(rng.Uint64N(4))
			}
			blocks := chain(parent, kv.EngineHash(1+rng.Uint64N(60)), locals...)
			err1 := x.Store(ctx, k, blocks)
			err2 := ref.store(k, blocks)
			if errors.Is(err1, index.ErrUnknownParent) != (err2 != nil) {
				t.Fatalf("step %d: index err %v, naive err %v", step, err1, err2)
			}
			queries = append(queries, locals)
		case r < 95:
			hs := []kv.EngineHash{kv.EngineHash(1 + rng.Uint64N(60)), kv.EngineHash(1 + rng.Uint64N(60))}
			x.Remove(ctx, k, hs)
			ref.remove(k, hs)
		default:
			x.Clear(ctx, k)
			ref.clear(k)
		}
		q := []kv.BlockHash{kv.BlockHash(rng.Uint64N(4)), kv.BlockHash(rng.Uint64N(4)), kv.BlockHash(rng.Uint64N(4)), kv.BlockHash(rng.Uint64N(4))}
		if len(queries) > 0 && rng.IntN(2) == 0 {
			q = queries[rng.IntN(len(queries))]
		}
		got, want := x.Match(ctx, q), ref.match(q)
		if len(want) > 0 {
			nonEmpty++
		}
		if !reflect.DeepEqual(got, want) && (len(got)+len(want) > 0) {
			t.Fatalf("step %d: Match(%v) = %v, naive %v", step, q, got, want)
		}
	}
	if nonEmpty < 5000 {
		t.Errorf("only %d of 20000 lookups matched anything", nonEmpty)
	}
	t.Logf("%d non-empty lookups", nonEmpty)
	s := x.Stats()
	sum := 0
	for _, w := range s.Workers {
		sum += w.Entries
	}
	if sum != s.Entries {
		t.Errorf("per-worker entries sum %d != total %d", sum, s.Entries)
	}
}

// TestConcurrentReads floods stores and removals from several goroutines while others look up; run
// with -race. At the end every worker is removed and the index must be empty.
func TestConcurrentReads(t *testing.T) {
	x := newIndex(t, &index.Config{MaxBlocksPerWorker: 500, MaxBlocks: 1500})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			q := make([]kv.BlockHash, 64)
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := range q {
					q[i] = kv.BlockHash(rng.Uint64N(3))
				}
				for _, o := range x.Match(ctx, q) {
					if o.Blocks < 1 || o.Blocks > len(q) {
						t.Errorf("overlap %v out of range", o)
						return
					}
				}
				// Age profiles and touches (stamps written under the read lock) race with
				// the writers' stores, removals and clears.
				for _, o := range x.MatchAges(ctx, q) {
					if n := len(o.Ages); n > 0 && (o.Ages[0].Depth != 0 || o.Ages[n-1].Depth >= o.Blocks) {
						t.Errorf("age profile %v of a %d-block overlap", o.Ages, o.Blocks)
						return
					}
					x.Touch(ctx, o.Worker, q, o.Blocks)
				}
				_ = x.Stats()
			}
		}()
	}
	var writers sync.WaitGroup
	for wi := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			k := index.WorkerKey{ID: "w", DPRank: wi}
			rng := rand.New(rand.NewPCG(uint64(wi), 7))
			for range 300 {
				locals := make([]kv.BlockHash, 32)
				for i := range locals {
					locals[i] = kv.BlockHash(rng.Uint64N(3))
				}
				base := kv.EngineHash(rng.Uint64N(1 << 40))
				if err := x.Store(ctx, k, chain(0, base, locals...)); err != nil {
					t.Errorf("Store: %v", err)
					return
				}
				x.Remove(ctx, k, []kv.EngineHash{base + kv.EngineHash(rng.Uint64N(32)), base + 31})
				if rng.IntN(100) == 0 {
					x.Clear(ctx, k)
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	if s := x.Stats(); s.Entries > 1500 {
		t.Errorf("entries %d above the total cap", s.Entries)
	}
	for wi := range 4 {
		x.RemoveWorker(ctx, index.WorkerKey{ID: "w", DPRank: wi})
	}
	if s := x.Stats(); s.Entries != 0 || s.Blocks != 0 || len(s.Workers) != 0 {
		t.Errorf("after removing workers: %+v", s)
	}
}

// TestCapsBoundAndSubset applies the same random events to a capped and an uncapped index: the capped
// one never exceeds its caps (per worker and total) and never credits a worker more than the uncapped
// one does (eviction only forgets).
func TestCapsBoundAndSubset(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	capped := newIndex(t, &index.Config{MaxBlocksPerWorker: 40, MaxBlocks: 100})
	full := newIndex(t, nil)
	keys := []index.WorkerKey{wA, wB, wC, wA1}
	for step := range 5000 {
		k := keys[rng.IntN(len(keys))]
		locals := make([]kv.BlockHash, 1+rng.IntN(12))
		for i := range locals {
			locals[i] = kv.BlockHash(rng.Uint64N(5))
		}
		base := kv.EngineHash(1 + rng.Uint64N(1<<20)<<4)
		blocks := chain(0, base, locals...)
		if err := capped.Store(ctx, k, blocks); err != nil {
			t.Fatal(err)
		}
		if err := full.Store(ctx, k, blocks); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(4) == 0 {
			hs := []kv.EngineHash{base + kv.EngineHash(rng.Uint64N(12))}
			capped.Remove(ctx, k, hs)
			full.Remove(ctx, k, hs)
		}
		s := capped.Stats()
		if s.Entries > 100 {
			t.Fatalf("step %d: %d entries above the total cap", step, s.Entries)
		}
		for _, ws := range s.Workers {
			if ws.Entries > 40 {
				t.Fatalf("step %d: worker %v has %d entries", step, ws.Worker, ws.Entries)
			}
		}
		q := locals
		got := map[index.WorkerKey]int{}
		for _, o := range capped.Match(ctx, q) {
			got[o.Worker] = o.Blocks
		}
		for _, o := range full.Match(ctx, q) {
			if got[o.Worker] > o.Blocks {
				t.Fatalf("step %d: capped credits %v with %d > %d", step, o.Worker, got[o.Worker], o.Blocks)
			}
			delete(got, o.Worker)
		}
		if len(got) != 0 {
			t.Fatalf("step %d: capped credits workers the full index does not: %v", step, got)
		}
	}
	if capped.Stats().Evictions == 0 {
		t.Error("no evictions happened")
	}
}

package index_test

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/index"
)

// TestDumpRestores replays random events into one index, dumps every worker into a fresh index and
// compares lookups; it also checks that every dumped block's parent precedes it.
func TestDumpRestores(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	x := newIndex(t, nil)
	keys := []index.WorkerKey{wA, wB, wC, wA1}
	var queries [][]kv.BlockHash
	for range 5000 {
		k := keys[rng.IntN(len(keys))]
		locals := make([]kv.BlockHash, 1+rng.IntN(6))
		for i := range locals {
			locals[i] = kv.BlockHash(rng.Uint64N(4))
		}
		var parent kv.EngineHash
		if rng.IntN(3) > 0 {
			parent = kv.EngineHash(1 + rng.Uint64N(80))
		}
		_ = x.Store(ctx, k, chain(parent, kv.EngineHash(1+rng.Uint64N(80)), locals...))
		if rng.IntN(3) == 0 {
			x.Remove(ctx, k, []kv.EngineHash{kv.EngineHash(1 + rng.Uint64N(80))})
		}
		queries = append(queries, locals)
	}
	y := newIndex(t, nil)
	total := 0
	for _, k := range keys {
		d := x.Dump(ctx, k)
		total += len(d)
		seen := map[kv.EngineHash]bool{}
		for i, b := range d {
			if b.HasParent && !seen[b.Parent] {
				t.Fatalf("%v: block %d parent %d not dumped before it", k, i, b.Parent)
			}
			seen[b.EngineHash] = true
		}
		if err := y.Store(ctx, k, d); err != nil {
			t.Fatalf("restoring %v: %v", k, err)
		}
	}
	if total == 0 {
		t.Fatal("nothing dumped")
	}
	for _, q := range queries {
		if got, want := y.Match(ctx, q), x.Match(ctx, q); !reflect.DeepEqual(got, want) {
			t.Fatalf("Match(%v): restored %v, original %v", q, got, want)
		}
	}
	if d := x.Dump(ctx, index.WorkerKey{ID: "nobody"}); d != nil {
		t.Errorf("Dump of unknown worker = %v", d)
	}
}

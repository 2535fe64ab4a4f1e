package index

import (
	"math/rand/v2"
	"testing"

	"github.com/kvroute/kvroute/kv"
)

// TestEngineMapAgainstMap runs random puts and deletes (sequential keys, which cluster, and random
// ones) against Go's map and checks every key after each phase, so the backward-shift deletion never
// strands a key behind a hole.
func TestEngineMapAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var m engineMap
	ref := map[kv.EngineHash]int32{}
	key := func() kv.EngineHash {
		if rng.IntN(2) == 0 {
			return kv.EngineHash(rng.IntN(5000))
		}
		return kv.EngineHash(rng.Uint64() | 1<<63)
	}
	for phase := range 4 {
		for i := range 50000 {
			k := key()
			if rng.IntN(3) == 0 {
				_, want := ref[k]
				if got := m.del(k); got != want {
					t.Fatalf("phase %d op %d: del(%d) = %v, want %v", phase, i, k, got, want)
				}
				delete(ref, k)
			} else {
				m.put(k, int32(i))
				ref[k] = int32(i)
			}
		}
		if m.n != len(ref) {
			t.Fatalf("phase %d: n = %d, want %d", phase, m.n, len(ref))
		}
		for k, v := range ref {
			if got, ok := m.get(k); !ok || got != v {
				t.Fatalf("phase %d: get(%d) = %d, %v; want %d", phase, k, got, ok, v)
			}
		}
		seen := 0
		m.each(func(k kv.EngineHash, e int32) {
			if ref[k] != e {
				t.Errorf("each: %d → %d, want %d", k, e, ref[k])
			}
			seen++
		})
		if seen != len(ref) {
			t.Fatalf("each visited %d, want %d", seen, len(ref))
		}
	}
	for k := range ref {
		m.del(k)
	}
	if _, ok := m.get(1); ok || m.n != 0 {
		t.Errorf("after deleting all: n = %d", m.n)
	}
}

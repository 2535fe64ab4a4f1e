package jinja

import (
	"sync"
	"testing"
)

// Two consumers' keys, made once as a consumer package makes its key (a test run with -count
// must not make more: NewNoteKey allows maxNoteKeys).
var idsKey, hashesKey = NewNoteKey(), NewNoteKey()

// TestNoteSlots: a Note keeps one value per key, each consumer's apart from the others', and
// charges the recording's owner each growth of a slot's bytes over what it was charged at the
// store before (a shrink is not refunded: kvroute change 5).
func TestNoteSlots(t *testing.T) {
	var charged int64
	n := &Note{charge: func(b int64) { charged += b }}
	if n.Load(idsKey) != nil {
		t.Fatal("an empty note holds a value")
	}
	n.Store(idsKey, "ids", 100)
	n.Store(hashesKey, 7, 40)
	if n.Load(idsKey) != "ids" || n.Load(hashesKey) != 7 || charged != 140 {
		t.Fatalf("slots %v %v, charged %d; want ids 7, 140", n.Load(idsKey), n.Load(hashesKey), charged)
	}
	n.Store(hashesKey, 8, 60)   // replaced: 20 bytes more
	n.Store(idsKey, "ids2", 90) // 10 bytes less: not refunded
	n.Store(idsKey, "ids3", 95) // 5 more than the store before
	if n.Load(idsKey) != "ids3" || n.Load(hashesKey) != 8 || charged != 165 {
		t.Fatalf("slots %v %v, charged %d; want ids3 8, 165", n.Load(idsKey), n.Load(hashesKey), charged)
	}
	var zero Note // a note made by no recording (tests, an uncharged memo) works too
	zero.Store(idsKey, 1, 10)
	if zero.Load(idsKey) != 1 || zero.Load(hashesKey) != nil {
		t.Fatal("the zero note")
	}
}

// TestNoteConcurrentStores: stores under two keys from many goroutines lose neither slot.
func TestNoteConcurrentStores(t *testing.T) {
	a, b := idsKey, hashesKey
	var n Note
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if g%2 == 0 {
					n.Store(a, i, 8)
				} else {
					n.Store(b, i, 8)
				}
			}
		}()
	}
	wg.Wait()
	if n.Load(a) != 199 || n.Load(b) != 199 {
		t.Fatalf("slots %v %v, want 199 199", n.Load(a), n.Load(b))
	}
}

package index

import (
	"context"
	"sync/atomic"

	"github.com/kvroute/kvroute/kv"
)

// Block ages: whether a cached prefix survives until a request's prefill starts (issue 26).
//
// An engine's prefix cache is an LRU over blocks (vLLM's free block queue; internal/sim's
// BlockCache): when a request ends, its blocks become the most recently used, its first block last
// (vLLM frees a request's blocks tail first, so a prefix outlives its extensions), and a block is
// evicted once it is the least recently used and a new block needs its place. The index follows
// that order with one clock per worker, which counts the blocks the worker stored (its BlockStored
// events), and a stamp per entry (entry.touched). A block's *age* is the clock minus its stamp, and
// stands for its position in the LRU: 1 + the blocks used after it. A stored event makes the chain
// it extends the most recent, depth d at age d + 1: it stamps its own blocks so (O(1) each, from
// the entry's depth), and a lookup carries the order up to their ancestors, the cached prefix the
// request used (a block was used at least as recently as its child on the path, one position
// ahead). Touch, which the router calls for the cached prefix of a request it routes, stamps a
// whole prefix: a full hit stores nothing, and a prefix shared with other chains (a system
// prompt) is reached from their paths too. A hit also ages the other blocks: each block of the
// prefix that was older than a block B moves ahead of B in the LRU, one position each. Touch
// advances the clock by the prefix's blocks older than half the learned capacity (C/2, C as
// below): the blocks whose survival is in question are at least that old, since a queue ahead of
// a request rarely stores more than half a cache, so every older block that moves ahead of them
// is counted, and a young one (a system prompt every request reuses) is not counted again and
// again. Without this, a conversation's next turn reusing 2432 old blocks left every other
// block 2432 positions younger than it was, and the router credited prefixes that the queue
// ahead then evicted (bench/trace 3300:150@1.3, issue 26 eighth pass).
//
// The cache capacity is learned, not configured: once the worker evicted (a BlockRemoved event for
// a block the index holds), its cache was full, so the most blocks it held at once is its capacity
// C (0 until then: nothing was evicted, and the model takes every prefix as surviving). A block of
// age a survives the prefill of Q more new blocks on the worker exactly when a + Q ≤ C: each
// stored block ages it by one and the engine evicts from age C + 1 on.
//
// What the order does not see: a hit that another replica routed (it touches only its own
// requests) makes the hit blocks look older than they are and the others younger; a hit on blocks
// between C/2 and a block's own age ages it one position too many each (toward crediting less).

// AgeStep is one step of a worker's age profile over a matched prefix: from block Depth on
// (0-based, in prompt order) some block of the prefix up to there has age at least Age. Ages are
// the running maximum along the prefix, so both fields increase from step to step.
type AgeStep struct {
	Depth int
	Age   uint32
}

// Surviving returns how many leading blocks of a cached prefix of n blocks with age profile steps
// stay cached while budget more blocks are stored on the worker: the blocks before the first step
// whose Age + budget exceeds capacity. capacity 0 (unknown: the worker never evicted) keeps all n.
func Surviving(steps []AgeStep, n int, capacity, budget float64) int {
	if capacity <= 0 {
		return n
	}
	for _, s := range steps {
		if float64(s.Age)+budget > capacity {
			return min(s.Depth, n)
		}
	}
	return n
}

// stampLocked stamps en as used now, at its chain position: depth d gets w.clock − (d + 1), age
// d + 1. A stored event stamps only its own blocks; their ancestors take the same order from them
// when a lookup walks the path (ages). Lock held for writing.
func stampLocked(w *worker, en *entry) {
	en.touched = w.clock.Load() - uint32(en.depth) - 1
}

// Touch stamps the first n blocks of hashes (a request's complete blocks, as for Match) that worker k
// holds as the most recently used: the router sent it a request that reuses them (age.go). It takes
// the read lock (the stamps are atomic), so it does not stall lookups. ctx is not consulted.
func (x *Index) Touch(ctx context.Context, k WorkerKey, hashes []kv.BlockHash, n int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	w := x.workers[k]
	if w == nil || n <= 0 {
		return
	}
	t := &x.t
	cur := rootNode
	for _, h := range hashes[:min(n, len(hashes))] {
		c, ok := t.child(cur, h)
		if !ok || !t.hasBit(c, w.slot) {
			break
		}
		cur = c
	}
	if cur == rootNode {
		return
	}
	// The blocks older than half the capacity move ahead of every block the survival test asks
	// about: the clock advances by their number (above), then the prefix is stamped as the newest.
	half, clock, old := uint32(w.maxHeld/2), w.clock.Load(), uint32(0)
	var eff uint32
	for e, first := t.findEntry(cur, w.slot), true; e != nilIdx; e, first = t.entries.at(e).parent, false {
		eff = effectiveStamp(atomic.LoadUint32(&t.entries.at(e).touched), eff, first)
		if half > 0 && ageAt(clock, eff) > half {
			old++
		}
	}
	clock = w.clock.Add(old)
	for e := t.findEntry(cur, w.slot); e != nilIdx; e = t.entries.at(e).parent {
		en := t.entries.at(e)
		atomic.StoreUint32(&en.touched, clock-uint32(en.depth)-1)
	}
}

// MatchAges is Match with, for a worker that has evicted, its age profile over its matched prefix
// (AgedOverlap.Ages) and its cache capacity in blocks (AgedOverlap.CacheBlocks; both unset for a
// worker that never evicted). It costs a walk up each such worker's prefix on top of Match:
// O(len(hashes) × (workers/64 + matching workers)).
func (x *Index) MatchAges(ctx context.Context, hashes []kv.BlockHash) []AgedOverlap {
	var aged []AgedOverlap
	x.appendMatch(nil, hashes, &aged)
	return aged
}

// ages fills o's age profile from w's entry on the prefix's last node. Read lock held.
func (x *Index) ages(o *AgedOverlap, w *worker, last int32) {
	if !w.evicted || w.maxHeld == 0 {
		return
	}
	t := &x.t
	o.CacheBlocks = float64(w.maxHeld)
	var buf [128]uint32
	path := buf[:0]
	var eff uint32
	clock := w.clock.Load()
	for e := t.findEntry(last, w.slot); e != nilIdx; e = t.entries.at(e).parent {
		eff = effectiveStamp(atomic.LoadUint32(&t.entries.at(e).touched), eff, len(path) == 0)
		path = append(path, ageAt(clock, eff))
	}
	// path runs from the last block to the first; the profile is the running maximum from the
	// first, with a step only where it grows by more than 1/64 of the capacity (so at most 64 steps
	// below the capacity; an age is under-stated by at most that much).
	tol := uint32(max(1, w.maxHeld/64))
	var top uint32
	for d := range path {
		if a := path[len(path)-1-d]; len(o.Ages) == 0 || a >= top+tol {
			o.Ages = append(o.Ages, AgeStep{Depth: d, Age: a})
			top = a
		}
	}
}

// effectiveStamp is the stamp of a block whose own stamp is s, walking up a path from its last
// block: a block was used at least as recently as the block below it on the path, one position
// ahead of it (the stamp of a chain used together), so it is the newer of s and below + 1, below
// being the effective stamp of the block below (none when first). Ages and Touch both take a
// block's age from it.
func effectiveStamp(s, below uint32, first bool) uint32 {
	if first || int32(s-(below+1)) > 0 {
		return s
	}
	return below + 1
}

// ageAt is the age at clock of a block with effective stamp eff: 0 when eff is past clock, which a
// lookup sees when a Touch beside it advanced the clock after the lookup read it.
func ageAt(clock, eff uint32) uint32 {
	return uint32(max(int32(clock-eff), 0))
}

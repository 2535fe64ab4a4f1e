package index

import (
	"context"
	"math/bits"
	"slices"

	"github.com/kvroute/kvroute/kv"
)

// Match returns, for every worker holding at least the first block, the length of the longest
// contiguous prefix of hashes (LocalBlockHash values of a request's complete blocks, in order) it
// holds: block i counts only when blocks 0..i-1 count for the same worker, along the same chain.
// Workers holding nothing of it are left out (their overlap is 0). The result is sorted by worker id,
// then dp rank. It walks the radix tree once, intersecting per-node worker bitsets
// (Dynamo's find_matches in lib/kv-router/src/indexer/radix_tree.rs, without early exit):
// O(len(hashes) × workers/64). ctx is not consulted; a lookup is bounded by len(hashes).
func (x *Index) Match(ctx context.Context, hashes []kv.BlockHash) []Overlap {
	return x.AppendMatch(nil, hashes)
}

// AppendMatch is Match appending to dst, for callers that reuse a buffer.
func (x *Index) AppendMatch(dst []Overlap, hashes []kv.BlockHash) []Overlap {
	x.mu.RLock()
	defer x.mu.RUnlock()
	t := &x.t
	var buf [4]uint64
	var active []uint64
	if t.stride <= len(buf) {
		active = buf[:t.stride]
	} else {
		active = make([]uint64, t.stride)
	}
	copy(active, x.liveMask)
	// depths[slot] is the slot's overlap once it is known.
	var dbuf [256]int32
	var depths []int32
	if len(x.slots) <= len(dbuf) {
		depths = dbuf[:len(x.slots)]
	} else {
		depths = make([]int32, len(x.slots))
	}
	cur := rootNode
	depth := int32(0)
	for _, h := range hashes {
		n, ok := t.child(cur, h)
		if !ok {
			break
		}
		words := t.words(n)
		left := false
		for i, a := range active {
			kept := a & words[i]
			setDepths(depths, i, a&^kept, depth)
			active[i] = kept
			left = left || kept != 0
		}
		if !left {
			break
		}
		depth++
		cur = n
	}
	for i, a := range active {
		setDepths(depths, i, a, depth)
	}
	// Emit in worker-key order (x.order), so no sort is needed per lookup.
	count := 0
	for _, d := range depths {
		if d > 0 {
			count++
		}
	}
	dst = slices.Grow(dst, count)
	for _, s := range x.order {
		if d := depths[s]; d > 0 {
			dst = append(dst, Overlap{Worker: x.slots[s].key, Blocks: int(d)})
		}
	}
	return dst
}

// setDepths records depth for every slot set in word i of m.
func setDepths(depths []int32, i int, m uint64, depth int32) {
	for m != 0 {
		b := bits.TrailingZeros64(m)
		m &= m - 1
		depths[i*64+b] = depth
	}
}

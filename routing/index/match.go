package index

import (
	"cmp"
	"context"
	"math/bits"
	"slices"
)

// Match returns, for every worker holding at least the first block, the length of the longest
// contiguous prefix of hashes (LocalBlockHash values of a request's complete blocks, in order) it
// holds: block i counts only when blocks 0..i-1 count for the same worker, along the same chain.
// Workers holding nothing of it are left out (their overlap is 0). The result is sorted by worker id,
// then dp rank. It walks the radix tree once, intersecting per-node worker bitsets
// (Dynamo's find_matches in lib/kv-router/src/indexer/radix_tree.rs, without early exit):
// O(len(hashes) × workers/64). ctx is not consulted; a lookup is bounded by len(hashes).
func (x *Index) Match(ctx context.Context, hashes []uint64) []Overlap {
	return x.AppendMatch(nil, hashes)
}

// AppendMatch is Match appending to dst (which it sorts from len(dst) on), for callers that reuse a
// buffer.
func (x *Index) AppendMatch(dst []Overlap, hashes []uint64) []Overlap {
	x.mu.RLock()
	defer x.mu.RUnlock()
	t := &x.t
	start := len(dst)
	var buf [4]uint64
	var active []uint64
	if t.stride <= len(buf) {
		active = buf[:t.stride]
	} else {
		active = make([]uint64, t.stride)
	}
	copy(active, x.liveMask)
	cur := rootNode
	depth := 0
	for _, h := range hashes {
		n, ok := t.child(cur, h)
		if !ok {
			break
		}
		words := t.words(n)
		left := false
		for i, a := range active {
			kept := a & words[i]
			if depth > 0 {
				dst = x.appendSlots(dst, i, a&^kept, depth)
			}
			active[i] = kept
			left = left || kept != 0
		}
		if !left {
			break
		}
		depth++
		cur = n
	}
	if depth > 0 {
		for i, a := range active {
			dst = x.appendSlots(dst, i, a, depth)
		}
	}
	slices.SortFunc(dst[start:], func(a, b Overlap) int {
		if c := cmp.Compare(a.Worker.ID, b.Worker.ID); c != 0 {
			return c
		}
		return cmp.Compare(a.Worker.DPRank, b.Worker.DPRank)
	})
	return dst
}

// appendSlots appends an Overlap of depth blocks for every slot set in word i of m.
// Lock should be held (read) on entry.
func (x *Index) appendSlots(dst []Overlap, i int, m uint64, depth int) []Overlap {
	for m != 0 {
		b := bits.TrailingZeros64(m)
		m &= m - 1
		dst = append(dst, Overlap{Worker: x.slots[i*64+b].key, Blocks: depth})
	}
	return dst
}

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
	return x.appendMatch(dst, hashes, nil)
}

// appendMatch is AppendMatch, or with aged set MatchAges: the overlaps then go to *aged, with their
// age profiles, instead of dst.
func (x *Index) appendMatch(dst []Overlap, hashes []kv.BlockHash, aged *[]AgedOverlap) []Overlap {
	withAges := aged != nil
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
	// last[slot] is the node of the slot's last matched block (withAges only).
	var lbuf [256]int32
	var last []int32
	if withAges && len(x.slots) <= len(lbuf) {
		last = lbuf[:len(x.slots)]
	} else if withAges {
		last = make([]int32, len(x.slots))
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
			if withAges {
				setDepths(last, i, a&^kept, cur)
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
	for i, a := range active {
		setDepths(depths, i, a, depth)
		if withAges {
			setDepths(last, i, a, cur)
		}
	}
	// Emit in worker-key order (x.order), so no sort is needed per lookup.
	count := 0
	for _, d := range depths {
		if d > 0 {
			count++
		}
	}
	if withAges {
		*aged = slices.Grow(*aged, count)
		for _, s := range x.order {
			if d := depths[s]; d > 0 {
				*aged = append(*aged, AgedOverlap{Overlap: Overlap{Worker: x.slots[s].key, Blocks: int(d)}})
				x.ages(&(*aged)[len(*aged)-1], x.slots[s], last[s])
			}
		}
		return dst
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

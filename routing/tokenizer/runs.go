package tokenizer

import "github.com/zeebo/xxh3"

// Runs is a text's ids in runs: the ids are IDs concatenated in order. Runs are shared (with the
// cache, a piece's note, or each other) and only read. A run that is a keyed piece's region is
// the same ids wherever and whenever the piece recurs; LoadRunHashes and StoreRunHashes keep
// the hashes of its blocks.
type Runs struct {
	IDs [][]uint32
	src []runSource // parallel to IDs
}

// runSource says where a run came from: a keyed piece's region (with its key, and its note's
// value when the piece has a note) or not.
type runSource struct {
	keyed bool
	key   xxh3.Uint128 // the region's segment cache key
	note  PieceNote
	pt    *pieceTok
}

// Len is the number of ids.
func (r Runs) Len() int {
	n := 0
	for _, x := range r.IDs {
		n += len(x)
	}
	return n
}

func (r *Runs) add(ids []uint32, src runSource) {
	r.IDs = append(r.IDs, ids[:len(ids):len(ids)])
	r.src = append(r.src, src)
}

func (r *Runs) addRuns(o Runs) {
	r.IDs = append(r.IDs, o.IDs...)
	r.src = append(r.src, o.src...)
}

// LoadRunHashes writes into dst the kept hashes of the blocks inside run (a keyed piece's region)
// whose first block boundary is skip tokens in, for blockSize and seed, and reports whether
// exactly len(dst) were kept: from the piece's note, else from c (nil: none).
func LoadRunHashes[H ~uint64](r Runs, c *SegmentCache, run, skip, blockSize int, seed uint64, dst []H) bool {
	src := &r.src[run]
	if !src.keyed {
		return false
	}
	if src.pt == nil {
		return LoadBlockHashes(c, src.key, skip, blockSize, seed, dst)
	}
	rh := src.pt.hashes.Load()
	if rh == nil || rh.skip != skip || rh.blockSize != blockSize || rh.seed != seed || len(rh.h) != len(dst) {
		return false
	}
	for i, h := range rh.h {
		dst[i] = H(h)
	}
	return true
}

// StoreRunHashes keeps what LoadRunHashes returns for the same arguments: in the piece's note
// (replacing the hashes of another alignment, block size or seed), else in c.
func StoreRunHashes[H ~uint64](r Runs, c *SegmentCache, run, skip, blockSize int, seed uint64, hashes []H) {
	src := &r.src[run]
	if !src.keyed || len(hashes) == 0 {
		return
	}
	if src.pt == nil {
		StoreBlockHashes(c, src.key, skip, blockSize, seed, hashes)
		return
	}
	rh := &regionHashes{skip: skip, blockSize: blockSize, seed: seed, h: make([]uint64, len(hashes))}
	for i, h := range hashes {
		rh.h[i] = uint64(h)
	}
	src.pt.hashes.Store(rh)
	src.note.Store(src.pt, src.pt.bytes())
}

// bytes is what a note holding pt is charged: its ids, its block hashes and a fixed overhead.
func (pt *pieceTok) bytes() int64 {
	n := int64(4*len(pt.ids)) + segmentEntryOverhead
	if rh := pt.hashes.Load(); rh != nil {
		n += int64(8*len(rh.h)) + 48
	}
	return n
}

package tokenizer

// Runs is a text's ids in runs: the ids are IDs concatenated in order. Runs are shared (with a
// piece's note, or each other) and only read. A run that is a noted piece's region is the same
// ids wherever and whenever the piece recurs; LoadRunHashes and StoreRunHashes keep the hashes of
// its blocks in the note.
type Runs struct {
	IDs [][]uint32
	src []runSource // parallel to IDs
}

// runSource says where a run came from: a noted piece's region (its note and the note's value),
// or nothing (pt nil).
type runSource struct {
	note PieceNote
	pt   *pieceTok
}

// Len is the number of ids.
func (r Runs) Len() int {
	n := 0
	for _, x := range r.IDs {
		n += len(x)
	}
	return n
}

// Join returns the ids as one slice (the only run itself when there is one).
func (r Runs) Join() []uint32 {
	if len(r.IDs) == 1 {
		return r.IDs[0]
	}
	ids := make([]uint32, 0, r.Len())
	for _, x := range r.IDs {
		ids = append(ids, x...)
	}
	return ids
}

func (r *Runs) add(ids []uint32, src runSource) {
	r.IDs = append(r.IDs, ids[:len(ids):len(ids)])
	r.src = append(r.src, src)
}

func (r *Runs) addRuns(o Runs) {
	r.IDs = append(r.IDs, o.IDs...)
	r.src = append(r.src, o.src...)
}

// LoadRunHashes writes into dst the hashes kept in its piece's note of the blocks inside run (a
// noted piece's region) whose first block boundary is skip tokens in, for blockSize and seed, and
// reports whether exactly len(dst) were kept.
func LoadRunHashes[H ~uint64](r Runs, run, skip, blockSize int, seed uint64, dst []H) bool {
	pt := r.src[run].pt
	if pt == nil {
		return false
	}
	rh := pt.hashes.Load()
	if rh == nil || rh.skip != skip || rh.blockSize != blockSize || rh.seed != seed || len(rh.h) != len(dst) {
		return false
	}
	for i, h := range rh.h {
		dst[i] = H(h)
	}
	return true
}

// StoreRunHashes keeps in the piece's note what LoadRunHashes returns for the same arguments
// (replacing the hashes of another alignment, block size or seed).
func StoreRunHashes[H ~uint64](r Runs, run, skip, blockSize int, seed uint64, hashes []H) {
	src := &r.src[run]
	if src.pt == nil || len(hashes) == 0 {
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

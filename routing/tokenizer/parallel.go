package tokenizer

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Segments of at least parallelMinBytes (after NFC) are encoded by GOMAXPROCS goroutines in
// chunks of at least parallelChunkBytes, at most chunksPerProc per goroutine: more chunks than
// goroutines, taken in turn, so that a goroutine whose thread the OS runs less (a shared
// machine) is left fewer of them, instead of the whole encode waiting for its one large chunk.
const (
	parallelMinBytes   = 64 << 10
	parallelChunkBytes = 32 << 10
	chunksPerProc      = 4
)

// encodeSegmentAuto appends the ids of a segment without added tokens: encodeSegment, or for a
// large segment of a tokenizer on the Qwen scanner fast path (no normalized added tokens) on a
// multi-core machine encodeParallel.
func (t *Tokenizer) encodeSegmentAuto(dst []uint32, seg string, first bool) []uint32 {
	if len(seg) < parallelMinBytes || t.fast == 0 || len(t.addedNorm.first) > 0 {
		return t.encodeSegment(dst, seg, first)
	}
	procs := runtime.GOMAXPROCS(0)
	parts := min(chunksPerProc*procs, len(seg)/parallelChunkBytes)
	if procs < 2 || parts < 2 {
		return t.encodeSegment(dst, seg, first)
	}
	dst, _ = t.encodeParallelOn(dst, seg, parts, procs, preTokenStartNear)
	return dst
}

// encodeParallel is encodeParallelOn with one goroutine per chunk (tests).
func (t *Tokenizer) encodeParallel(dst []uint32, seg string, parts int, near func(string, int) int) (_ []uint32, repaired int) {
	return t.encodeParallelOn(dst, seg, parts, parts, near)
}

// encodeParallelOn appends the ids of seg (no added tokens) encoded in parts chunks by at most
// workers goroutines at once (the caller's included). The ids are those of encodeSegment by
// construction: BPE runs per pre-token, so the ids of a text are the concatenation of the ids
// of consecutive runs of its pre-tokens. After the normalizer (whole segment, once), near(seg,
// i) proposes a chunk start at or after i that is probably a pre-token boundary; each chunk is
// pre-tokenized from its start and encoded on its own. A proposed start is accepted only when
// the previous chunk's pre-tokenization ends exactly on it (pre-tokenization from a position
// reads only the text after it, so both sequences then agree from there on); otherwise the
// chunk is encoded again, sequentially, from where the previous one ended. repaired counts
// those chunks. The first chunk is encoded by the caller straight into dst (no copy); the
// others into their own slices, appended after.
func (t *Tokenizer) encodeParallelOn(dst []uint32, seg string, parts, workers int, near func(string, int) int) (_ []uint32, repaired int) {
	if seg == "" {
		return dst, 0
	}
	if t.fast == 0 || len(t.addedNorm.first) > 0 {
		return t.encodeSegment(dst, seg, false), 0 // only the Qwen scanner is chunked
	}
	if t.norm != nil {
		seg = t.norm(seg)
	}
	starts := make([]int, 0, parts+1)
	starts = append(starts, 0)
	for k := 1; k < parts; k++ {
		s := near(seg, k*len(seg)/parts)
		if s > starts[len(starts)-1] && s < len(seg) {
			starts = append(starts, s)
		}
	}
	starts = append(starts, len(seg))
	n := len(starts) - 1
	ids := make([][]uint32, n)
	ends := make([]int, n)
	// run encodes chunk k from position from into out.
	run := func(k, from int, out []uint32) {
		ids[k], ends[k] = t.encodeRun(out, seg, from, starts[k+1])
	}
	var next atomic.Int32 // the next chunk to take, from 1
	next.Store(1)
	work := func() {
		for k := int(next.Add(1)) - 1; k < n; k = int(next.Add(1)) - 1 {
			run(k, starts[k], make([]uint32, 0, (starts[k+1]-starts[k])/3+4))
		}
	}
	var wg sync.WaitGroup
	for range min(workers, n) - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	run(0, 0, dst)
	work()
	wg.Wait()
	dst = ids[0]
	for k := 1; k < n; k++ {
		if ends[k-1] != starts[k] {
			// the previous chunk ran past this start: it was not a boundary
			repaired++
			if ends[k-1] >= starts[k+1] {
				ends[k] = ends[k-1]
				continue // already covered by the previous chunk
			}
			run(k, ends[k-1], dst)
			dst = ids[k]
			continue
		}
		dst = append(dst, ids[k]...)
	}
	return dst, repaired
}

// preTokenStartNear returns the first position at or after i where an ASCII space sits between
// two ASCII letters ("…abc def…"), len(s) when there is none. For the Qwen split pattern that
// position is a pre-token boundary: the letter run before it ends there and " def" starts there;
// encodeParallel checks it anyway.
func preTokenStartNear(s string, i int) int {
	for i = max(i, 1); i+1 < len(s); i++ {
		if s[i] == ' ' && isASCIILetter(s[i-1]) && isASCIILetter(s[i+1]) {
			return i
		}
	}
	return len(s)
}

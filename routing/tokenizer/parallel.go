package tokenizer

import (
	"runtime"
	"sync"
)

// Segments of at least parallelMinBytes (after NFC) are encoded by several goroutines, one
// chunk of at least parallelChunkBytes each, at most GOMAXPROCS chunks.
const (
	parallelMinBytes   = 64 << 10
	parallelChunkBytes = 32 << 10
)

// encodeSegmentAuto appends the ids of a segment without added tokens: encodeSegment, or for a
// large segment of a tokenizer on the Qwen scanner fast path (no normalized added tokens) on a
// multi-core machine encodeParallel with one chunk per core.
func (t *Tokenizer) encodeSegmentAuto(dst []uint32, seg string, first bool) []uint32 {
	if len(seg) < parallelMinBytes || t.fast == 0 || len(t.addedNorm.first) > 0 {
		return t.encodeSegment(dst, seg, first)
	}
	parts := min(runtime.GOMAXPROCS(0), len(seg)/parallelChunkBytes)
	if parts < 2 {
		return t.encodeSegment(dst, seg, first)
	}
	dst, _ = t.encodeParallel(dst, seg, parts, preTokenStartNear)
	return dst
}

// encodeParallel appends the ids of seg (no added tokens) encoded in parts chunks at once. The
// ids are those of encodeSegment by construction: BPE runs per pre-token, so the ids of a text
// are the concatenation of the ids of consecutive runs of its pre-tokens. After the normalizer
// (whole segment, once), near(seg, i) proposes a chunk start at or after i that is probably a pre-token
// boundary; each chunk is pre-tokenized from its start and encoded on its own goroutine. A
// proposed start is accepted only when the previous chunk's pre-tokenization ends exactly on it
// (pre-tokenization from a position reads only the text after it, so both sequences then agree
// from there on); otherwise the chunk is encoded again, sequentially, from where the previous
// one ended. repaired counts those chunks.
func (t *Tokenizer) encodeParallel(dst []uint32, seg string, parts int, near func(string, int) int) (_ []uint32, repaired int) {
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
	run := func(k, from int) {
		out := make([]uint32, 0, (starts[k+1]-from)/3+4)
		i := from
		for i < starts[k+1] {
			j := nextPreToken(seg, i, t.fast, t.fastDigits)
			out = t.encodeWord(out, seg[i:j])
			i = j
		}
		ids[k], ends[k] = out, i
	}
	var wg sync.WaitGroup
	for k := 1; k < n; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(k, starts[k])
		}()
	}
	run(0, 0)
	wg.Wait()
	for k := 0; k < n; k++ {
		if k > 0 && ends[k-1] != starts[k] {
			// the previous chunk ran past this start: it was not a boundary
			repaired++
			if ends[k-1] >= starts[k+1] {
				ids[k], ends[k] = nil, ends[k-1]
			} else {
				run(k, ends[k-1])
			}
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

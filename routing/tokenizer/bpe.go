package tokenizer

import "sync"

// merge is one BPE merge rule: the pair it applies to has rank rank (its
// index in tokenizer.json's merges) and becomes token id.
type merge struct {
	rank uint32
	id   uint32
}

// pairKey packs a (left, right) token id pair into a map key.
func pairKey(left, right uint32) uint64 { return uint64(left)<<32 | uint64(right) }

// symbol is one node of the linked list of a word's current tokens.
type symbol struct {
	id         uint32 // deadSymbol once merged into its left neighbour
	prev, next int32  // neighbour indices, -1 at the ends
}

const deadSymbol = ^uint32(0)

// A candidate is a heap entry rank<<32 | pos: merging the symbol at pos with
// its right neighbour by the merge rule of that rank (whose result is
// rankIDs[rank]). Ordering the packed value orders by rank, then leftmost
// position, as Hugging Face's Merge Ord. Entries go stale when a neighbour
// merges; they are checked when popped, as in Hugging Face's word.rs.
type candidate = uint64

// bpeScratch holds the reusable buffers of one bpe call.
type bpeScratch struct {
	syms []symbol
	heap []candidate
}

var scratchPool = sync.Pool{New: func() any { return new(bpeScratch) }}

// maxScratch bounds the symbol capacity kept in scratchPool, so one huge
// word does not pin its buffers.
const maxScratch = 1 << 17

// bpe appends the ids of word (raw bytes, at least one) to dst. The initial
// symbols are its bytes (byte-level) or characters (charSymbols). It is Hugging
// Face tokenizers' BPE merge_all (models/bpe/word.rs): repeatedly merge the
// pair with the lowest rank, leftmost first, using a binary heap of
// candidates and a linked list of symbols: O(n log n) for n bytes. A popped
// candidate is applied only if the pair now at its position still merges
// into the candidate's result id (HF's staleness check).
func (t *Tokenizer) bpe(dst []uint32, word string) []uint32 {
	sc := scratchPool.Get().(*bpeScratch)
	syms := sc.syms[:0]
	if cap(syms) < len(word) { // at most one symbol per byte: grow once
		syms = make([]symbol, 0, len(word))
	}
	if t.byteLevel {
		for i := 0; i < len(word); i++ {
			syms = append(syms, symbol{id: t.byteIDs[word[i]], prev: int32(i - 1), next: int32(i + 1)})
		}
	} else {
		syms = t.charSymbols(syms, word)
	}
	n := len(syms)
	syms[n-1].next = -1
	h := sc.heap[:0]
	for i := 0; i+1 < n; i++ {
		if m, ok := t.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h = append(h, uint64(m.rank)<<32|uint64(i))
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	for len(h) > 0 {
		top := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		if last > 0 {
			siftDown(h, 0)
		}
		pos := int32(uint32(top))
		newID := t.rankIDs[top>>32]
		s := &syms[pos]
		if s.id == deadSymbol || s.next < 0 {
			continue
		}
		next := s.next
		if m, ok := t.merges[pairKey(s.id, syms[next].id)]; !ok || m.id != newID {
			continue // stale: a neighbour changed since this entry was pushed
		}
		s.id = newID
		syms[next].id = deadSymbol
		s.next = syms[next].next
		if s.next >= 0 {
			syms[s.next].prev = pos
		}
		if s.prev >= 0 {
			if m, ok := t.merges[pairKey(syms[s.prev].id, newID)]; ok {
				h = heapPush(h, uint64(m.rank)<<32|uint64(uint32(s.prev)))
			}
		}
		if s.next >= 0 {
			if m, ok := t.merges[pairKey(newID, syms[s.next].id)]; ok {
				h = heapPush(h, uint64(m.rank)<<32|uint64(uint32(pos)))
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		dst = append(dst, syms[i].id)
	}
	sc.syms, sc.heap = syms, h
	if cap(syms) <= maxScratch {
		scratchPool.Put(sc)
	}
	return dst
}

// charSymbols appends the initial symbols of a character-level word: each
// character's vocabulary token, else its bytes' <0xXX> tokens (Hugging Face
// BPE merge_word with byte_fallback).
func (t *Tokenizer) charSymbols(syms []symbol, word string) []symbol {
	push := func(id uint32) {
		k := int32(len(syms))
		syms = append(syms, symbol{id: id, prev: k - 1, next: k + 1})
	}
	for i := 0; i < len(word); {
		if c := word[i]; c < 0x80 {
			push(t.byteIDs[c])
			i++
			continue
		}
		_, n := decodeAt(word, i)
		if id, ok := t.vocab[word[i:i+n]]; ok && n > 1 {
			push(id)
		} else {
			for k := i; k < i+n; k++ {
				push(t.byteFallback[word[k]])
			}
		}
		i += n
	}
	return syms
}

func heapPush(h []candidate, c candidate) []candidate {
	h = append(h, c)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p] <= c {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = c
	return h
}

func siftDown(h []candidate, i int) {
	n := len(h)
	c := h[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r] < h[l] {
			m = r
		}
		if c <= h[m] {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = c
}

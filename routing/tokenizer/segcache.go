package tokenizer

import (
	"slices"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/internal/lru"
)

// DefaultSegmentCacheBytes is the default budget of a SegmentCache: 256 MiB.
const DefaultSegmentCacheBytes = 256 << 20

// minCachedSegment is the shortest segment worth a cache entry, in bytes: below it, hashing and
// locking cost about what encoding does (role headers such as "user\n" are a few bytes).
const minCachedSegment = 64

// segmentEntryOverhead approximates the bytes an entry costs besides its ids (map slot, list
// links, key, slice header).
const segmentEntryOverhead = 96

// SegmentCache memoizes the ids of prompt segments: the text between two added tokens, which
// encodes independently of the rest of the prompt (Encode splits there first). A conversation's
// earlier turns, a shared system prompt or a repeated document are then a hash and a lookup.
//
// Entries are keyed by the 128-bit XXH3 hash of the segment (zeebo/xxh3) and its length, and
// evicted least recently used (internal/lru) once the entries' bytes (4 per id plus a fixed
// overhead) exceed the budget. A segment larger than a quarter of the budget is not stored. Safe
// for concurrent use; the zero value is not usable, build it with NewSegmentCache.
type SegmentCache struct {
	lru *lru.Cache[xxh3.Uint128, []uint32]
}

// NewSegmentCache returns a cache holding at most maxBytes bytes of entries; maxBytes ≤ 0 gives
// nil, which Tokenizer.SetSegmentCache reads as "no cache".
func NewSegmentCache(maxBytes int64) *SegmentCache {
	if maxBytes <= 0 {
		return nil
	}
	return &SegmentCache{lru: lru.New[xxh3.Uint128, []uint32](maxBytes)}
}

// SegmentCacheStats is a snapshot of a SegmentCache's counters.
type SegmentCacheStats struct {
	Hits, Misses uint64 // lookups of segments of at least 64 bytes
	Bytes        int64  // accounted bytes of the entries held
	Entries      int
	MaxBytes     int64
}

// Stats returns the cache's counters; a nil cache gives zeros.
func (c *SegmentCache) Stats() SegmentCacheStats {
	if c == nil {
		return SegmentCacheStats{}
	}
	st := c.lru.Stats()
	return SegmentCacheStats{Hits: st.Hits, Misses: st.Misses, Bytes: st.Bytes, Entries: st.Entries, MaxBytes: st.MaxBytes}
}

// get returns the stored ids of seg (shared: the caller must not modify them).
func (c *SegmentCache) get(key xxh3.Uint128, n int) ([]uint32, bool) {
	if e, ok := c.lru.Get(key, n); ok {
		return e.Val, true
	}
	return nil, false
}

// put stores a copy of ids under key, evicting the least recently used entries over budget.
func (c *SegmentCache) put(key xxh3.Uint128, n int, ids []uint32) {
	size := int64(len(ids))*4 + segmentEntryOverhead
	if size > c.lru.MaxBytes()/4 {
		return // not stored: no copy
	}
	c.lru.Put(&lru.Entry[xxh3.Uint128, []uint32]{Key: key, N: n, Val: append([]uint32(nil), ids...)}, size, false)
}

// SetSegmentCache makes Encode look up and store segments of at least 64 bytes in c; nil turns
// the cache off. Call it before the tokenizer is shared (it is not synchronized with Encode).
func (t *Tokenizer) SetSegmentCache(c *SegmentCache) { t.segs = c }

// SegmentCache returns the cache set with SetSegmentCache, or nil.
func (t *Tokenizer) SegmentCache() *SegmentCache { return t.segs }

// segPiece is one segment of a text split at its added tokens, with the added token after it.
type segPiece struct {
	seg      string
	first    bool         // the segment starts the text
	cached   bool         // looked up in the segment cache (long enough)
	key      xxh3.Uint128 // its cache key, when cached
	ids      []uint32     // the cache's ids on a hit (shared: only read)
	hit      bool
	added    uint32 // the added token's id after seg
	hasAdded bool
}

// encodeWithSegments is Encode with a segment cache: the same split at added tokens and the same
// per-segment encoding, but every cacheable segment is looked up before the ids are allocated,
// so a prompt whose segments all hit (a conversation's earlier turns) costs one allocation of its
// exact length and one copy per segment, instead of a slice sized from the text and grown.
func (t *Tokenizer) encodeWithSegments(text string) []uint32 {
	return t.appendWithSegments(nil, text, true)
}

// appendWithSegments appends encodeWithSegments(text)'s ids to dst, for a text that starts the
// prompt (first) or follows an added token.
func (t *Tokenizer) appendWithSegments(dst []uint32, text string, first bool) []uint32 {
	var buf [32]segPiece
	pieces := buf[:0]
	for len(text) > 0 {
		start, end, id := -1, -1, uint32(0)
		if len(t.added.first) > 0 {
			start, end, id = t.added.find(text)
		}
		if start < 0 {
			pieces = append(pieces, segPiece{seg: text, first: first})
			break
		}
		pieces = append(pieces, segPiece{seg: text[:start], first: first && start > 0, added: id, hasAdded: true})
		text = text[end:]
		first = false
	}
	c := t.segs
	size, misses := 0, 0
	for i := range pieces {
		p := &pieces[i]
		if p.hasAdded {
			size++
		}
		if len(p.seg) < minCachedSegment {
			size += (len(p.seg) + 2) / 3
			continue
		}
		p.cached, p.key = true, segmentKey(p.seg, p.first)
		if p.ids, p.hit = c.get(p.key, len(p.seg)); p.hit {
			size += len(p.ids)
		} else {
			size += len(p.seg) / 3
			misses++
		}
	}
	var ids []uint32
	if dst == nil {
		ids = make([]uint32, 0, size) // exactly the estimate
	} else {
		ids = slices.Grow(dst, size)
	}
	var done map[xxh3.Uint128][3]int // ids[from:to] of a segment (of len bytes) missed and encoded here
	for i := range pieces {
		p := &pieces[i]
		switch {
		case p.hit:
			ids = append(ids, p.ids...)
		case p.cached:
			// A segment that occurs again later in the same prompt (a repeated document)
			// missed at every occurrence above; it is encoded once and copied after.
			if r, ok := done[p.key]; ok && r[2] == len(p.seg) {
				ids = append(ids, ids[r[0]:r[1]]...)
				break
			}
			n := len(ids)
			ids = t.encodeSegmentAuto(ids, p.seg, p.first)
			c.put(p.key, len(p.seg), ids[n:])
			if misses > 1 {
				if done == nil {
					done = make(map[xxh3.Uint128][3]int, misses)
				}
				done[p.key] = [3]int{n, len(ids), len(p.seg)}
			}
		default:
			ids = t.encodeSegmentAuto(ids, p.seg, p.first)
		}
		if p.hasAdded {
			ids = append(ids, p.added)
		}
	}
	return ids
}

// segmentKey is a segment's cache key: its 128-bit XXH3, with first folded in (a Metaspace
// prepend_scheme "first" encodes the text's first segment differently).
func segmentKey(seg string, first bool) xxh3.Uint128 {
	key := xxh3.HashString128(seg)
	if first {
		key.Hi ^= 0x9e3779b97f4a7c15 // a different key for the same text at the start
	}
	return key
}

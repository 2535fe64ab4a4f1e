package tokenizer

import (
	"sync"
	"sync/atomic"

	"github.com/zeebo/xxh3"
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
// evicted least recently used once the entries' bytes (4 per id plus a fixed overhead) exceed
// the budget. A segment larger than a quarter of the budget is not stored. Safe for concurrent
// use; the zero value is not usable, build it with NewSegmentCache.
type SegmentCache struct {
	max int64

	mu    sync.Mutex
	bytes int64
	m     map[xxh3.Uint128]*segEntry
	head  segEntry // sentinel of the recency list: head.next is the most recent

	hits, misses atomic.Uint64
}

type segEntry struct {
	key        xxh3.Uint128
	n          int // segment length in bytes, checked on lookup
	ids        []uint32
	prev, next *segEntry
}

// NewSegmentCache returns a cache holding at most maxBytes bytes of entries; maxBytes ≤ 0 gives
// nil, which Tokenizer.SetSegmentCache reads as "no cache".
func NewSegmentCache(maxBytes int64) *SegmentCache {
	if maxBytes <= 0 {
		return nil
	}
	c := &SegmentCache{max: maxBytes, m: make(map[xxh3.Uint128]*segEntry)}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
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
	c.mu.Lock()
	defer c.mu.Unlock()
	return SegmentCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Bytes: c.bytes, Entries: len(c.m), MaxBytes: c.max}
}

func (c *SegmentCache) unlink(e *segEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
}

func (c *SegmentCache) pushFront(e *segEntry) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}

// get returns the stored ids of seg (shared: the caller must not modify them).
func (c *SegmentCache) get(key xxh3.Uint128, n int) ([]uint32, bool) {
	c.mu.Lock()
	e, ok := c.m[key]
	if ok && e.n == n {
		c.unlink(e)
		c.pushFront(e)
		c.mu.Unlock()
		c.hits.Add(1)
		return e.ids, true
	}
	c.mu.Unlock()
	c.misses.Add(1)
	return nil, false
}

// put stores a copy of ids under key, evicting the least recently used entries over budget.
func (c *SegmentCache) put(key xxh3.Uint128, n int, ids []uint32) {
	size := int64(len(ids))*4 + segmentEntryOverhead
	if size > c.max/4 {
		return
	}
	e := &segEntry{key: key, n: n, ids: append([]uint32(nil), ids...)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[key]; ok {
		c.unlink(old)
		c.bytes -= int64(len(old.ids))*4 + segmentEntryOverhead
	}
	c.m[key] = e
	c.pushFront(e)
	c.bytes += size
	for c.bytes > c.max {
		last := c.head.prev
		c.unlink(last)
		delete(c.m, last.key)
		c.bytes -= int64(len(last.ids))*4 + segmentEntryOverhead
	}
}

// SetSegmentCache makes Encode look up and store segments of at least 64 bytes in c; nil turns
// the cache off. Call it before the tokenizer is shared (it is not synchronized with Encode).
func (t *Tokenizer) SetSegmentCache(c *SegmentCache) { t.segs = c }

// SegmentCache returns the cache set with SetSegmentCache, or nil.
func (t *Tokenizer) SegmentCache() *SegmentCache { return t.segs }

// encodeSegmentCached appends the ids of a segment without added tokens (first: it starts the
// text), through the segment cache when one is set and the segment is long enough to be worth
// it (encodeSegmentAuto encodes the misses, in parallel when large). first is part of the key:
// a Metaspace prepend_scheme "first" encodes the text's first segment differently.
func (t *Tokenizer) encodeSegmentCached(dst []uint32, seg string, first bool) []uint32 {
	c := t.segs
	if c == nil || len(seg) < minCachedSegment {
		return t.encodeSegmentAuto(dst, seg, first)
	}
	key := xxh3.HashString128(seg)
	if first {
		key.Hi ^= 0x9e3779b97f4a7c15 // a different key for the same text at the start
	}
	if ids, ok := c.get(key, len(seg)); ok {
		return append(dst, ids...)
	}
	n := len(dst)
	dst = t.encodeSegmentAuto(dst, seg, first)
	c.put(key, len(seg), dst[n:])
	return dst
}

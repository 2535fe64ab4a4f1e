package media

import (
	"container/list"
	"context"
	"errors"
	"sync"

	"github.com/zeebo/xxh3"
)

// CacheKey identifies one decode: XXH3-128 of the fetched bytes plus the sampler parameters.
type CacheKey struct {
	Content xxh3.Uint128
	Sampler string
}

// NewCacheKey hashes data (XXH3-128) and pairs it with the sampler parameter string.
func NewCacheKey(data []byte, samplerKey string) CacheKey {
	return CacheKey{Content: xxh3.Hash128(data), Sampler: samplerKey}
}

// Cache is an LRU of decode results (stats, indices, metadata, identity; never frames), bounded by
// entry count and by approximate bytes. Safe for concurrent use.
type Cache struct {
	maxEntries int
	maxBytes   int64

	mu    sync.Mutex // guards everything below
	ll    *list.List // front = most recently used; values are *cacheEntry
	items map[CacheKey]*list.Element
	bytes int64
	hits  uint64
	miss  uint64
}

type cacheEntry struct {
	key  CacheKey
	res  Result
	size int64
}

// NewCache returns an LRU holding at most maxEntries results and maxBytes approximate bytes.
func NewCache(maxEntries int, maxBytes int64) *Cache {
	return &Cache{maxEntries: maxEntries, maxBytes: maxBytes, ll: list.New(), items: map[CacheKey]*list.Element{}}
}

func entrySize(k CacheKey, r *Result) int64 {
	return int64(160 + len(k.Sampler) + len(r.Metadata) + 8*len(r.Indices) + len(r.Stats.Codec) + len(r.Stats.PixelFormat))
}

// Get returns a copy of the cached result for k (Cached set, no Frames).
func (c *Cache) Get(k CacheKey) (*Result, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		c.miss++
		return nil, false
	}
	c.hits++
	c.ll.MoveToFront(el)
	r := el.Value.(*cacheEntry).res
	r.Indices = append([]int(nil), r.Indices...)
	r.Metadata = append([]byte(nil), r.Metadata...)
	r.Cached = true
	return &r, true
}

// Put stores r under k (without its frames), evicting least recently used entries over the bounds.
// A result larger than the byte bound is not stored.
func (c *Cache) Put(k CacheKey, r *Result) {
	e := &cacheEntry{key: k, res: *r}
	e.res.Frames = nil
	e.res.Cached = false
	e.res.Indices = append([]int(nil), r.Indices...)
	e.res.Metadata = append([]byte(nil), r.Metadata...)
	e.size = entrySize(k, &e.res)
	if e.size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.bytes -= el.Value.(*cacheEntry).size
		el.Value = e
		c.bytes += e.size
		c.ll.MoveToFront(el)
	} else {
		c.items[k] = c.ll.PushFront(e)
		c.bytes += e.size
	}
	for c.ll.Len() > c.maxEntries || c.bytes > c.maxBytes {
		el := c.ll.Back()
		old := el.Value.(*cacheEntry)
		c.ll.Remove(el)
		delete(c.items, old.key)
		c.bytes -= old.size
	}
}

// CacheStats are the cache's counters.
type CacheStats struct {
	Entries      int
	Bytes        int64
	Hits, Misses uint64
}

// Stats returns the current counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Entries: c.ll.Len(), Bytes: c.bytes, Hits: c.hits, Misses: c.miss}
}

// flight is one decode that later callers of the same key wait for.
type flight struct {
	done    chan struct{}
	res     *Result
	err     error
	waiters int // callers that joined (under Decoder.mu)
}

// Identify returns the identity of data under sampler, from the cache when the same bytes were
// decoded with the same samplerKey before (the key must name the sampler and all its parameters).
// Errors carry reason codes (reason.CodeOf).
// Concurrent calls with the same key share one decode (Share), with the cache on or off; errors
// are not cached.
func (d *Decoder) Identify(ctx context.Context, data []byte, sampler Sampler, samplerKey string) (*Result, error) {
	return d.Share(ctx, NewCacheKey(data, samplerKey), func() (*Result, error) {
		return d.Decode(ctx, data, sampler, DecodeOptions{})
	})
}

// Share is the single-flight in front of a decode: it returns the cached result of key (Cached
// set), else joins the call of decode running now for key (Cached set: this caller decoded
// nothing), else runs decode itself, caches its result and hands it to the callers that joined.
// key is a CacheKey (XXH3-128 of the bytes and the rule that made the result), so equal bytes
// under one rule decode once however many requests carry them at once. A joining caller waits
// within its own ctx; when the leader's ctx was canceled (its client went away) the callers
// waiting for it run again and one of them leads. Errors are shared with the callers that
// joined, never cached. The result is a copy each caller may keep (no Frames for a joiner).
// Lock order: docs/LOCKS.md (Decoder.mu is a leaf; decode runs outside it).
func (d *Decoder) Share(ctx context.Context, key CacheKey, decode func() (*Result, error)) (*Result, error) {
	for {
		if d.cache != nil {
			if r, ok := d.cache.Get(key); ok {
				return r, nil
			}
		}
		d.mu.Lock()
		f, ok := d.inflight[key]
		if !ok {
			break // d.mu held: lead the decode below
		}
		f.waiters++
		d.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctxError(ctx.Err())
		}
		if errors.Is(f.err, context.Canceled) {
			continue // the leader's client went away; this caller decodes itself
		}
		if f.err != nil {
			return nil, f.err
		}
		r := copyResult(f.res)
		r.Frames = nil
		r.Cached = true
		return r, nil
	}
	f := &flight{done: make(chan struct{})}
	d.inflight[key] = f
	d.mu.Unlock()

	finished := false
	defer func() {
		if !finished { // decode panicked: the joined callers run again
			f.err = context.Canceled
		}
		d.mu.Lock()
		delete(d.inflight, key)
		d.mu.Unlock()
		close(f.done)
	}()
	f.res, f.err = decode()
	finished = true
	if f.err != nil {
		return nil, f.err
	}
	if d.cache != nil {
		d.cache.Put(key, f.res)
	}
	return copyResult(f.res), nil
}

func copyResult(res *Result) *Result {
	r := *res
	r.Indices = append([]int(nil), r.Indices...)
	r.Metadata = append([]byte(nil), r.Metadata...)
	return &r
}

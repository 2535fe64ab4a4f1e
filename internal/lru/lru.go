// Package lru is the byte-budgeted least-recently-used map behind kvroute's request-path caches
// (the tokenize cache's segments, the template cache's messages): keys are content hashes, each
// entry is charged a number of bytes by its owner, and the least recently used entries are
// evicted while the charges pass the budget. Written here rather than taken from a library
// because the caches need what general LRUs do not give together: a length checked on lookup
// beside the hash key, a charge that can grow after insertion (a template value converted
// later), and entries whose identity other structures keep (a decoded message points to its
// entry).
package lru

import (
	"sync"
	"sync/atomic"
)

// Cache is a budgeted LRU map from K to *Entry. Safe for concurrent use; build it with New.
type Cache[K comparable, V any] struct {
	max int64

	mu    sync.Mutex
	bytes int64
	m     map[K]*Entry[K, V]
	head  Entry[K, V] // sentinel of the recency list: head.next is the most recent

	hits, misses atomic.Uint64
}

// Entry is one cached value. Key, N and Val are set before Put and not changed after.
type Entry[K comparable, V any] struct {
	Key K
	// N is the length of what Key hashes (bytes of text), compared on lookup as a second check.
	N   int
	Val V

	charge     int64 // bytes counted against the budget (guarded by the cache's mu)
	prev, next *Entry[K, V]
}

// New returns a cache holding at most maxBytes bytes of charges (maxBytes > 0).
func New[K comparable, V any](maxBytes int64) *Cache[K, V] {
	c := &Cache[K, V]{max: maxBytes, m: make(map[K]*Entry[K, V])}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

// Stats is a snapshot of a cache's counters.
type Stats struct {
	Hits, Misses uint64 // lookups
	Bytes        int64  // charges of the entries held
	Entries      int
	MaxBytes     int64
}

// Stats returns the counters.
func (c *Cache[K, V]) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Bytes: c.bytes, Entries: len(c.m), MaxBytes: c.max}
}

// MaxBytes is the budget.
func (c *Cache[K, V]) MaxBytes() int64 { return c.max }

// Get returns the entry of key whose N is n and makes it the most recent; it counts a hit or a
// miss.
func (c *Cache[K, V]) Get(key K, n int) (*Entry[K, V], bool) {
	c.mu.Lock()
	e, ok := c.m[key]
	if ok && e.N == n {
		c.unlink(e)
		c.pushFront(e)
		c.mu.Unlock()
		c.hits.Add(1)
		return e, true
	}
	c.mu.Unlock()
	c.misses.Add(1)
	return nil, false
}

// Put stores e charged charge bytes and returns the entry the cache now holds for e.Key. An
// entry of the same key and N already held is kept (and returned) when keep is set, else
// replaced. An entry over a quarter of the budget is not stored (e is returned).
func (c *Cache[K, V]) Put(e *Entry[K, V], charge int64, keep bool) *Entry[K, V] {
	if charge > c.max/4 {
		return e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[e.Key]; ok {
		if keep && old.N == e.N {
			return old
		}
		c.remove(old)
	}
	e.charge = charge
	c.m[e.Key] = e
	c.pushFront(e)
	c.bytes += charge
	c.evict()
	return e
}

// Charge adds bytes to e's charge while the cache holds e (a value it got after Put); an entry
// that then passes a quarter of the budget is dropped.
func (c *Cache[K, V]) Charge(e *Entry[K, V], bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[e.Key] != e {
		return // evicted or replaced: its memory goes with whoever still holds it
	}
	e.charge += bytes
	c.bytes += bytes
	if e.charge > c.max/4 {
		c.remove(e)
	}
	c.evict()
}

func (c *Cache[K, V]) unlink(e *Entry[K, V]) { e.prev.next, e.next.prev = e.next, e.prev }

func (c *Cache[K, V]) pushFront(e *Entry[K, V]) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}

// remove unlinks e and subtracts its charge (mu held).
func (c *Cache[K, V]) remove(e *Entry[K, V]) {
	c.unlink(e)
	delete(c.m, e.Key)
	c.bytes -= e.charge
}

// evict drops least recently used entries until the charges fit the budget (mu held).
func (c *Cache[K, V]) evict() {
	for c.bytes > c.max && c.head.prev != &c.head {
		c.remove(c.head.prev)
	}
}

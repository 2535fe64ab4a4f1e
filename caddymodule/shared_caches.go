package caddymodule

import (
	"fmt"
	"sync"

	"github.com/caddyserver/caddy/v2"

	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// cachePool holds the caches that survive config reloads (*sharedCache): the chat template's
// message cache and the tokenizer's segment cache, each keyed by what makes it shareable between
// two configs (messageCacheKey, tokenizeCacheKey). Each config holds one reference to each of its
// caches from Provision to Cleanup. During a reload Caddy provisions the new config before it
// cleans the old one up, so a reload that changes nothing a cache depends on shares it warm; a
// cache goes when the last config using it is cleaned up. The same idiom as natsPool and Caddy's
// own pools (modules/caddytls/connpolicy.go secretsLogPool, Caddy v2.11.9).
var cachePool = caddy.NewUsagePool()

// sharedCache is one pooled cache: a message cache or a segment cache (the other is nil), and the
// counts of its kind, which keep its counters once it is gone.
type sharedCache struct {
	message  *chat.MessageCache
	tokenize *tokenizer.SegmentCache
	counts   *cacheCounts
}

// stats returns the cache's lookup counters and held bytes.
func (c *sharedCache) stats() (hits, misses uint64, bytes int64) {
	if c.message != nil {
		st := c.message.Stats()
		return st.Hits, st.Misses, st.Bytes
	}
	st := c.tokenize.Stats()
	return st.Hits, st.Misses, st.Bytes
}

// Destruct retires the cache's counts (the last config using it was cleaned up).
func (c *sharedCache) Destruct() error {
	c.counts.retire(c)
	return nil
}

// sharedCaches are one config's references into cachePool (Provision to Cleanup).
type sharedCaches struct {
	keys     []string // the pool keys this config holds, released by Cleanup
	message  *chat.MessageCache
	tokenize *tokenizer.SegmentCache
}

// acquireCaches takes this config's references to its message and segment caches (none without
// model_dir, or for a size of 0): the running config's own when the key is the same, else new
// ones.
func (a *App) acquireCaches() error {
	if a.ModelDir == "" {
		return nil
	}
	m := a.metrics
	if m == nil {
		m = kvMetrics
	}
	if size := a.templateCacheSize(); size > 0 {
		c, err := a.acquireCache(messageCacheKey(size), func() *sharedCache {
			return &sharedCache{message: chat.NewMessageCache(size), counts: m.messageCaches}
		})
		if err != nil {
			return err
		}
		a.caches.message = c.message
	}
	if size := a.tokenizeCacheSize(); size > 0 {
		c, err := a.acquireCache(a.tokenizeCacheKey(size), func() *sharedCache {
			return &sharedCache{tokenize: tokenizer.NewSegmentCache(size), counts: m.tokenizeCaches}
		})
		if err != nil {
			return err
		}
		a.caches.tokenize = c.tokenize
	}
	return nil
}

func (a *App) acquireCache(key string, create func() *sharedCache) (*sharedCache, error) {
	v, _, err := cachePool.LoadOrNew(key, func() (caddy.Destructor, error) {
		c := create()
		c.counts.add(c)
		return c, nil
	})
	if err != nil {
		return nil, fmt.Errorf("sharing cache %s: %w", key, err)
	}
	a.caches.keys = append(a.caches.keys, key)
	return v.(*sharedCache), nil
}

// releaseCaches drops this config's references (Cleanup); the last reference destructs a cache.
func (a *App) releaseCaches() error {
	var first error
	for _, k := range a.caches.keys {
		if _, err := cachePool.Delete(k); err != nil && first == nil {
			first = err
		}
	}
	a.caches = sharedCaches{}
	return first
}

// setCaches gives the freshly loaded model its tokenizer's segment cache and its chat template's
// message cache, before the router shares the model.
func (a *App) setCaches(m *model.Model) {
	a.setTokenizeCache(m)
	a.setMessageCache(m)
}

// cacheCounts sums the counters of one kind of cache over the live ones and those already
// destructed, so the hit and miss counters never reset across reloads; the bytes are the live
// caches'. Lock order: docs/LOCKS.md.
type cacheCounts struct {
	mu                         sync.Mutex
	live                       map[*sharedCache]struct{}
	retiredHits, retiredMisses uint64
}

func newCacheCounts() *cacheCounts { return &cacheCounts{live: map[*sharedCache]struct{}{}} }

func (c *cacheCounts) add(s *sharedCache) {
	c.mu.Lock()
	c.live[s] = struct{}{}
	c.mu.Unlock()
}

// retire moves a destructed cache's counts to the retired sums, at once for a scrape: a counter
// never drops.
func (c *cacheCounts) retire(s *sharedCache) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.live[s]; !ok {
		return
	}
	h, m, _ := s.stats()
	c.retiredHits += h
	c.retiredMisses += m
	delete(c.live, s)
}

// sum returns the counters of every cache of the kind, live and retired, and the live bytes.
func (c *cacheCounts) sum() (hits, misses uint64, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hits, misses = c.retiredHits, c.retiredMisses
	for s := range c.live {
		h, m, b := s.stats()
		hits += h
		misses += m
		bytes += b
	}
	return hits, misses, bytes
}

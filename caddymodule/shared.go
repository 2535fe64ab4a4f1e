package caddymodule

import (
	"fmt"
	"sync"

	"github.com/caddyserver/caddy/v2"

	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// sharedPool holds what survives config reloads apart from the NATS connection (natsPool): the
// chat template's message cache and the tokenizer's segment cache (*sharedCache), each keyed by
// what makes it shareable between two configs (messageCacheKey, tokenizeCacheKey), the
// stored-response map (sharedResponses, responses.go) and the media budget (sharedBudget). Each
// config holds one reference to each of its entries from Provision to Cleanup. During a reload
// Caddy provisions the new config before it cleans the old one up, so a reload that changes
// nothing an entry depends on shares it warm; an entry goes when the last config using it is
// cleaned up. The same idiom as natsPool and Caddy's own pools (modules/caddytls/connpolicy.go
// secretsLogPool, Caddy v2.11.9).
var sharedPool = caddy.NewUsagePool()

// sharedRefs are one config's references into sharedPool, taken by Provision (acquireShared),
// released by Cleanup (releaseShared).
type sharedRefs struct {
	keys        []string // the pool keys this config holds
	message     *chat.MessageCache
	tokenize    *tokenizer.SegmentCache
	mediaBudget *fetch.Budget
	lastKnown   *lastKnown // the last registry records read (lastknown.go)
}

// acquireShared takes this config's reference to the sharedPool entry key, made by create when no
// running config holds it.
func (a *App) acquireShared(key string, create caddy.Constructor) (any, error) {
	v, _, err := sharedPool.LoadOrNew(key, create)
	if err != nil {
		return nil, fmt.Errorf("sharing %s: %w", key, err)
	}
	a.shared.keys = append(a.shared.keys, key)
	return v, nil
}

// releaseShared drops this config's references (Cleanup); the last reference destructs an entry.
func (a *App) releaseShared() error {
	var first error
	for _, k := range a.shared.keys {
		if _, err := sharedPool.Delete(k); err != nil && first == nil {
			first = err
		}
	}
	a.shared = sharedRefs{}
	return first
}

// sharedBudget is the media budget in sharedPool: the process's media bytes in flight for one
// (size, slot_wait), which requests of a replaced config may still hold.
type sharedBudget struct{ b *fetch.Budget }

func (sharedBudget) Destruct() error { return nil }

// acquireBudget takes this config's reference to its media budget.
func (a *App) acquireBudget() error {
	size, wait := a.RoutingConfig.Media.budgetKey()
	v, err := a.acquireShared(fmt.Sprintf("media_budget size=%d slot_wait=%s", size, wait), func() (caddy.Destructor, error) {
		return sharedBudget{fetch.NewBudget(size, wait)}, nil
	})
	if err != nil {
		return err
	}
	a.shared.mediaBudget = v.(sharedBudget).b
	return nil
}

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
		a.shared.message = c.message
	}
	if size := a.tokenizeCacheSize(); size > 0 {
		c, err := a.acquireCache(a.tokenizeCacheKey(size), func() *sharedCache {
			return &sharedCache{tokenize: tokenizer.NewSegmentCache(size), counts: m.tokenizeCaches}
		})
		if err != nil {
			return err
		}
		a.shared.tokenize = c.tokenize
	}
	return nil
}

func (a *App) acquireCache(key string, create func() *sharedCache) (*sharedCache, error) {
	v, err := a.acquireShared(key, func() (caddy.Destructor, error) {
		c := create()
		c.counts.add(c)
		return c, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*sharedCache), nil
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

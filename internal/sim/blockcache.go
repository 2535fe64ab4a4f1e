package sim

import (
	"container/list"
	"errors"
	"fmt"
	"sync"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/extrakeys"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kvevents/codec"
)

// mediumGPU is the cache tier of every block the simulator stores.
const mediumGPU = "GPU"

// Prompt is one request as the simulated engine sees it: the worker-visible tokens (placeholders
// expanded) and its media spans.
type Prompt struct {
	// Tokens are the worker-visible prompt token ids.
	Tokens []uint32
	// Spans are the media placeholder ranges in Tokens, sorted by Start, one per media item.
	Spans []blocks.Span
	// Identifiers are the items' multimodal identifiers as they appear in extra_keys, one per span:
	// the client's uuid verbatim, or the forwarded form of the simulator's own identity.
	Identifiers []string
	// CacheSalt is the request's cache_salt ("" when absent).
	CacheSalt string
	// LoRAName is the adapter the request is served under ("" for the base model) and LoRAID its
	// lora_int_id (lora.go): the name is the first extra key of every block, both go in the events.
	LoRAName string
	LoRAID   int64
}

// Chain is a prompt's complete blocks with their extra keys and engine hashes, computed once
// before the cache is consulted.
type Chain struct {
	// NumTokens is the prompt length in tokens.
	NumTokens int
	// Tokens are the tokens of the complete blocks (len(Hashes) × block size).
	Tokens []uint32
	// Keys are the per-block extra_keys (nil for a block without any).
	Keys [][]codec.ExtraKey
	// Hashes are the engine block hashes, chained from the first block.
	Hashes []kv.EngineHash
	// LoRAName and LoRAID are the prompt's adapter, published with its blocks.
	LoRAName string
	LoRAID   int64
}

// BlockCacheConfig configures a BlockCache.
type BlockCacheConfig struct {
	// BlockSize is the KV block size in tokens. Default: 16.
	BlockSize int
	// Capacity is the number of blocks the cache holds; the least recently used are evicted
	// beyond it. Default: 8192.
	Capacity int
	// KeyStyle is how media items appear in extra_keys: codec.PairKeys (current vLLM) or
	// codec.BareKeys (older vLLM). Default: codec.PairKeys.
	KeyStyle codec.ExtraKeysStyle
}

// DefaultBlockCacheConfig returns the defaults.
func DefaultBlockCacheConfig() *BlockCacheConfig {
	return &BlockCacheConfig{BlockSize: 16, Capacity: 8192, KeyStyle: codec.PairKeys}
}

// BlockCache is a vLLM-like prefix cache of KV blocks (vllm/v1/core/block_pool.py and
// kv_cache_manager.py): blocks are keyed by their chained engine hash, a request hits the longest
// prefix of its chain that is cached, and the least recently used blocks are evicted when a new
// request needs room. Every change is reported as vLLM KV events. It is safe for concurrent use.
type BlockCache struct {
	cfg BlockCacheConfig

	// mu protects entries and lru, and orders the events handed to Commit's emit callback. Lock
	// order: docs/LOCKS.md.
	mu      sync.Mutex
	entries map[kv.EngineHash]*list.Element // engine hash → element of lru (Value: the hash)
	lru     *list.List                      // front: most recently used
}

// NewBlockCache returns an empty cache; cfg may be nil.
func NewBlockCache(cfg *BlockCacheConfig) (*BlockCache, error) {
	c := *DefaultBlockCacheConfig()
	if cfg != nil {
		if cfg.BlockSize != 0 {
			c.BlockSize = cfg.BlockSize
		}
		if cfg.Capacity != 0 {
			c.Capacity = cfg.Capacity
		}
		if cfg.KeyStyle != 0 {
			c.KeyStyle = cfg.KeyStyle
		}
	}
	if c.BlockSize <= 0 || c.BlockSize > blocks.MaxBlockSize {
		return nil, fmt.Errorf("creating block cache: block size %d out of range", c.BlockSize)
	}
	if c.Capacity <= 0 {
		return nil, fmt.Errorf("creating block cache: capacity %d must be positive", c.Capacity)
	}
	if c.KeyStyle != codec.PairKeys && c.KeyStyle != codec.BareKeys {
		return nil, fmt.Errorf("creating block cache: unknown extra keys style %d", c.KeyStyle)
	}
	return &BlockCache{cfg: c, entries: map[kv.EngineHash]*list.Element{}, lru: list.New()}, nil
}

// Config returns the effective configuration.
func (c *BlockCache) Config() BlockCacheConfig { return c.cfg }

// Len returns the number of cached blocks.
func (c *BlockCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// errSpans is returned by Chain for spans that are unsorted, overlapping or out of range, or that
// do not match their identifiers.
var errSpans = errors.New("invalid media spans")

// Chain computes p's complete blocks, their extra keys (vLLM's generate_block_hash_extra_keys:
// one [identifier, offset] pair, or the bare identifier, per overlapping media span; the cache salt
// on block 0) and their engine hashes. It does not touch the cache.
func (c *BlockCache) Chain(p *Prompt) (*Chain, error) {
	if len(p.Identifiers) != len(p.Spans) {
		return nil, fmt.Errorf("chaining prompt: %d identifiers for %d spans: %w", len(p.Identifiers), len(p.Spans), errSpans)
	}
	prev := 0
	for _, s := range p.Spans {
		if s.Start < prev || s.End <= s.Start || s.End > len(p.Tokens) {
			return nil, fmt.Errorf("chaining prompt: span [%d,%d) of %d tokens: %w", s.Start, s.End, len(p.Tokens), errSpans)
		}
		prev = s.End
	}
	bs := c.cfg.BlockSize
	nb := len(p.Tokens) / bs
	keys := extrakeys.For(bs, len(p.Tokens), p.Spans, p.LoRAName, p.CacheSalt, c.cfg.KeyStyle)
	// extrakeys.For names each item by the forwarded form of its identity; an item whose identifier
	// is another string (a client uuid of another form) is named by that string instead.
	rename := map[string]string{}
	for i, s := range p.Spans {
		if id := s.Identity.UUID(); id != p.Identifiers[i] {
			rename[id] = p.Identifiers[i]
		}
	}
	if len(rename) > 0 {
		for b, ks := range keys {
			n := len(ks)
			if b == 0 && p.CacheSalt != "" {
				n-- // the salt is the last key of block 0
			}
			from := 0
			if p.LoRAName != "" {
				from = 1 // the adapter name is the first key
			}
			for i := from; i < n; i++ {
				if to, ok := rename[ks[i].Str]; ok {
					ks[i].Str = to
				}
			}
		}
	}
	ch := &Chain{NumTokens: len(p.Tokens), Tokens: p.Tokens[: nb*bs : nb*bs], Keys: keys, Hashes: make([]kv.EngineHash, nb),
		LoRAName: p.LoRAName, LoRAID: p.LoRAID}
	for b := 0; b < nb; b++ {
		var parent kv.EngineHash
		if b > 0 {
			parent = ch.Hashes[b-1]
		}
		ch.Hashes[b] = EngineBlockHash(parent, b > 0, p.Tokens[b*bs:(b+1)*bs:(b+1)*bs], keys[b])
	}
	return ch, nil
}

// HitBlocks returns vLLM's prefix cache hit for ch at admission, in blocks: the longest cached
// prefix of its chain, capped so that at least one prompt token is computed (vLLM's
// get_computed_blocks looks up at most num_tokens − 1 tokens, so a prompt whose every block is
// cached hits one block less). The hit blocks become the most recently used.
func (c *BlockCache) HitBlocks(ch *Chain) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	hit := c.prefixLocked(ch)
	c.touchLocked(ch.Hashes[:hit])
	if ch.NumTokens == 0 {
		return 0
	}
	return min(hit, (ch.NumTokens-1)/c.cfg.BlockSize)
}

// PeekBlocks is HitBlocks without making the blocks recently used: what the cache would answer,
// for an observer that must not change the eviction order (bench/quality's oracle probes every
// worker before choosing one).
func (c *BlockCache) PeekBlocks(ch *Chain) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch.NumTokens == 0 {
		return 0
	}
	return min(c.prefixLocked(ch), (ch.NumTokens-1)/c.cfg.BlockSize)
}

// Commit stores ch's blocks after prefill, as vLLM's cache_full_blocks does: the blocks from the
// first one not cached on are stored (one BlockStored event, its parent the last cached block),
// after evicting least recently used blocks of other chains to make room (one BlockRemoved event).
// When the cache cannot hold the whole chain, only the prefix that fits is stored. emit, when not
// nil, receives the events (nil when nothing changed) while the cache is still locked, so events
// are emitted in the order the cache changed. It returns the number of blocks stored.
func (c *BlockCache) Commit(ch *Chain, emit func([]codec.Event)) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := c.prefixLocked(ch)
	pinned := make(map[kv.EngineHash]struct{}, len(ch.Hashes))
	missing := 0
	for i, h := range ch.Hashes {
		pinned[h] = struct{}{}
		if _, ok := c.entries[h]; !ok && i >= first {
			missing++
		}
	}
	var removed []kv.EngineHash
	for e := c.lru.Back(); e != nil && c.lru.Len()+missing > c.cfg.Capacity; {
		prev := e.Prev()
		h := e.Value.(kv.EngineHash)
		if _, ok := pinned[h]; !ok {
			c.lru.Remove(e)
			delete(c.entries, h)
			removed = append(removed, h)
		}
		e = prev
	}
	last := first
	for ; last < len(ch.Hashes); last++ {
		h := ch.Hashes[last]
		if _, ok := c.entries[h]; ok {
			continue // still cached from an earlier chain whose prefix was evicted: stored again
		}
		if c.lru.Len() >= c.cfg.Capacity {
			break
		}
		c.entries[h] = c.lru.PushFront(h)
	}
	c.touchLocked(ch.Hashes[:last])
	var events []codec.Event
	if len(removed) > 0 {
		events = append(events, codec.Event{Type: codec.BlockRemoved, BlockHashes: removed, Medium: mediumGPU, HasMedium: true})
	}
	if last > first {
		bs := c.cfg.BlockSize
		ev := codec.Event{Type: codec.BlockStored, BlockHashes: append([]kv.EngineHash(nil), ch.Hashes[first:last]...),
			TokenIDs: ch.Tokens[first*bs : last*bs : last*bs], BlockSize: bs, Medium: mediumGPU, HasMedium: true,
			ExtraKeys: ch.Keys[first:last:last], HasExtraKeys: true,
			LoRAName: ch.LoRAName, HasLoRAName: ch.LoRAName != "", LoRAID: ch.LoRAID, HasLoRAID: ch.LoRAName != ""}
		if first > 0 {
			ev.Parent, ev.HasParent = ch.Hashes[first-1], true
		}
		events = append(events, ev)
	}
	if emit != nil && len(events) > 0 {
		emit(events)
	}
	return last - first
}

// Clear empties the cache (vLLM's reset_prefix_cache) and emits one AllBlocksCleared event.
func (c *BlockCache) Clear(emit func([]codec.Event)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
	c.lru.Init()
	if emit != nil {
		emit([]codec.Event{{Type: codec.AllBlocksCleared}})
	}
}

// prefixLocked returns how many leading blocks of ch are cached.
func (c *BlockCache) prefixLocked(ch *Chain) int {
	n := 0
	for n < len(ch.Hashes) {
		if _, ok := c.entries[ch.Hashes[n]]; !ok {
			break
		}
		n++
	}
	return n
}

// touchLocked makes the blocks of hs (a chain prefix) the most recently used, the first block last
// so that it is evicted after the blocks that depend on it (vLLM frees a request's blocks tail
// first for the same reason).
func (c *BlockCache) touchLocked(hs []kv.EngineHash) {
	for i := len(hs) - 1; i >= 0; i-- {
		if e, ok := c.entries[hs[i]]; ok {
			c.lru.MoveToFront(e)
		}
	}
}

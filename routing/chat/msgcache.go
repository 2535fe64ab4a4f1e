package chat

import (
	"sync"
	"sync/atomic"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/internal/jinja"
)

// DefaultMessageCacheBytes is the default budget of a MessageCache: 64 MiB.
const DefaultMessageCacheBytes = 64 << 20

// messageEntryOverhead approximates the bytes an entry costs besides its text (map slot, list
// links, the converted dict and its part list, the memo slot).
const messageEntryOverhead = 512

// valueCharge is what one decoded node or one converted template value is charged: a node is
// ~130 bytes, a converted dict ~130 (struct, map header, its slot in a list), a list ~60. A
// message whose tool call arguments decode to many small values (100 000 empty objects in
// 300 kB of text) is dominated by these, not by its text (the operator test saw 14× the budget
// when only the text was charged).
const valueCharge = 160

// memoSlack is what a message's rendered text may add to the message's JSON length and still
// be memoized (role headers, special tokens, a template's own words around the content).
const memoSlack = 1024

// MessageCache keeps chat messages across requests, so that a conversation's earlier turns are
// parsed and converted to template values once, and the template engine replays their rendered
// text instead of evaluating them again (internal/jinja memo.go says when that is exact). An
// entry is keyed by the 128-bit XXH3 (zeebo/xxh3) of the message's JSON text as the client sent
// it and checked against the text's length: equal text decodes and converts to equal values,
// so a hit gives what parsing and converting would. With Limits.Messages the decoder finds a
// message's end with a scan for its closing brace that does not decode it (msgparse.go), looks
// the text up, and reuses the decoded message; Render then reuses its converted value. Cached
// values are read-only (jinja.ShareKeyed).
//
// An entry is charged 3× its JSON length plus a fixed overhead: the decoded strings (at most
// the JSON length; the converted values share them) and up to two recorded renders of at most
// JSON length + 1 KiB each. Entries are evicted least recently used once the charges exceed
// the budget; one over a quarter of the budget is not stored. Safe for concurrent use; build it
// with NewMessageCache.
type MessageCache struct {
	max int64

	mu    sync.Mutex
	bytes int64
	m     map[xxh3.Uint128]*msgEntry
	head  msgEntry // sentinel of the recency list: head.next is the most recent

	hits, misses atomic.Uint64
}

type msgEntry struct {
	key        xxh3.Uint128
	n          int // JSON length in bytes, checked on lookup
	prev, next *msgEntry
	extra      int64 // charged besides messageCharge(n): decoded nodes, converted values (guarded by the cache's mu)

	// node is the message as the decoder built it (nil when the message has a content list,
	// whose media parts carry byte offsets into the body they came in, or when the entry was
	// made by Render for a body parsed without the cache); parts and values are what it
	// counted against the request limits. Set before the entry is published, then read-only.
	node          *node
	parts, values int
	// conv holds the message converted for a template taking part lists ([0]) or string
	// content ([1]), set by the first Render that needs it.
	conv [2]atomic.Pointer[converted]
}

// converted is a message converted to template values, with what converting it counted.
type converted struct {
	val   jinja.Value
	stats converter // strings, big integers
}

// NewMessageCache returns a cache holding at most maxBytes bytes of charges; maxBytes ≤ 0 gives
// nil, which Template.SetMessageCache reads as "no cache".
func NewMessageCache(maxBytes int64) *MessageCache {
	if maxBytes <= 0 {
		return nil
	}
	c := &MessageCache{max: maxBytes, m: make(map[xxh3.Uint128]*msgEntry)}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

// MessageCacheStats is a snapshot of a MessageCache's counters.
type MessageCacheStats struct {
	Hits, Misses uint64 // message lookups
	Bytes        int64  // charged bytes of the entries held
	Entries      int
	MaxBytes     int64
}

// Stats returns the cache's counters; a nil cache gives zeros.
func (c *MessageCache) Stats() MessageCacheStats {
	if c == nil {
		return MessageCacheStats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return MessageCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Bytes: c.bytes, Entries: len(c.m), MaxBytes: c.max}
}

func messageCharge(n int) int64 { return 3*int64(n) + 2*memoSlack + messageEntryOverhead }

func (c *MessageCache) get(key xxh3.Uint128, n int) (*msgEntry, bool) {
	c.mu.Lock()
	e, ok := c.m[key]
	if ok && e.n == n {
		e.prev.next, e.next.prev = e.next, e.prev
		c.pushFront(e)
		c.mu.Unlock()
		c.hits.Add(1)
		return e, true
	}
	c.mu.Unlock()
	c.misses.Add(1)
	return nil, false
}

func (c *MessageCache) pushFront(e *msgEntry) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}

// put stores e (charged messageCharge(e.n) + e.extra), evicting the least recently used entries
// over budget. A concurrent request that converted the same message first keeps its entry (both
// values are equal).
func (c *MessageCache) put(e *msgEntry) *msgEntry {
	if messageCharge(e.n)+e.extra > c.max/4 {
		return e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[e.key]; ok && old.n == e.n {
		return old
	} else if ok {
		c.remove(old)
	}
	c.m[e.key] = e
	c.pushFront(e)
	c.bytes += messageCharge(e.n) + e.extra
	c.evict()
	return e
}

// charge adds bytes to e's charge (a conversion stored after the entry), while e is held; an
// entry that then passes a quarter of the budget is dropped.
func (c *MessageCache) charge(e *msgEntry, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[e.key] != e {
		return // evicted or replaced: its memory goes with the requests that hold it
	}
	e.extra += bytes
	c.bytes += bytes
	if messageCharge(e.n)+e.extra > c.max/4 {
		c.remove(e)
	}
	c.evict()
}

// remove unlinks e and subtracts its charge (mu held).
func (c *MessageCache) remove(e *msgEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	delete(c.m, e.key)
	c.bytes -= messageCharge(e.n) + e.extra
}

// evict drops least recently used entries until the charges fit the budget (mu held).
func (c *MessageCache) evict() {
	for c.bytes > c.max && c.head.prev != &c.head {
		c.remove(c.head.prev)
	}
}

// SetMessageCache makes Render look up and store converted messages in c; nil turns the cache
// off. Call it before the template is shared (it is not synchronized with Render). One cache
// may serve several templates.
func (t *Template) SetMessageCache(c *MessageCache) { t.msgs = c }

// MessageCache returns the cache set with SetMessageCache, or nil.
func (t *Template) MessageCache() *MessageCache { return t.msgs }

// messageKey is the cache key of a message's JSON text; toolKey of a tool's (another key
// space: one JSON text converts differently as a message and as a tool).
func messageKey(raw []byte) xxh3.Uint128 { return xxh3.Hash128(raw) }
func toolKey(raw []byte) xxh3.Uint128    { return xxh3.Hash128Seed(raw, 1) }

// cachedTool is toolValue through the template's MessageCache: agents send the same tools with
// every request, and the template's loop over them (tool | tojson) is then replayed too.
func (t *Template) cachedTool(req *Request, tn *node, c *converter) jinja.Value {
	mc := t.msgs
	if mc == nil || tn.start < 0 || tn.end > len(req.Raw) || tn.start >= tn.end {
		return toolValue(tn, c)
	}
	raw := req.Raw[tn.start:tn.end]
	key := toolKey(raw)
	e, ok := mc.get(key, len(raw))
	if !ok {
		e = mc.put(&msgEntry{key: key, n: len(raw)})
	}
	cv := e.conv[0].Load()
	if cv == nil {
		cv = &converted{}
		cv.val = jinja.ShareKeyed(toolValue(tn, &cv.stats), e.n+memoSlack, true)
		if e.conv[0].CompareAndSwap(nil, cv) {
			mc.charge(e, valueCharge*int64(cv.stats.vals))
		} else {
			cv = e.conv[0].Load()
		}
	}
	c.add(&cv.stats)
	return cv.val
}

// cachedMessage is message through the template's MessageCache: the message's entry (found by
// the decoder, or by hashing m's JSON text in req.Raw) holds its value converted for this
// template's content format, made by the first request that needed it; its counts are added
// to c.
func (t *Template) cachedMessage(req *Request, m *node, c *converter) (jinja.Value, error) {
	e := m.entry
	if e == nil {
		mc := t.msgs
		if mc == nil || m.kind != kindObject || m.start < 0 || m.end > len(req.Raw) || m.start >= m.end {
			return t.message(m, c)
		}
		raw := req.Raw[m.start:m.end]
		key := messageKey(raw)
		var ok bool
		if e, ok = mc.get(key, len(raw)); !ok {
			e = mc.put(&msgEntry{key: key, n: len(raw)})
		}
	}
	slot := &e.conv[0]
	if t.stringContent {
		slot = &e.conv[1]
	}
	cv := slot.Load()
	if cv == nil {
		cv = &converted{}
		v, err := t.message(m, &cv.stats)
		if err != nil {
			return v, err
		}
		cv.val = jinja.ShareKeyed(v, e.n+memoSlack, true)
		if slot.CompareAndSwap(nil, cv) {
			if mc := t.msgs; mc != nil {
				mc.charge(e, valueCharge*int64(cv.stats.vals))
			}
		} else {
			cv = slot.Load() // a concurrent request converted it first: the same value
		}
	}
	c.add(&cv.stats)
	return cv.val, nil
}

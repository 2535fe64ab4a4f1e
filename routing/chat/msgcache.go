package chat

import (
	"sync/atomic"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/internal/jinja"
	"github.com/kvroute/kvroute/internal/lru"
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
// An entry is charged 3× its JSON length plus a fixed overhead (the decoded strings, at most the
// JSON length, which the converted values share, and up to two recorded renders of at most JSON
// length + 1 KiB each), plus valueCharge per decoded node and per converted value. Entries are
// evicted least recently used (internal/lru) once the charges exceed the budget; one over a
// quarter of the budget is not kept. Safe for concurrent use; build it with NewMessageCache.
type MessageCache struct {
	lru *lru.Cache[xxh3.Uint128, *msgData]
}

// msgEntry is one message (or tool) in the cache: Key and N are the hash and length of its JSON
// text. Decoded nodes keep a pointer to their entry (node.entry).
type msgEntry = lru.Entry[xxh3.Uint128, *msgData]

// msgData is what the cache keeps of a message.
type msgData struct {
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

// newMsgEntry is an entry for JSON text of n bytes hashed to key.
func newMsgEntry(key xxh3.Uint128, n int) *msgEntry {
	return &msgEntry{Key: key, N: n, Val: &msgData{}}
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
	return &MessageCache{lru: lru.New[xxh3.Uint128, *msgData](maxBytes)}
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
	st := c.lru.Stats()
	return MessageCacheStats{Hits: st.Hits, Misses: st.Misses, Bytes: st.Bytes, Entries: st.Entries, MaxBytes: st.MaxBytes}
}

// messageCharge is what an entry of n bytes of JSON is charged when stored: its decoded strings
// and two recorded renders (≤ 3n), a fixed overhead, and its decoded nodes.
func messageCharge(n, values int) int64 {
	return 3*int64(n) + 2*memoSlack + messageEntryOverhead + valueCharge*int64(values)
}

func (c *MessageCache) get(key xxh3.Uint128, n int) (*msgEntry, bool) { return c.lru.Get(key, n) }

// put stores e and returns the entry held for its key: a concurrent request that stored the same
// message first keeps its entry (both values are equal).
func (c *MessageCache) put(e *msgEntry) *msgEntry {
	nodes := 0
	if e.Val.node != nil {
		nodes = e.Val.values
	}
	return c.lru.Put(e, messageCharge(e.N, nodes), true)
}

// charge adds bytes to e's charge (a conversion stored after the entry) while the cache holds e.
func (c *MessageCache) charge(e *msgEntry, bytes int64) { c.lru.Charge(e, bytes) }

// charger is charge for e as a function (what the notes of e's recorded renders keep: the
// tokenizer's ids of the rendered turn, jinja.Note), or nil for a nil cache.
func (c *MessageCache) charger(e *msgEntry) func(int64) {
	if c == nil {
		return nil
	}
	return func(bytes int64) { c.charge(e, bytes) }
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
		e = mc.put(newMsgEntry(key, len(raw)))
	}
	cv := e.Val.conv[0].Load()
	if cv == nil {
		cv = &converted{}
		cv.val = jinja.ShareKeyedCharged(toolValue(tn, &cv.stats), e.N+memoSlack, true, mc.charger(e))
		if e.Val.conv[0].CompareAndSwap(nil, cv) {
			mc.charge(e, valueCharge*int64(cv.stats.vals))
		} else {
			cv = e.Val.conv[0].Load()
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
			e = mc.put(newMsgEntry(key, len(raw)))
		}
	}
	slot := &e.Val.conv[0]
	if t.stringContent {
		slot = &e.Val.conv[1]
	}
	cv := slot.Load()
	if cv == nil {
		cv = &converted{}
		v, err := t.message(m, &cv.stats)
		if err != nil {
			return v, err
		}
		cv.val = jinja.ShareKeyedCharged(v, e.N+memoSlack, true, t.msgs.charger(e))
		if slot.CompareAndSwap(nil, cv) {
			if mc := t.msgs; mc != nil {
				mc.charge(e, valueCharge*int64(cv.stats.vals))
			}
		} else {
			cv = slot.Load() // a concurrent request converted it first: the same value
		}
	}
	c.add(&cv.stats)
	c.recorded += jinja.MemoBytes(cv.val)
	return cv.val, nil
}

package apis

import (
	"bytes"
	"encoding/binary"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/internal/lru"
)

// Converter turns Responses and Messages bodies into the chat body Body gives for them, with a
// cache so that a conversation's earlier turns cost a hash each instead of a decode, a
// conversion and an encode: an agent sends the whole conversation on every turn, hundreds of
// kilobytes of which only the last items are new.
//
// Two kinds of entries share one byte budget (internal/lru), both keyed by XXH3-128 (zeebo/xxh3)
// and checked against a length, as the chat template cache is (routing/chat msgcache.go):
//
//   - an input item or Anthropic message's JSON text → what the full path makes of it (the
//     decoded, checked Responses item; the Anthropic message's chat messages, encoded);
//   - a run of Responses items that became one chat message (vLLM merges a function_call or a
//     reasoning item into the assistant message before it) → that message's JSON text; the key
//     hashes the run's item keys and lengths.
//
// Equal text decodes, checks and converts to equal values, so a hit gives the bytes the full path
// gives; the cached messages are then the same bytes on every turn and hit the chat template
// cache as a chat request's messages do. What the fast path does not handle (an item it cannot
// check alone, a body that is not one object with the list as an array, any request vLLM would
// refuse, Anthropic system messages inside `messages`, a tool_use without an id) takes the full
// path: FromResponses / FromAnthropic and Body, with their errors. Safe for concurrent use.
type Converter struct {
	lru *lru.Cache[xxh3.Uint128, *convData]
}

// convData is one cache entry; set before Put, read-only after.
type convData struct {
	item *item  // a Responses item as normalizeItems left it
	out  []byte // chat messages encoded, comma-separated (an Anthropic message; a Responses run)
}

type convEntry = lru.Entry[xxh3.Uint128, *convData]

// convEntryOverhead approximates an entry's cost besides what it holds (map slot, list links).
const convEntryOverhead = 256

// NewConverter returns a converter whose cache holds at most maxBytes bytes of charges; maxBytes
// ≤ 0 gives a converter without a cache (every request takes the full path).
func NewConverter(maxBytes int64) *Converter {
	if maxBytes <= 0 {
		return &Converter{}
	}
	return &Converter{lru: lru.New[xxh3.Uint128, *convData](maxBytes)}
}

// MaxBytes is the cache's budget (0 without a cache).
func (c *Converter) MaxBytes() int64 {
	if c == nil || c.lru == nil {
		return 0
	}
	return c.lru.MaxBytes()
}

// Stats are the cache's counters.
func (c *Converter) Stats() lru.Stats {
	if c == nil || c.lru == nil {
		return lru.Stats{}
	}
	return c.lru.Stats()
}

func (c *Converter) get(key xxh3.Uint128, n int) *convData {
	if e, ok := c.lru.Get(key, n); ok {
		return e.Val
	}
	return nil
}

func (c *Converter) put(key xxh3.Uint128, n int, d *convData, charge int) {
	c.lru.Put(&convEntry{Key: key, N: n, Val: d}, int64(charge+convEntryOverhead), true)
}

// runKey hashes the keys and lengths of the items of a run (the tag byte keeps run keys apart
// from the keys of JSON text, which starts with '{').
type runKey struct {
	buf []byte
	n   int
}

func (r *runKey) reset() { r.buf, r.n = append(r.buf[:0], 1), 0 }

func (r *runKey) add(k xxh3.Uint128, n int) {
	r.buf = binary.LittleEndian.AppendUint64(r.buf, k.Hi)
	r.buf = binary.LittleEndian.AppendUint64(r.buf, k.Lo)
	r.buf = binary.LittleEndian.AppendUint64(r.buf, uint64(n))
	r.n += n
}

func (r *runKey) sum() xxh3.Uint128 { return xxh3.Hash128(r.buf) }

// writeList writes the JSON list of the chat messages given as encoded runs.
func writeList(buf *bytes.Buffer, encoded [][]byte) {
	buf.WriteByte('[')
	for i, e := range encoded {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(e)
	}
	buf.WriteByte(']')
}

// encode is v's JSON text (Value.write).
func encode(v *Value) []byte {
	var b bytes.Buffer
	v.write(&b)
	return b.Bytes()
}

package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Decoder decodes batches with reusable state. A Decoder must not be used by two goroutines at once;
// make one per subscriber goroutine. It keeps scratch buffers between calls (reused, never aliased by a
// returned Batch) and a bounded set of recently decoded short strings (media identifiers, tiers, LoRA
// names), which returned Batches share: strings are immutable, so this is invisible to callers.
type Decoder struct {
	buf []byte
	off int // engine batches: read offset in buf
	r   bytes.Reader
	d   *msgpack.Decoder

	// Per-batch scratch: events' hashes and tokens point here while a batch is decoded, then are copied
	// into exactly sized per-batch slabs (finish), so the returned Batch owns its memory.
	hs   []uint64
	toks []uint32

	one *[1]Event // the current batch's room for a single event (see batchBox)

	strs map[string]string // interned strings, at most maxInterned
	last string            // the last interned string (extra_keys repeat one identifier per block)
}

// batchBox allocates a Batch together with room for one event, the usual batch size.
type batchBox struct {
	b  Batch
	ev [1]Event
}

// Interning bounds: strings up to maxInternLen bytes, at most maxInterned of them (then forgotten at once).
const (
	maxInternLen = 128
	maxInterned  = 1024
)

// NewDecoder returns a Decoder.
func NewDecoder() *Decoder {
	dc := &Decoder{}
	dc.d = msgpack.NewDecoder(&dc.r)
	return dc
}

// Decode decodes one batch as published on kvroute.events.<id> in the given encoding. The error wraps
// ErrMalformed when b is not one well-formed batch (trailing bytes included); events of unknown types
// and events with wrongly shaped fields are skipped and counted in the Batch instead. The Batch does not
// alias b, nor the Decoder's scratch: it stays valid after later calls.
func (dc *Decoder) Decode(enc Encoding, b []byte) (*Batch, error) {
	switch enc {
	case VLLM, SGLang:
		bt, err := dc.decodeEngine(b)
		if err != nil {
			return nil, fmt.Errorf("decoding %s batch: %w", enc, err)
		}
		return bt, nil
	case DynamoJSON:
		return decodeDynamoJSON(b)
	case DynamoMsgpack:
		return dc.decodeDynamoMsgpack(b)
	}
	return nil, fmt.Errorf("decoding batch: unknown encoding %q", enc)
}

// Decode decodes one batch with a fresh Decoder (see Decoder.Decode).
func Decode(enc Encoding, b []byte) (*Batch, error) {
	return NewDecoder().Decode(enc, b)
}

// reset prepares the generic msgpack decoder (Dynamo msgpack batches).
func (dc *Decoder) reset(b []byte) {
	dc.buf = b
	dc.r.Reset(b)
	dc.d.Reset(&dc.r)
}

func (dc *Decoder) pos() int { return dc.off }

func (dc *Decoder) seek(off int) { dc.off = off }

// Nesting of the values skipped while decoding an engine batch: enclosing non-empty containers.
const (
	inBatch    = 1 // batch array or map
	inEvent    = 3 // batch, events, event
	inKeyEntry = 5 // batch, events, event, extra_keys, entry
)

// skip moves past the next value, nested in outer containers.
func (dc *Decoder) skip(outer int) error {
	end, err := skipNested(dc.buf, dc.off, outer)
	if err != nil {
		return err
	}
	dc.off = end
	return nil
}

func (dc *Decoder) peek() (byte, error) {
	if dc.off >= len(dc.buf) {
		return 0, fmt.Errorf("reading code: %w", errTruncated)
	}
	return dc.buf[dc.off], nil
}

func isInt(c byte) bool {
	return msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64)
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool { return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32 }

func malformed(what string, c byte) error {
	return fmt.Errorf("reading %s: unexpected msgpack code 0x%02x: %w", what, c, ErrMalformed)
}

// containerLen reads the header of the array or map at dc.off (the caller checked the code): its
// item count (pairs for a map) and moves past it. ok is false for a truncated header.
func (dc *Decoder) containerLen() (int, bool) {
	n, next, ok := containerLenAt(dc.buf, dc.off)
	if ok {
		dc.off = next
	}
	return n, ok
}

// containerLenAt reads the header of the array or map at b[off]: its item count (pairs for a map)
// and the offset after the header. ok is false for another code or a truncated header.
func containerLenAt(b []byte, off int) (n, next int, ok bool) {
	if off >= len(b) {
		return 0, 0, false
	}
	c := b[off]
	if c&0xf0 == 0x90 || c&0xf0 == 0x80 {
		return int(c & 0x0f), off + 1, true
	}
	switch c {
	case msgpcode.Array16, msgpcode.Map16:
		if len(b)-off < 3 {
			return 0, 0, false
		}
		return int(binary.BigEndian.Uint16(b[off+1:])), off + 3, true
	case msgpcode.Array32, msgpcode.Map32:
		if len(b)-off < 5 {
			return 0, 0, false
		}
		return int(binary.BigEndian.Uint32(b[off+1:])), off + 5, true
	}
	return 0, 0, false
}

// arrayLen reads an array header; the length is at most the bytes left.
func (dc *Decoder) arrayLen(what string) (int, error) {
	c, err := dc.peek()
	if err != nil {
		return 0, err
	}
	if !isArray(c) {
		return 0, malformed(what, c)
	}
	n, ok := dc.containerLen()
	if !ok || n > len(dc.buf)-dc.off {
		return 0, fmt.Errorf("reading %s length: %w", what, errTruncated)
	}
	return n, nil
}

// mapLen reads a map header (the caller checked the code).
func (dc *Decoder) mapLen(what string) (int, error) {
	n, ok := dc.containerLen()
	if !ok {
		return 0, fmt.Errorf("reading %s: %w", what, errTruncated)
	}
	return n, nil
}

func (dc *Decoder) isNil() (bool, error) {
	c, err := dc.peek()
	if err != nil {
		return false, err
	}
	if c == msgpcode.Nil {
		dc.off++
		return true, nil
	}
	return false, nil
}

// intern returns b as a string, shared with earlier results when short and seen recently.
func (dc *Decoder) intern(b []byte) string {
	if string(b) == dc.last {
		return dc.last
	}
	if len(b) > maxInternLen {
		return string(b)
	}
	s, ok := dc.strs[string(b)]
	if !ok {
		if dc.strs == nil || len(dc.strs) >= maxInterned {
			dc.strs = make(map[string]string, 64)
		}
		s = string(b)
		dc.strs[s] = s
	}
	dc.last = s
	return s
}

func (dc *Decoder) str(what string) (string, error) {
	c, err := dc.peek()
	if err != nil {
		return "", err
	}
	if !msgpcode.IsString(c) {
		return "", malformed(what, c)
	}
	b, next, ok := rawStr(dc.buf, dc.off)
	if !ok {
		return "", fmt.Errorf("reading %s: %w", what, errTruncated)
	}
	dc.off = next
	return dc.intern(b), nil
}

// name reads a map key or event tag and returns it as one of the known field names (no allocation),
// or a copy of any other string.
func (dc *Decoder) name(what string) (string, error) {
	b, next, ok := rawStr(dc.buf, dc.off)
	if !ok {
		c, _ := dc.peek()
		return "", malformed(what, c)
	}
	dc.off = next
	switch string(b) {
	case "type":
		return "type", nil
	case "ts":
		return "ts", nil
	case "events":
		return "events", nil
	case "data_parallel_rank":
		return "data_parallel_rank", nil
	case "attn_dp_rank":
		return "attn_dp_rank", nil
	case "BlockStored":
		return "BlockStored", nil
	case "BlockRemoved":
		return "BlockRemoved", nil
	case "AllBlocksCleared":
		return "AllBlocksCleared", nil
	}
	for _, f := range storedFields {
		if string(b) == f {
			return f, nil
		}
	}
	return string(b), nil
}

func (dc *Decoder) optStr(what string) (string, bool, error) {
	if null, err := dc.isNil(); null || err != nil {
		return "", false, err
	}
	s, err := dc.str(what)
	return s, err == nil, err
}

func (dc *Decoder) int64v(what string) (int64, error) {
	c, err := dc.peek()
	if err != nil {
		return 0, err
	}
	if !isInt(c) {
		return 0, malformed(what, c)
	}
	v, _, next, ok := rawInt(dc.buf, dc.off)
	if !ok {
		return 0, fmt.Errorf("reading %s: %w", what, errTruncated)
	}
	dc.off = next
	return int64(v), nil
}

func (dc *Decoder) optInt(what string) (int64, bool, error) {
	if null, err := dc.isNil(); null || err != nil {
		return 0, false, err
	}
	n, err := dc.int64v(what)
	return n, err == nil, err
}

// hash reads an engine block hash: a signed or unsigned int (bitwise u64), or bytes (last 8, big-endian).
func (dc *Decoder) hash() (uint64, error) {
	c, err := dc.peek()
	if err != nil {
		return 0, err
	}
	switch {
	case isInt(c):
		h, _, next, ok := rawInt(dc.buf, dc.off)
		if !ok {
			return 0, fmt.Errorf("reading block hash: %w", errTruncated)
		}
		dc.off = next
		return h, nil
	case msgpcode.IsBin(c) || msgpcode.IsString(c):
		b, next, ok := rawBytes(dc.buf, dc.off)
		if !ok {
			return 0, fmt.Errorf("reading block hash bytes: %w", errTruncated)
		}
		dc.off = next
		if len(b) > 8 {
			b = b[len(b)-8:]
		}
		var be [8]byte
		copy(be[8-len(b):], b)
		return binary.BigEndian.Uint64(be[:]), nil
	}
	return 0, malformed("block hash", c)
}

// hashes reads block_hashes into the scratch; the result aliases it until finish.
func (dc *Decoder) hashes() ([]uint64, error) {
	n, err := dc.arrayLen("block_hashes")
	if err != nil {
		return nil, err
	}
	start := len(dc.hs)
	dc.hs = slices.Grow(dc.hs, n)
	for i := 0; i < n; i++ {
		h, err := dc.hash()
		if err != nil {
			dc.hs = dc.hs[:start]
			return nil, err
		}
		dc.hs = append(dc.hs, h)
	}
	return dc.hs[start:len(dc.hs):len(dc.hs)], nil
}

// tokens reads token_ids into the scratch; the result aliases it until finish.
func (dc *Decoder) tokens() ([]uint32, error) {
	n, err := dc.arrayLen("token_ids")
	if err != nil {
		return nil, err
	}
	start := len(dc.toks)
	dc.toks = slices.Grow(dc.toks, n)[:start+n]
	out := dc.toks[start : start+n : start+n]
	b, off := dc.buf, dc.off
	for i := range out {
		// Fast path: positive fixint and uint16 (most token ids).
		if off < len(b) {
			if c := b[off]; c <= 0x7f {
				out[i] = uint32(c)
				off++
				continue
			} else if c == 0xcd && len(b)-off >= 3 {
				out[i] = uint32(binary.BigEndian.Uint16(b[off+1:]))
				off += 3
				continue
			} else if c == 0xce && len(b)-off >= 5 {
				out[i] = binary.BigEndian.Uint32(b[off+1:])
				off += 5
				continue
			}
		}
		v, neg, next, ok := rawInt(b, off)
		if !ok {
			dc.toks = dc.toks[:start]
			return nil, fmt.Errorf("reading token id %d: not an integer: %w", i, ErrMalformed)
		}
		if neg || v > math.MaxUint32 {
			dc.toks = dc.toks[:start]
			return nil, fmt.Errorf("reading token id %d: %d out of range: %w", i, int64(v), ErrMalformed)
		}
		out[i] = uint32(v)
		off = next
	}
	dc.off = off
	return out, nil
}

// extraKeys reads extra_keys: one allocation for the entries and one for their items, counted first.
func (dc *Decoder) extraKeys() ([][]ExtraKey, bool, error) {
	if null, err := dc.isNil(); null || err != nil {
		return nil, false, err
	}
	n, err := dc.arrayLen("extra_keys")
	if err != nil {
		return nil, false, err
	}
	total := 0
	for i, off := 0, dc.off; i < n && off < len(dc.buf); i++ {
		m, _, ok := containerLenAt(dc.buf, off)
		if !ok {
			if dc.buf[off] != msgpcode.Nil {
				break // the loop below reports it
			}
			off++
			continue
		}
		end, err := skipValue(dc.buf, off)
		if err != nil {
			break
		}
		total, off = total+m, end
	}
	out := make([][]ExtraKey, n)
	items := make([]ExtraKey, 0, total)
	for i := range out {
		null, err := dc.isNil()
		if err != nil {
			return nil, false, err
		}
		if null {
			continue
		}
		m, err := dc.arrayLen("extra_keys entry")
		if err != nil {
			return nil, false, err
		}
		start := len(items)
		for j := 0; j < m; j++ {
			k, err := dc.extraKey()
			if err != nil {
				return nil, false, err
			}
			items = append(items, k)
		}
		out[i] = items[start:len(items):len(items)]
	}
	return out, true, nil
}

// extraKey reads a string, a [string, int] pair, or anything else as raw bytes.
func (dc *Decoder) extraKey() (ExtraKey, error) {
	start := dc.off
	c, err := dc.peek()
	if err != nil {
		return ExtraKey{}, err
	}
	if msgpcode.IsString(c) {
		s, err := dc.str("extra key")
		return ExtraKey{Kind: KeyString, Str: s}, err
	}
	if isArray(c) {
		if n, ok := dc.containerLen(); ok && n == 2 {
			if s, err := dc.str("extra key identifier"); err == nil {
				if off, err := dc.int64v("extra key offset"); err == nil {
					return ExtraKey{Kind: KeyPair, Str: s, Offset: off}, nil
				}
			}
		}
	}
	end, err := skipNested(dc.buf, start, inKeyEntry)
	if err != nil {
		return ExtraKey{}, err
	}
	dc.off = end
	return ExtraKey{Kind: KeyOther, Raw: bytes.Clone(dc.buf[start:end])}, nil
}

// release drops the input and the scratch's contents.
func (dc *Decoder) release() {
	dc.buf, dc.off, dc.one = nil, 0, nil
	dc.resetScratch()
}

// resetScratch empties the scratch (kept for reuse, without references to strings or raw bytes).
func (dc *Decoder) resetScratch() {
	dc.hs, dc.toks = dc.hs[:0], dc.toks[:0]
}

// finish moves the events' hashes and tokens out of the scratch into per-batch slabs (one
// allocation each), keeping nil slices nil and empty ones empty, and resets the scratch.
func (dc *Decoder) finish(bt *Batch) {
	var nh, nt int
	for i := range bt.Events {
		ev := &bt.Events[i]
		nh += len(ev.BlockHashes)
		nt += len(ev.TokenIDs)
	}
	hs := make([]uint64, 0, nh)
	toks := make([]uint32, 0, nt)
	for i := range bt.Events {
		ev := &bt.Events[i]
		if ev.BlockHashes != nil {
			s := len(hs)
			hs = append(hs, ev.BlockHashes...)
			ev.BlockHashes = hs[s:len(hs):len(hs)]
		}
		if ev.TokenIDs != nil {
			s := len(toks)
			toks = append(toks, ev.TokenIDs...)
			ev.TokenIDs = toks[s:len(toks):len(toks)]
		}
	}
	dc.resetScratch()
}

// Field names of vLLM's msgspec structs, in declaration (array) order (vllm/distributed/kv_events.py
// BlockStored and BlockRemoved, with the KV cache group fields of hybrid models and the fields after
// them; the decoder reads past the ones it does not use).
var (
	storedFields = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name",
		"extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window", "locality", "ownership", "session_id"}
	removedFields = []string{"block_hashes", "medium", "group_idx", "locality", "ownership"}
)

func parseType(tag string) (Type, error) {
	switch tag {
	case "BlockStored":
		return BlockStored, nil
	case "BlockRemoved":
		return BlockRemoved, nil
	case "AllBlocksCleared":
		return AllBlocksCleared, nil
	}
	return 0, fmt.Errorf("reading event tag %q: %w", tag, errUnknownType)
}

// field decodes one named event field into ev; unknown names are skipped.
func (dc *Decoder) field(ev *Event, name string) (err error) {
	switch name {
	case "block_hashes":
		ev.BlockHashes, err = dc.hashes()
	case "parent_block_hash":
		var null bool
		if null, err = dc.isNil(); err == nil && !null {
			ev.Parent, err = dc.hash()
			ev.HasParent = err == nil
		}
	case "token_ids":
		ev.TokenIDs, err = dc.tokens()
	case "block_size":
		var n int64
		n, err = dc.int64v("block_size")
		if err == nil && (n < 0 || n > math.MaxInt32) {
			err = fmt.Errorf("reading block_size %d: out of range: %w", n, ErrMalformed)
		}
		ev.BlockSize = int(n)
	case "lora_id":
		ev.LoRAID, ev.HasLoRAID, err = dc.optInt("lora_id")
	case "medium":
		ev.Medium, ev.HasMedium, err = dc.optStr("medium")
	case "lora_name":
		ev.LoRAName, ev.HasLoRAName, err = dc.optStr("lora_name")
	case "extra_keys":
		ev.ExtraKeys, ev.HasExtraKeys, err = dc.extraKeys()
	case "group_idx":
		ev.GroupIdx, ev.HasGroupIdx, err = dc.optInt("group_idx")
	case "kv_cache_spec_kind":
		ev.SpecKind, ev.HasSpecKind, err = dc.optStr("kv_cache_spec_kind")
	default:
		err = dc.skip(inEvent)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	return nil
}

// event decodes one event, array (tag first) or map ("type" key) encoded.
func (dc *Decoder) event() (Event, error) {
	var ev Event
	c, err := dc.peek()
	if err != nil {
		return ev, err
	}
	switch {
	case isArray(c):
		n, err := dc.arrayLen("event")
		if err != nil {
			return ev, err
		}
		if n == 0 {
			return ev, fmt.Errorf("reading event: empty array: %w", ErrMalformed)
		}
		tag, err := dc.name("event tag")
		if err != nil {
			return ev, err
		}
		if ev.Type, err = parseType(tag); err != nil {
			return ev, err
		}
		names := storedFields
		switch ev.Type {
		case BlockRemoved:
			names = removedFields
		case AllBlocksCleared:
			names = nil
		}
		for i := 1; i < n; i++ {
			name := ""
			if i-1 < len(names) {
				name = names[i-1]
			}
			if err := dc.field(&ev, name); err != nil {
				return ev, err
			}
		}
	case isMap(c):
		n, err := dc.mapLen("event map")
		if err != nil {
			return ev, err
		}
		for i := 0; i < n; i++ {
			key, err := dc.name("event key")
			if err != nil {
				return ev, err
			}
			if key == "type" {
				tag, err := dc.name("event type")
				if err != nil {
					return ev, err
				}
				if ev.Type, err = parseType(tag); err != nil {
					return ev, err
				}
				continue
			}
			if err := dc.field(&ev, key); err != nil {
				return ev, err
			}
		}
		if ev.Type == 0 {
			return ev, fmt.Errorf("reading event map: no type: %w", ErrMalformed)
		}
	default:
		return ev, malformed("event", c)
	}
	if ev.Type != AllBlocksCleared && ev.BlockHashes == nil {
		return ev, fmt.Errorf("reading %s: no block_hashes: %w", ev.Type, ErrMalformed)
	}
	return ev, nil
}

func (dc *Decoder) events(bt *Batch) error {
	if null, err := dc.isNil(); null || err != nil {
		return err
	}
	n, err := dc.arrayLen("events")
	if err != nil {
		return err
	}
	if n == 1 && dc.one != nil { // the common single-event batch: its Event lives with the Batch
		bt.Events, dc.one = dc.one[:0:1], nil
	} else {
		bt.Events = make([]Event, 0, n)
	}
	for i := 0; i < n; i++ {
		// A successful event() ends exactly at the event's end; only a failed one needs its extent
		// to resynchronize.
		start := dc.pos()
		ev, err := dc.event()
		if err == nil {
			bt.Events = append(bt.Events, ev)
			continue
		}
		bt.skip(fmt.Errorf("event %d: %w", i, err))
		end, err := skipValue(dc.buf, start)
		if err != nil {
			return err
		}
		dc.seek(end)
	}
	dc.finish(bt)
	return nil
}

func (dc *Decoder) ts() (float64, error) {
	c, err := dc.peek()
	if err != nil {
		return 0, err
	}
	b, off := dc.buf, dc.off
	switch {
	case c == msgpcode.Nil:
		dc.off++
		return 0, nil
	case isInt(c):
		v, _, next, ok := rawInt(b, off)
		if !ok {
			return 0, fmt.Errorf("reading ts: %w", errTruncated)
		}
		dc.off = next
		return float64(int64(v)), nil
	case c == msgpcode.Float:
		if len(b)-off < 5 {
			return 0, fmt.Errorf("reading ts: %w", errTruncated)
		}
		dc.off += 5
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b[off+1:]))), nil
	case c == msgpcode.Double:
		if len(b)-off < 9 {
			return 0, fmt.Errorf("reading ts: %w", errTruncated)
		}
		dc.off += 9
		return math.Float64frombits(binary.BigEndian.Uint64(b[off+1:])), nil
	}
	return 0, malformed("ts", c)
}

// decodeEngine decodes a vLLM or SGLang batch: [ts, events, dp_rank?] or {ts, events, data_parallel_rank}.
//
// It first decodes in one pass, assuming well-formed input; that result stands when every event
// decoded and the batch ended exactly at len(b), since every byte was then read by a check at least
// as strict as skipValue's (nested skips included, see skipNested). Otherwise the batch is checked
// whole by skipValue first and decoded again, which gives the errors and skip counts of bad input.
func (dc *Decoder) decodeEngine(b []byte) (*Batch, error) {
	if dc.hs == nil {
		dc.hs, dc.toks = make([]uint64, 0, 64), make([]uint32, 0, 1024)
	}
	bt, err := dc.decodeEngineBody(b)
	if err == nil && bt.Unknown == 0 && bt.Malformed == 0 && dc.off == len(b) {
		dc.release()
		return bt, nil
	}
	dc.release()
	return dc.decodeEngineChecked(b)
}

// decodeEngineChecked checks the whole batch with skipValue, then decodes it.
func (dc *Decoder) decodeEngineChecked(b []byte) (*Batch, error) {
	end, err := skipValue(b, 0)
	if err != nil {
		return nil, err
	}
	if end != len(b) {
		return nil, fmt.Errorf("reading batch: %d trailing bytes: %w", len(b)-end, ErrMalformed)
	}
	if dc.hs == nil {
		dc.hs, dc.toks = make([]uint64, 0, 64), make([]uint32, 0, 1024)
	}
	defer dc.release()
	return dc.decodeEngineBody(b)
}

// decodeEngineBody decodes an engine batch from b[0], leaving dc.off after it.
func (dc *Decoder) decodeEngineBody(b []byte) (*Batch, error) {
	dc.buf, dc.off = b, 0
	box := &batchBox{}
	bt := &box.b
	dc.one = &box.ev
	c, _ := dc.peek()
	switch {
	case isArray(c):
		n, err := dc.arrayLen("batch")
		if err != nil {
			return nil, err
		}
		if n < 2 {
			return nil, fmt.Errorf("reading batch: %d fields: %w", n, ErrMalformed)
		}
		if bt.TS, err = dc.ts(); err != nil {
			return nil, err
		}
		if err := dc.events(bt); err != nil {
			return nil, err
		}
		if n >= 3 {
			if bt.DPRank, bt.HasDPRank, err = dc.optInt("data_parallel_rank"); err != nil {
				return nil, err
			}
		}
	case isMap(c):
		n, err := dc.mapLen("batch map")
		if err != nil {
			return nil, err
		}
		seen := false
		for i := 0; i < n; i++ {
			key, err := dc.name("batch key")
			if err != nil {
				return nil, err
			}
			switch key {
			case "ts":
				bt.TS, err = dc.ts()
			case "events":
				seen = true
				err = dc.events(bt)
			case "data_parallel_rank", "attn_dp_rank": // SGLang names it attn_dp_rank
				bt.DPRank, bt.HasDPRank, err = dc.optInt("data_parallel_rank")
			default:
				err = dc.skip(inBatch)
			}
			if err != nil {
				return nil, err
			}
		}
		if !seen {
			return nil, fmt.Errorf("reading batch map: no events: %w", ErrMalformed)
		}
	default:
		return nil, malformed("batch", c)
	}
	return bt, nil
}

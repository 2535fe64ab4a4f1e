package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Decoder decodes batches with reusable state. A Decoder must not be used by two goroutines at once;
// make one per subscriber goroutine.
type Decoder struct {
	buf []byte
	r   bytes.Reader
	d   *msgpack.Decoder
}

// NewDecoder returns a Decoder.
func NewDecoder() *Decoder {
	dc := &Decoder{}
	dc.d = msgpack.NewDecoder(&dc.r)
	return dc
}

// Decode decodes one batch as published on kvroute.events.<id> in the given encoding. The error wraps
// ErrMalformed when b is not one well-formed batch (trailing bytes included); events of unknown types
// and events with wrongly shaped fields are skipped and counted in the Batch instead. The Batch does not
// alias b.
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

func (dc *Decoder) reset(b []byte) {
	dc.buf = b
	dc.r.Reset(b)
	dc.d.Reset(&dc.r)
}

func (dc *Decoder) pos() int { return len(dc.buf) - dc.r.Len() }

func (dc *Decoder) seek(off int) { _, _ = dc.r.Seek(int64(off), io.SeekStart) }

// skip moves past the next value.
func (dc *Decoder) skip() error {
	end, err := skipValue(dc.buf, dc.pos())
	if err != nil {
		return err
	}
	dc.seek(end)
	return nil
}

func (dc *Decoder) peek() (byte, error) {
	c, err := dc.d.PeekCode()
	if err != nil {
		return 0, fmt.Errorf("reading code: %w", errTruncated)
	}
	return c, nil
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

// arrayLen reads an array header; the length is at most the bytes left.
func (dc *Decoder) arrayLen(what string) (int, error) {
	c, err := dc.peek()
	if err != nil {
		return 0, err
	}
	if !isArray(c) {
		return 0, malformed(what, c)
	}
	n, err := dc.d.DecodeArrayLen()
	if err != nil || n > dc.r.Len() {
		return 0, fmt.Errorf("reading %s length: %w", what, errTruncated)
	}
	return n, nil
}

func (dc *Decoder) isNil() (bool, error) {
	c, err := dc.peek()
	if err != nil {
		return false, err
	}
	if c == msgpcode.Nil {
		_ = dc.d.DecodeNil()
		return true, nil
	}
	return false, nil
}

func (dc *Decoder) str(what string) (string, error) {
	c, err := dc.peek()
	if err != nil {
		return "", err
	}
	if !msgpcode.IsString(c) {
		return "", malformed(what, c)
	}
	s, err := dc.d.DecodeString()
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", what, errTruncated)
	}
	return s, nil
}

// name reads a map key or event tag and returns it as one of the known field names (no allocation),
// or a copy of any other string.
func (dc *Decoder) name(what string) (string, error) {
	b, next, ok := rawStr(dc.buf, dc.pos())
	if !ok {
		c, _ := dc.peek()
		return "", malformed(what, c)
	}
	dc.seek(next)
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
	n, err := dc.d.DecodeInt64()
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", what, errTruncated)
	}
	return n, nil
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
		h, _, next, ok := rawInt(dc.buf, dc.pos())
		if !ok {
			return 0, fmt.Errorf("reading block hash: %w", errTruncated)
		}
		dc.seek(next)
		return h, nil
	case msgpcode.IsBin(c) || msgpcode.IsString(c):
		b, err := dc.d.DecodeBytes()
		if err != nil {
			return 0, fmt.Errorf("reading block hash bytes: %w", errTruncated)
		}
		if len(b) > 8 {
			b = b[len(b)-8:]
		}
		var be [8]byte
		copy(be[8-len(b):], b)
		return binary.BigEndian.Uint64(be[:]), nil
	}
	return 0, malformed("block hash", c)
}

func (dc *Decoder) hashes() ([]uint64, error) {
	n, err := dc.arrayLen("block_hashes")
	if err != nil {
		return nil, err
	}
	out := make([]uint64, n)
	for i := range out {
		if out[i], err = dc.hash(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (dc *Decoder) tokens() ([]uint32, error) {
	n, err := dc.arrayLen("token_ids")
	if err != nil {
		return nil, err
	}
	out := make([]uint32, n)
	off := dc.pos()
	for i := range out {
		v, neg, next, ok := rawInt(dc.buf, off)
		if !ok {
			return nil, fmt.Errorf("reading token id %d: not an integer: %w", i, ErrMalformed)
		}
		if neg || v > math.MaxUint32 {
			return nil, fmt.Errorf("reading token id %d: %d out of range: %w", i, int64(v), ErrMalformed)
		}
		out[i] = uint32(v)
		off = next
	}
	dc.seek(off)
	return out, nil
}

func (dc *Decoder) extraKeys() ([][]ExtraKey, bool, error) {
	if null, err := dc.isNil(); null || err != nil {
		return nil, false, err
	}
	n, err := dc.arrayLen("extra_keys")
	if err != nil {
		return nil, false, err
	}
	out := make([][]ExtraKey, n)
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
		items := make([]ExtraKey, m)
		for j := range items {
			if items[j], err = dc.extraKey(); err != nil {
				return nil, false, err
			}
		}
		out[i] = items
	}
	return out, true, nil
}

// extraKey reads a string, a [string, int] pair, or anything else as raw bytes.
func (dc *Decoder) extraKey() (ExtraKey, error) {
	start := dc.pos()
	c, err := dc.peek()
	if err != nil {
		return ExtraKey{}, err
	}
	if msgpcode.IsString(c) {
		s, err := dc.str("extra key")
		return ExtraKey{Kind: KeyString, Str: s}, err
	}
	if isArray(c) {
		if n, _ := dc.d.DecodeArrayLen(); n == 2 {
			if s, err := dc.str("extra key identifier"); err == nil {
				if off, err := dc.int64v("extra key offset"); err == nil {
					return ExtraKey{Kind: KeyPair, Str: s, Offset: off}, nil
				}
			}
		}
	}
	end, err := skipValue(dc.buf, start)
	if err != nil {
		return ExtraKey{}, err
	}
	dc.seek(end)
	return ExtraKey{Kind: KeyOther, Raw: bytes.Clone(dc.buf[start:end])}, nil
}

// Field names of vLLM's msgspec structs, in declaration (array) order.
var (
	storedFields  = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name", "extra_keys", "group_idx"}
	removedFields = []string{"block_hashes", "medium", "group_idx"}
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
	default:
		err = dc.skip()
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
		n, err := dc.d.DecodeMapLen()
		if err != nil {
			return ev, fmt.Errorf("reading event map: %w", errTruncated)
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
	bt.Events = make([]Event, 0, n)
	for i := 0; i < n; i++ {
		// The whole batch was checked by skipValue, so a successful event() ends exactly at the
		// event's end; only a failed one needs its extent to resynchronize.
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
	return nil
}

func (dc *Decoder) ts() (float64, error) {
	c, err := dc.peek()
	if err != nil {
		return 0, err
	}
	if c == msgpcode.Nil {
		return 0, dc.d.DecodeNil()
	}
	if !isInt(c) && c != msgpcode.Float && c != msgpcode.Double {
		return 0, malformed("ts", c)
	}
	f, err := dc.d.DecodeFloat64()
	if err != nil {
		return 0, fmt.Errorf("reading ts: %w", errTruncated)
	}
	return f, nil
}

// decodeEngine decodes a vLLM or SGLang batch: [ts, events, dp_rank?] or {ts, events, data_parallel_rank}.
func (dc *Decoder) decodeEngine(b []byte) (*Batch, error) {
	end, err := skipValue(b, 0)
	if err != nil {
		return nil, err
	}
	if end != len(b) {
		return nil, fmt.Errorf("reading batch: %d trailing bytes: %w", len(b)-end, ErrMalformed)
	}
	dc.reset(b)
	defer dc.reset(nil)
	bt := &Batch{}
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
		n, err := dc.d.DecodeMapLen()
		if err != nil {
			return nil, fmt.Errorf("reading batch map: %w", errTruncated)
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
				err = dc.skip()
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

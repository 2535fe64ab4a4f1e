package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/kvroute/kvroute/kv"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// This file reads the values of vLLM's event fields in the forms engines write them: block hashes
// (int of either sign, or bytes), token_ids, and extra_keys items (string, [identifier, offset]
// pair, or anything else kept raw).

// hash reads an engine block hash: a signed or unsigned int (bitwise u64), or bytes (last 8, big-endian).
func (dc *Decoder) hash() (kv.EngineHash, error) {
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
		return kv.EngineHash(h), nil
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
		return kv.EngineHash(binary.BigEndian.Uint64(be[:])), nil
	}
	return 0, malformed("block hash", c)
}

// hashes reads block_hashes into the scratch; the result aliases it until finish.
func (dc *Decoder) hashes() ([]kv.EngineHash, error) {
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

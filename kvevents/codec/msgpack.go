package codec

import (
	"encoding/binary"
	"fmt"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// This file is the msgpack reader: reads of one value at an offset (raw*, sized, containerLenAt),
// and the Decoder's cursor over its input (peek, headers, nil, strings, integers), each moving past
// what it read and failing with ErrMalformed on a wrong code or truncated input. It knows no vLLM
// field; skipping whole values with the nesting bound is skip.go.

func (dc *Decoder) pos() int { return dc.off }

func (dc *Decoder) seek(off int) { dc.off = off }

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

// unexpected is peek's error, or else the malformed error for code c where what was wanted.
func unexpected(what string, c byte, err error) error {
	if err != nil {
		return err
	}
	return malformed(what, c)
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
	if c, err := dc.peek(); err != nil || !isArray(c) {
		return 0, unexpected(what, c, err)
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

func (dc *Decoder) str(what string) (string, error) {
	if c, err := dc.peek(); err != nil || !msgpcode.IsString(c) {
		return "", unexpected(what, c, err)
	}
	b, next, ok := rawStr(dc.buf, dc.off)
	if !ok {
		return "", fmt.Errorf("reading %s: %w", what, errTruncated)
	}
	dc.off = next
	return dc.intern(b), nil
}

func (dc *Decoder) optStr(what string) (string, bool, error) {
	if null, err := dc.isNil(); null || err != nil {
		return "", false, err
	}
	s, err := dc.str(what)
	return s, err == nil, err
}

func (dc *Decoder) int64v(what string) (int64, error) {
	if c, err := dc.peek(); err != nil || !isInt(c) {
		return 0, unexpected(what, c, err)
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

// sized decodes the header of a non-fixed msgpack code: payload length or child count n, header length
// hdr (code byte included) and whether the value is a container.
func sized(b []byte, c byte) (n uint64, hdr int, container, ok bool) {
	be := func(k int) (uint64, bool) {
		if len(b) < 1+k {
			return 0, false
		}
		switch k {
		case 1:
			return uint64(b[1]), true
		case 2:
			return uint64(binary.BigEndian.Uint16(b[1:])), true
		default:
			return uint64(binary.BigEndian.Uint32(b[1:])), true
		}
	}
	switch c {
	case 0xcc, 0xd0:
		return 1, 1, false, true
	case 0xcd, 0xd1:
		return 2, 1, false, true
	case 0xce, 0xd2, 0xca:
		return 4, 1, false, true
	case 0xcf, 0xd3, 0xcb:
		return 8, 1, false, true
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext: type byte + 1,2,4,8,16
		return 1 + 1<<(c-0xd4), 1, false, true
	case 0xc4, 0xd9:
		n, ok = be(1)
		return n, 2, false, ok
	case 0xc5, 0xda:
		n, ok = be(2)
		return n, 3, false, ok
	case 0xc6, 0xdb:
		n, ok = be(4)
		return n, 5, false, ok
	case 0xc7:
		n, ok = be(1)
		return n + 1, 2, false, ok
	case 0xc8:
		n, ok = be(2)
		return n + 1, 3, false, ok
	case 0xc9:
		n, ok = be(4)
		return n + 1, 5, false, ok
	case 0xdc:
		n, ok = be(2)
		return n, 3, true, ok
	case 0xdd:
		n, ok = be(4)
		return n, 5, true, ok
	case 0xde:
		n, ok = be(2)
		return 2 * n, 3, true, ok
	case 0xdf:
		n, ok = be(4)
		return 2 * n, 5, true, ok
	}
	return 0, 0, false, false // 0xc1 (never used)
}

// rawInt reads the msgpack integer at b[off]: its bits as u64 (signed values sign-extended), whether
// it was encoded signed, and the offset after it. ok is false if b[off] is not a complete integer.
func rawInt(b []byte, off int) (v uint64, neg bool, next int, ok bool) {
	if off >= len(b) {
		return 0, false, 0, false
	}
	c := b[off]
	switch {
	case c <= 0x7f:
		return uint64(c), false, off + 1, true
	case c >= 0xe0:
		return uint64(int64(int8(c))), true, off + 1, true
	}
	var n int
	switch c {
	case 0xcc, 0xd0:
		n = 1
	case 0xcd, 0xd1:
		n = 2
	case 0xce, 0xd2:
		n = 4
	case 0xcf, 0xd3:
		n = 8
	default:
		return 0, false, 0, false
	}
	if len(b)-off-1 < n {
		return 0, false, 0, false
	}
	p := b[off+1 : off+1+n]
	switch c {
	case 0xcc:
		v = uint64(p[0])
	case 0xcd:
		v = uint64(binary.BigEndian.Uint16(p))
	case 0xce:
		v = uint64(binary.BigEndian.Uint32(p))
	case 0xcf:
		v = binary.BigEndian.Uint64(p)
	case 0xd0:
		v, neg = uint64(int64(int8(p[0]))), int8(p[0]) < 0
	case 0xd1:
		s := int16(binary.BigEndian.Uint16(p))
		v, neg = uint64(int64(s)), s < 0
	case 0xd2:
		s := int32(binary.BigEndian.Uint32(p))
		v, neg = uint64(int64(s)), s < 0
	case 0xd3:
		s := int64(binary.BigEndian.Uint64(p))
		v, neg = uint64(s), s < 0
	}
	return v, neg, off + 1 + n, true
}

// rawStr returns the bytes of the msgpack string at b[off] (aliasing b) and the offset after it.
func rawStr(b []byte, off int) (s []byte, next int, ok bool) {
	if off >= len(b) {
		return nil, 0, false
	}
	c := b[off]
	var n uint64
	hdr := 1
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xda || c == 0xdb:
		var ok bool
		n, hdr, _, ok = sized(b[off:], c)
		if !ok {
			return nil, 0, false
		}
	default:
		return nil, 0, false
	}
	return sizedPayload(b, off+hdr, n)
}

// rawBytes returns the payload of the msgpack string or bin at b[off] (aliasing b) and the offset
// after it.
func rawBytes(b []byte, off int) (s []byte, next int, ok bool) {
	if off >= len(b) {
		return nil, 0, false
	}
	switch c := b[off]; c {
	case 0xc4, 0xc5, 0xc6:
		n, hdr, _, ok := sized(b[off:], c)
		if !ok {
			return nil, 0, false
		}
		return sizedPayload(b, off+hdr, n)
	}
	return rawStr(b, off)
}

// sizedPayload returns the n bytes of b from start (aliasing b) and the offset after them; ok is false
// when b holds fewer.
func sizedPayload(b []byte, start int, n uint64) (s []byte, next int, ok bool) {
	if n > uint64(len(b)-start) {
		return nil, 0, false
	}
	end := start + int(n)
	return b[start:end], end, true
}

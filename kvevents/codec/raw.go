package codec

import (
	"encoding/binary"
	"fmt"
)

// MaxDepth bounds the nesting of arrays and maps in one batch (vLLM batches nest 4 deep).
const MaxDepth = 32

// skipValue returns the offset just past the msgpack value starting at b[off]. It never recurses and
// fails on truncated input, the reserved code 0xc1, or nesting deeper than MaxDepth.
func skipValue(b []byte, off int) (int, error) { return skipNested(b, off, 0) }

// skipNested is skipValue for a value inside outer enclosing non-empty containers: the nesting bound
// counts them, so skipping parts of a batch rejects exactly what skipping the whole batch would.
func skipNested(b []byte, off, outer int) (int, error) {
	limit := MaxDepth - outer
	var stack [MaxDepth + 1]int // items left per open container
	depth := 0
	stack[0] = 1
	for {
		for depth >= 0 && stack[depth] == 0 {
			depth--
		}
		if depth < 0 {
			return off, nil
		}
		// Fast path: the scalars of known size that fill most batches (token ids, hashes, short strings).
		for stack[depth] > 0 && off < len(b) {
			c := b[off]
			sz := int(scalarLen[c])
			if c == 0xd9 && len(b)-off >= 2 { // str8: media identifiers are 64 bytes
				sz = 2 + int(b[off+1])
			}
			if sz == 0 || sz > len(b)-off {
				break
			}
			off += sz
			stack[depth]--
		}
		if stack[depth] == 0 {
			continue
		}
		stack[depth]--
		if off >= len(b) {
			return 0, fmt.Errorf("skipping value at %d: %w", off, errTruncated)
		}
		c := b[off]
		var n uint64 // children (arrays/maps) or payload bytes
		hdr := 1
		container := false
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			n, container = 2*uint64(c&0x0f), true
		case c >= 0x90 && c <= 0x9f:
			n, container = uint64(c&0x0f), true
		case c >= 0xa0 && c <= 0xbf:
			n = uint64(c & 0x1f)
		default:
			var ok bool
			n, hdr, container, ok = sized(b[off:], c)
			if !ok {
				return 0, fmt.Errorf("skipping value with code 0x%02x at %d: %w", c, off, errTruncated)
			}
		}
		off += hdr
		if container {
			if n > uint64(len(b)-off) { // every item takes at least one byte
				return 0, fmt.Errorf("skipping container of %d items at %d: %w", n, off, errTruncated)
			}
			if n == 0 {
				continue
			}
			if depth >= limit {
				return 0, fmt.Errorf("skipping value at %d: nesting deeper than %d: %w", off, MaxDepth, ErrMalformed)
			}
			depth++
			stack[depth] = int(n)
			continue
		}
		if n > uint64(len(b)-off) {
			return 0, fmt.Errorf("skipping %d bytes at %d: %w", n, off, errTruncated)
		}
		off += int(n)
	}
}

// scalarLen is the whole encoded length of a value whose code alone fixes it (fixints, nil, bools,
// fixstrs, fixed-size ints and floats, fixexts), or 0.
var scalarLen = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
			t[c] = 1
		case c >= 0xa0 && c <= 0xbf:
			t[c] = uint8(1 + c&0x1f)
		case c == 0xcc || c == 0xd0:
			t[c] = 2
		case c == 0xcd || c == 0xd1:
			t[c] = 3
		case c == 0xce || c == 0xd2 || c == 0xca:
			t[c] = 5
		case c == 0xcf || c == 0xd3 || c == 0xcb:
			t[c] = 9
		case c >= 0xd4 && c <= 0xd8:
			t[c] = uint8(2 + 1<<(c-0xd4))
		}
	}
	return t
}()

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

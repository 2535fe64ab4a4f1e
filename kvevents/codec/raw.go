package codec

import (
	"encoding/binary"
	"fmt"
)

// MaxDepth bounds the nesting of arrays and maps in one batch (vLLM batches nest 4 deep).
const MaxDepth = 32

// skipValue returns the offset just past the msgpack value starting at b[off]. It never recurses and
// fails on truncated input, the reserved code 0xc1, or nesting deeper than MaxDepth.
func skipValue(b []byte, off int) (int, error) {
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
			if depth == MaxDepth {
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

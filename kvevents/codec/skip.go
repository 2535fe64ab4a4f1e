package codec

import "fmt"

// This file skips msgpack values without decoding them, bounded by MaxDepth: the check that lets the
// one-pass engine decode (batch.go) trust a batch, and the way past fields the layout does not use.

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

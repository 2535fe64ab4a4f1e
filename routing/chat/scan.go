package chat

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// SWAR constants: a byte value repeated in each of a word's eight bytes.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080 // the top bit of each byte
	lows  = 0x7f7f7f7f7f7f7f7f // the low seven bits of each byte
)

// skipPlain returns the index of the first byte at or after i that is not plainStringByte (or
// len(src)): the end of the run a string scan can copy as it is. It tests 32 bytes per loop
// (four words, one branch), then eight, then the last few bytes one by one.
//
// The per-word test (plainBytes) clears the top bit of the bytes that end a run: the quote, the
// backslash, a control byte (< 0x20) or non-ASCII (>= 0x80). It is exact up to and including
// the lowest such byte: a sum carries into the byte above only from a byte with its top bit
// set, which is not plain itself, so the lowest cleared bit is the first byte that is not plain
// (Anderson's bit hacks, "determine if a word has a byte less than n", in its carry form).
func skipPlain(src []byte, i int) int {
	for ; i+32 <= len(src); i += 32 {
		w := src[i : i+32]
		v0, v1 := binary.LittleEndian.Uint64(w[0:]), binary.LittleEndian.Uint64(w[8:])
		v2, v3 := binary.LittleEndian.Uint64(w[16:]), binary.LittleEndian.Uint64(w[24:])
		if plainBytes(v0)&plainBytes(v1)&plainBytes(v2)&plainBytes(v3)&highs != highs {
			break // the word loop below finds which byte
		}
	}
	for ; i+8 <= len(src); i += 8 {
		if f := ^plainBytes(binary.LittleEndian.Uint64(src[i:])) & highs; f != 0 {
			return i + bits.TrailingZeros64(f)/8
		}
	}
	for i < len(src) && plainStringByte[src[i]] {
		i++
	}
	return i
}

// plainBytes sets the top bit of each byte of v (little-endian) that is plainStringByte, exact up
// to the lowest byte that is not (see skipPlain); the other bits are garbage. A byte b with its
// top bit clear is
//   - a control byte or the quote iff b^0x02 < 0x21 (0x22^0x02 is 0x20; the control bytes stay
//     below 0x20), that is iff (b^0x02)+0x5f has its top bit clear;
//   - the backslash iff b^0x5c is 0, that is iff (b^0x5c)+0x7f has its top bit clear.
func plainBytes(v uint64) uint64 {
	notCtrlOrQuote := (v ^ ones*0x02) + ones*0x5f
	notBackslash := (v ^ ones*'\\') + lows
	return notCtrlOrQuote & notBackslash &^ v
}

// plainStringByte marks the bytes a string scan passes without a look: ASCII other than the
// quote, the backslash and control characters.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// copyRun appends to dst the decoded text of src from i up to the first byte that is neither
// plainStringByte nor the start of a two-byte escape (\n, \", ...), and returns dst and the
// index of that byte (the closing quote, a \u escape, non-ASCII, or an error for the caller).
// It scans and copies in one pass: each word is stored to dst as it is tested, and dst's length
// then moves past the plain bytes only, so what is stored beyond them is overwritten by what
// is appended next. The two-byte escapes are decoded here, not by the caller, because long chat
// texts have one (a \n) every hundred bytes or so.
func copyRun(dst, src []byte, i int) ([]byte, int) {
run:
	for {
		if dst, i = copyBlocks(dst, src, i); i+32 <= len(src) {
			return dst, i // a byte copyRun stops at
		}
		for i+8 <= len(src) {
			if cap(dst)-len(dst) < 8 {
				dst = slices.Grow(dst, max(8, len(dst)))
			}
			v := binary.LittleEndian.Uint64(src[i:])
			binary.LittleEndian.PutUint64(dst[len(dst):len(dst)+8], v)
			f := ^plainBytes(v) & highs
			if f == 0 {
				dst, i = dst[:len(dst)+8], i+8
				continue
			}
			k := bits.TrailingZeros64(f) / 8
			dst, i = dst[:len(dst)+k], i+k
			if e := shortEscapeAt(src, i); e != 0 {
				dst, i = append(dst, e), i+2
				continue run
			}
			return dst, i
		}
		for i < len(src) {
			if plainStringByte[src[i]] {
				dst, i = append(dst, src[i]), i+1
			} else if e := shortEscapeAt(src, i); e != 0 {
				dst, i = append(dst, e), i+2
			} else {
				break
			}
		}
		return dst, i
	}
}

// copyBlocks is copyRun 32 bytes at a time: it returns where fewer than 32 bytes are left or
// where a byte is neither plain nor a two-byte escape.
func copyBlocks(dst, src []byte, i int) ([]byte, int) {
	for i+32 <= len(src) {
		if cap(dst)-len(dst) < 32 {
			dst = slices.Grow(dst, max(32, len(dst))) // doubling: the scratch grows a few times per body
		}
		w, o := src[i:i+32], dst[len(dst):len(dst)+32]
		v0, v1 := binary.LittleEndian.Uint64(w[0:]), binary.LittleEndian.Uint64(w[8:])
		v2, v3 := binary.LittleEndian.Uint64(w[16:]), binary.LittleEndian.Uint64(w[24:])
		binary.LittleEndian.PutUint64(o[0:], v0)
		binary.LittleEndian.PutUint64(o[8:], v1)
		binary.LittleEndian.PutUint64(o[16:], v2)
		binary.LittleEndian.PutUint64(o[24:], v3)
		p0, p1, p2, p3 := plainBytes(v0)&highs, plainBytes(v1)&highs, plainBytes(v2)&highs, plainBytes(v3)&highs
		if p0&p1&p2&p3 == highs {
			dst, i = dst[:len(dst)+32], i+32
			continue
		}
		k := 0 // the first byte that is not plain: in the first word with a cleared bit
		switch {
		case p0 != highs:
			k = bits.TrailingZeros64(^p0 & highs)
		case p1 != highs:
			k = 64 + bits.TrailingZeros64(^p1&highs)
		case p2 != highs:
			k = 128 + bits.TrailingZeros64(^p2&highs)
		default:
			k = 192 + bits.TrailingZeros64(^p3&highs)
		}
		dst, i = dst[:len(dst)+k/8], i+k/8
		if e := shortEscapeAt(src, i); e != 0 {
			dst, i = append(dst, e), i+2
			continue
		}
		return dst, i
	}
	return dst, i
}

// shortEscapeAt returns the byte that the two-byte escape at src[i] stands for, or 0 when
// src[i] does not start one.
func shortEscapeAt(src []byte, i int) byte {
	if src[i] == '\\' && i+1 < len(src) {
		return shortEscape[src[i+1]]
	}
	return 0
}

// shortEscape maps the letter of each two-byte JSON escape to the byte it stands for (0: not
// one).
var shortEscape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

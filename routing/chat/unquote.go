package chat

import (
	"encoding/json"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// string decodes the JSON string whose opening quote is at d.pos and moves past its closing
// quote. The result is what encoding/json's Unmarshal into a string gives (Go's decode.go
// unquoteBytes, kept by encoding/json/v2's v1 semantics): escapes decoded, a \u surrogate pair
// joined, a lone surrogate and each invalid UTF-8 byte replaced by U+FFFD. The string is its own
// allocation: it never aliases d.src, and it keeps no other value of the body alive.
//
// A string without escapes or invalid UTF-8 is found by a skipPlain scan (and a rune decode at
// each non-ASCII byte) and copied once. Any other string is decoded in one pass into the
// decoder's scratch buffer, then copied to a string of its exact length: copyRun scans and
// copies the runs of plain bytes and the two-byte escapes between them, and string decodes
// what copyRun stops at (a \u escape, non-ASCII, an invalid byte). (Until issue 14 the scan stopped at each escape and a second
// pass, unquote, searched the text again and copied it piece by piece.)
func (d *decoder) string() (string, error) {
	src := d.src
	start := d.pos + 1
	i := skipPlain(src, start)
	for i < len(src) && src[i] >= utf8.RuneSelf { // valid non-ASCII needs no decoding either
		r, size := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		if i += size; i < len(src) && plainStringByte[src[i]] {
			i = skipPlain(src, i)
		}
	}
	if i < len(src) && src[i] == '"' {
		d.pos = i + 1
		return string(src[start:i]), nil
	}
	buf := append(d.buf[:0], src[start:i]...)
	for i < len(src) {
		switch c := src[i]; {
		case c >= utf8.RuneSelf:
			if j := validRunes(src, i); j > i {
				buf, i = append(buf, src[i:j]...), j
			} else { // an invalid UTF-8 byte
				buf, i = utf8.AppendRune(buf, utf8.RuneError), i+1
			}
		case c == '"':
			d.pos, d.buf = i+1, buf
			return string(buf), nil
		case c == '\\' && shortEscapeAt(src, i) == 0: // \u, or not an escape
			r, size := escape(src[i:])
			if size == 0 {
				return d.stringError(start - 1)
			}
			buf, i = utf8.AppendRune(buf, r), i+size
		case c < 0x20:
			return d.stringError(start - 1)
		default: // a plain byte or a two-byte escape: copyRun takes it and what follows
			buf, i = copyRun(buf, src, i)
		}
	}
	return d.stringError(start - 1)
}

// validRunes returns the end of the run of valid UTF-8 multi-byte sequences that starts at i
// (i itself when src[i] starts none).
func validRunes(src []byte, i int) int {
	for i < len(src) && src[i] >= utf8.RuneSelf {
		r, size := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	return i
}

// escape decodes the escape at the start of s (s[0] is the backslash): the rune it stands for
// and its length in s, or size 0 when it is not a valid JSON escape. A \u high surrogate
// followed by a \u low surrogate is one rune (size 12); a surrogate that is not part of such a
// pair is U+FFFD (size 6), as in encoding/json.
func escape(s []byte) (r rune, size int) {
	if len(s) < 2 {
		return 0, 0
	}
	switch s[1] {
	case '"', '\\', '/':
		return rune(s[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, ok := hex4(s[2:])
		if !ok {
			return 0, 0
		}
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if r2, ok := hex4(s[8:]); ok {
				if p := utf16.DecodeRune(r, r2); p != utf8.RuneError {
					return p, 12
				}
			}
		}
		return utf8.RuneError, 6
	}
	return 0, 0
}

// hex4 decodes the four hex digits at the start of s.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// stringError is the error for the string at start (its opening quote) that unquoteScan
// refused, found as the decoder always has: a byte scan for an unterminated string or a control
// byte (with its position), else encoding/json's error for the invalid escape.
func (d *decoder) stringError(start int) (string, error) {
	d.pos = start + 1
	for d.pos < len(d.src) {
		switch c := d.src[d.pos]; {
		case c == '"':
			d.pos++
			var s string
			if err := json.Unmarshal(d.src[start:d.pos], &s); err != nil {
				return "", fmt.Errorf("%w at byte %d: %w", errSyntax, start, err)
			}
			return s, nil // not reached: unquoteScan refuses only what encoding/json refuses
		case c == '\\':
			d.pos += 2
		case c < 0x20:
			return "", d.errorf("control character in string")
		default:
			d.pos++
		}
	}
	return "", d.errorf("unterminated string")
}

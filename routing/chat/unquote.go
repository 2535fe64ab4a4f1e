package chat

import (
	"bytes"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// unquote decodes the body of a JSON string literal (without its quotes) that the decoder has
// scanned: terminated, no raw control characters. It gives what encoding/json's Unmarshal into
// a string gives (Go's decode.go unquoteBytes, kept by encoding/json/v2's v1 semantics): escapes
// decoded, a \u surrogate pair joined, a lone surrogate and each invalid UTF-8 byte replaced by
// U+FFFD. ok is false for an invalid escape; the caller then asks encoding/json for the error.
//
// It replaces one encoding/json call per escaped string, which allocated a decoder per string
// and dominated the parse of long chat bodies (most message texts contain \n).
//
// The text between escapes is copied in one piece (bytes.IndexByte finds the next escape)
// when valid says the caller's scan found no invalid UTF-8 in s, else rune by rune; the result is built in a
// strings.Builder grown once, so the decoded text is written once and not copied again into
// a string.
func unquote(s []byte, valid bool) (_ string, ok bool) {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := len(s)
			if k := bytes.IndexByte(s[i:], '\\'); k >= 0 {
				j = i + k
			}
			if valid {
				b.Write(s[i:j])
			} else {
				appendValid(&b, s[i:j])
			}
			i = j
			continue
		}
		if i+1 >= len(s) {
			return "", false
		}
		switch s[i+1] {
		case '"', '\\', '/':
			b.WriteByte(s[i+1])
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(s[i+2:])
			if !ok {
				return "", false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					r2, _ = hex4(s[i+2:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			b.WriteRune(r)
			continue
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// appendValid writes run (text without escapes) to b, each invalid UTF-8 byte replaced by
// U+FFFD as encoding/json does; a valid run is written in one piece.
func appendValid(b *strings.Builder, run []byte) {
	if utf8.Valid(run) {
		b.Write(run)
		return
	}
	for i := 0; i < len(run); {
		r, size := utf8.DecodeRune(run[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.Write(run[i : i+size])
		}
		i += size
	}
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

package chat

import (
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
func unquote(s []byte) (_ string, ok bool) {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return "", false
			}
			switch s[i+1] {
			case '"', '\\', '/':
				b = append(b, s[i+1])
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
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
				b = utf8.AppendRune(b, r)
				continue
			default:
				return "", false
			}
			i += 2
		case c < utf8.RuneSelf:
			j := i + 1
			for j < len(s) && s[j] < utf8.RuneSelf && s[j] != '\\' {
				j++
			}
			b = append(b, s[i:j]...)
			i = j
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
		}
	}
	return string(b), true
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

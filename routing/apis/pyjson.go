package apis

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Python's text forms of a decoded JSON value, for the two places vLLM's conversions put Python
// text into the prompt: json.dumps (Anthropic tool_use input → tool call arguments) and str()
// (an assistant's tool_result content). Numbers follow Python's json.loads: a number with a
// fraction or an exponent is a float (printed as repr(float)), any other is an int (exact).

// PyDumps is Python's json.dumps(v) with its defaults: separators ", " and ": ", ensure_ascii
// (non-ASCII as \uXXXX, astral characters as surrogate pairs), key order kept.
func PyDumps(v *Value) string {
	var b strings.Builder
	pyDumps(&b, v)
	return b.String()
}

func pyDumps(b *strings.Builder, v *Value) {
	switch v.Kind {
	case KindNull:
		b.WriteString("null")
	case KindBool:
		if v.Bool {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case KindNumber:
		b.WriteString(pyNumber(v.Str, true))
	case KindString:
		pyJSONString(b, v.Str)
	case KindArray:
		b.WriteByte('[')
		for i, e := range v.Arr {
			if i > 0 {
				b.WriteString(", ")
			}
			pyDumps(b, e)
		}
		b.WriteByte(']')
	case KindObject:
		b.WriteByte('{')
		for i, m := range v.Obj {
			if i > 0 {
				b.WriteString(", ")
			}
			pyJSONString(b, m.Key)
			b.WriteString(": ")
			pyDumps(b, m.Val)
		}
		b.WriteByte('}')
	}
}

// pyJSONString is json.dumps of a str with ensure_ascii (py_encode_basestring_ascii).
func pyJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (r >= 0x7f && r < 0x10000): // outside ' '..'~'
				fmt.Fprintf(b, `\u%04x`, r)
			case r >= 0x10000:
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// PyStr is Python's str(v) of the value json.loads gives (dict, list, str, int, float, bool,
// None): containers use repr of their items.
func PyStr(v *Value) string {
	if v.Kind == KindString {
		return v.Str
	}
	var b strings.Builder
	pyRepr(&b, v)
	return b.String()
}

func pyRepr(b *strings.Builder, v *Value) {
	switch v.Kind {
	case KindNull:
		b.WriteString("None")
	case KindBool:
		if v.Bool {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case KindNumber:
		b.WriteString(pyNumber(v.Str, false))
	case KindString:
		b.WriteString(pyReprString(v.Str))
	case KindArray:
		b.WriteByte('[')
		for i, e := range v.Arr {
			if i > 0 {
				b.WriteString(", ")
			}
			pyRepr(b, e)
		}
		b.WriteByte(']')
	case KindObject:
		b.WriteByte('{')
		for i, m := range v.Obj {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(pyReprString(m.Key))
			b.WriteString(": ")
			pyRepr(b, m.Val)
		}
		b.WriteByte('}')
	}
}

// pyReprString is repr(str) for printable text: single quotes unless the text has a single
// quote and no double quote; \n, \r, \t, backslash and control characters escaped.
func pyReprString(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || (r >= 0x7f && r < 0xa0):
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// pyNumber prints a JSON number as Python does after json.loads: an int exactly, a float as
// repr(float) (json.dumps writes Infinity for an overflowing float, repr writes inf).
func pyNumber(s string, dumps bool) string {
	if !strings.ContainsAny(s, ".eE") {
		var n big.Int
		if _, ok := n.SetString(s, 10); ok {
			return n.String()
		}
		return s
	}
	f, _ := strconv.ParseFloat(s, 64) // a JSON number: only a range error, which gives ±Inf
	if math.IsInf(f, 0) {
		switch {
		case dumps && f > 0:
			return "Infinity"
		case dumps:
			return "-Infinity"
		case f > 0:
			return "inf"
		}
		return "-inf"
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-4 || a >= 1e16) {
		format = 'e'
	}
	out := strconv.FormatFloat(f, format, -1, 64)
	if !strings.ContainsAny(out, ".e") {
		out += ".0"
	}
	return out
}

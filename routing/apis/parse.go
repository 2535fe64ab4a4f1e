package apis

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Parse decodes one JSON value (RFC 8259); trailing data other than whitespace is an error.
// Objects keep their key order (a repeated key keeps its first place and its last value, as
// Python's json does). Strings are unescaped, invalid UTF-8 becomes U+FFFD as encoding/json
// does. Work and memory are linear in len(b); nesting is bounded by maxDepth. A byte-level parser
// rather than encoding/json's token stream: agent requests are hundreds of kilobytes on every
// turn, and the token stream allocates per token.
func Parse(b []byte) (*Value, error) {
	p := &parser{b: b}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, p.errf("data after the top-level value")
	}
	return v, nil
}

type parser struct {
	b []byte
	i int
}

func (p *parser) errf(format string, args ...any) error {
	return fmt.Errorf("JSON at byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) lit(s string) bool {
	if strings.HasPrefix(string(p.b[p.i:min(len(p.b), p.i+len(s))]), s) {
		p.i += len(s)
		return true
	}
	return false
}

func (p *parser) value(depth int) (*Value, error) {
	if depth > maxDepth {
		return nil, p.errf("nesting too deep")
	}
	if p.i >= len(p.b) {
		return nil, p.errf("unexpected end")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		p.i++
		v := &Value{Kind: KindObject, Obj: []Member{}}
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return v, nil
		}
		for {
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return nil, p.errf("expected a key")
			}
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return nil, p.errf("expected ':'")
			}
			p.i++
			p.ws()
			e, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			v.set(k, e)
			p.ws()
			if p.i < len(p.b) && p.b[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.b) && p.b[p.i] == '}' {
				p.i++
				return v, nil
			}
			return nil, p.errf("expected ',' or '}'")
		}
	case c == '[':
		p.i++
		v := &Value{Kind: KindArray, Arr: []*Value{}}
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return v, nil
		}
		for {
			p.ws()
			e, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			v.Arr = append(v.Arr, e)
			p.ws()
			if p.i < len(p.b) && p.b[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.b) && p.b[p.i] == ']' {
				p.i++
				return v, nil
			}
			return nil, p.errf("expected ',' or ']'")
		}
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return &Value{Kind: KindString, Str: s}, nil
	case c == 't':
		if p.lit("true") {
			return &Value{Kind: KindBool, Bool: true}, nil
		}
	case c == 'f':
		if p.lit("false") {
			return &Value{Kind: KindBool}, nil
		}
	case c == 'n':
		if p.lit("null") {
			return &Value{Kind: KindNull}, nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return nil, p.errf("unexpected character %q", p.b[p.i])
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func (p *parser) number() (*Value, error) {
	start, i := p.i, p.i
	if p.b[i] == '-' {
		i++
	}
	switch {
	case i < len(p.b) && p.b[i] == '0':
		i++
	case i < len(p.b) && p.b[i] >= '1' && p.b[i] <= '9':
		i = digits(p.b, i)
	default:
		return nil, p.errf("bad number")
	}
	if i < len(p.b) && p.b[i] == '.' {
		j := digits(p.b, i+1)
		if j == i+1 {
			return nil, p.errf("bad number")
		}
		i = j
	}
	if i < len(p.b) && (p.b[i] == 'e' || p.b[i] == 'E') {
		i++
		if i < len(p.b) && (p.b[i] == '+' || p.b[i] == '-') {
			i++
		}
		j := digits(p.b, i)
		if j == i {
			return nil, p.errf("bad number")
		}
		i = j
	}
	p.i = i
	return &Value{Kind: KindNumber, Str: string(p.b[start:i])}, nil
}

var errBadString = errors.New("bad string")

// str reads a string at p.i (its opening quote).
func (p *parser) str() (string, error) {
	p.i++
	start := p.i
	// fast path: no escapes, valid UTF-8
	for p.i < len(p.b) {
		p.i += plainRun(p.b[p.i:])
		if p.i >= len(p.b) {
			break
		}
		c := p.b[p.i]
		if c == '"' {
			s := p.b[start:p.i]
			p.i++
			if utf8.Valid(s) {
				return string(s), nil
			}
			return strings.ToValidUTF8(string(s), "\uFFFD"), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.errf("control character in a string")
		}
		p.i++
	}
	var sb strings.Builder
	sb.Write(p.b[start:p.i])
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			s := sb.String()
			if !utf8.ValidString(s) {
				s = strings.ToValidUTF8(s, "\uFFFD")
			}
			return s, nil
		case c < 0x20:
			return "", p.errf("control character in a string")
		case c != '\\':
			n := max(plainRun(p.b[p.i:]), 1) // a byte ≥ 0x80 is copied as it is too
			sb.Write(p.b[p.i : p.i+n])
			p.i += n
			continue
		}
		if p.i+1 >= len(p.b) {
			break
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			sb.WriteByte(e)
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.errf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					save := p.i
					p.i += 2
					var ok2 bool
					if r2, ok2 = p.hex4(); !ok2 {
						return "", p.errf("bad \\u escape")
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						sb.WriteRune(d)
						continue
					}
					p.i = save
				}
				sb.WriteRune(utf8.RuneError) // a lone surrogate, as encoding/json
				continue
			}
			sb.WriteRune(r)
		default:
			return "", p.errf("bad escape")
		}
	}
	return "", errBadString
}

func (p *parser) hex4() (rune, bool) {
	if p.i+4 > len(p.b) {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}

package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The vocab and merges of a tokenizer.json are 11 MB for Qwen; decoding them
// with reflection costs most of Load. jsonScanner parses exactly those two
// shapes by hand, without per-entry allocations. encoding/json has already
// validated the whole document when these run (json.RawMessage).

var errSyntax = errors.New("unexpected json")

// jsonScanner walks one JSON value.
type jsonScanner struct {
	b   []byte
	i   int
	tmp []byte // scratch for strings with escapes
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *jsonScanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *jsonScanner) expect(c byte) error {
	if s.peek() != c {
		return fmt.Errorf("%w at offset %d: want %q", errSyntax, s.i, c)
	}
	s.i++
	return nil
}

// str reads a JSON string and returns its decoded bytes, valid until the
// next call.
func (s *jsonScanner) str() ([]byte, error) {
	if err := s.expect('"'); err != nil {
		return nil, err
	}
	start := s.i
	k := bytes.IndexByte(s.b[start:], '"')
	if k < 0 {
		return nil, fmt.Errorf("%w: unterminated string", errSyntax)
	}
	if bytes.IndexByte(s.b[start:start+k], '\\') < 0 {
		s.i = start + k + 1
		return s.b[start : start+k], nil
	}
	// Escapes: find the real closing quote, then let encoding/json decode.
	j := start
	for j < len(s.b) && s.b[j] != '"' {
		if s.b[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(s.b) {
		return nil, fmt.Errorf("%w: unterminated string", errSyntax)
	}
	var v string
	if err := json.Unmarshal(s.b[start-1:j+1], &v); err != nil {
		return nil, err
	}
	s.i = j + 1
	s.tmp = append(s.tmp[:0], v...)
	return s.tmp, nil
}

// uint32 reads a non-negative integer below 2^32.
func (s *jsonScanner) uint32() (uint32, error) {
	s.ws()
	start := s.i
	var v uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		v = v*10 + uint64(s.b[s.i]-'0')
		if v > 1<<32-1 {
			return 0, fmt.Errorf("%w at offset %d: id out of range", errSyntax, start)
		}
		s.i++
	}
	if s.i == start {
		return 0, fmt.Errorf("%w at offset %d: want a non-negative integer id", errSyntax, start)
	}
	return uint32(v), nil
}

// list calls fn for each element of a JSON array (s is at '[').
func (s *jsonScanner) list(fn func() error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		if err := fn(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return fmt.Errorf("%w at offset %d: want ',' or ']'", errSyntax, s.i)
		}
	}
}

// vocabEntry is one "token": id pair; the token text is arena[off:off+n].
type vocabEntry struct {
	off, n int
	id     uint32
}

// parseVocab parses the model.vocab object into a map whose keys share one
// backing string.
func parseVocab(raw []byte) (map[string]uint32, error) {
	s := &jsonScanner{b: raw}
	var arena []byte
	var entries []vocabEntry
	if err := s.expect('{'); err != nil {
		return nil, err
	}
	if s.peek() != '}' {
		for {
			k, err := s.str()
			if err != nil {
				return nil, err
			}
			if err := s.expect(':'); err != nil {
				return nil, err
			}
			id, err := s.uint32()
			if err != nil {
				return nil, err
			}
			entries = append(entries, vocabEntry{off: len(arena), n: len(k), id: id})
			arena = append(arena, k...)
			if s.peek() == ',' {
				s.i++
				continue
			}
			break
		}
	}
	if err := s.expect('}'); err != nil {
		return nil, err
	}
	all := string(arena)
	vocab := make(map[string]uint32, len(entries))
	for _, e := range entries {
		vocab[all[e.off:e.off+e.n]] = e.id // a repeated key: the last wins, as in JSON decoding
	}
	return vocab, nil
}

// parseMerges parses model.merges ("a b" strings or ["a", "b"] arrays) and
// calls fn with the two halves of each merge, in order.
func parseMerges(raw []byte, fn func(a, b []byte) error) error {
	s := &jsonScanner{b: raw}
	var left []byte
	return s.list(func() error {
		switch s.peek() {
		case '"':
			m, err := s.str()
			if err != nil {
				return err
			}
			sp := bytes.IndexByte(m, ' ')
			if sp < 0 || bytes.IndexByte(m[sp+1:], ' ') >= 0 {
				return fmt.Errorf("merge %q is not two space-separated tokens", m)
			}
			return fn(m[:sp], m[sp+1:])
		case '[':
			var parts int
			var right []byte
			err := s.list(func() error {
				p, err := s.str()
				if err != nil {
					return err
				}
				switch parts {
				case 0:
					left = append(left[:0], p...)
				case 1:
					right = p
				}
				parts++
				return nil
			})
			if err != nil {
				return err
			}
			if parts != 2 {
				return fmt.Errorf("merge %d does not have two tokens", parts)
			}
			return fn(left, right)
		default:
			return fmt.Errorf("%w at offset %d: a merge must be a string or an array", errSyntax, s.i)
		}
	})
}

// maxJSONDepth bounds the nesting skipValue accepts.
const maxJSONDepth = 256

// skipValue steps over one JSON value of any kind. It checks the structure
// loosely (literals and numbers are not validated); the parts of the
// document that matter are decoded by encoding/json or parsed strictly.
func (s *jsonScanner) skipValue(depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("%w at offset %d: nested too deeply", errSyntax, s.i)
	}
	switch s.peek() {
	case '{':
		return s.object(func([]byte) error { return s.skipValue(depth + 1) })
	case '[':
		return s.list(func() error { return s.skipValue(depth + 1) })
	case '"':
		_, err := s.str()
		return err
	case 0:
		return fmt.Errorf("%w: unexpected end of input", errSyntax)
	default:
		start := s.i
		for s.i < len(s.b) {
			c := s.b[s.i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '+' || c == '.') {
				break
			}
			s.i++
		}
		if s.i == start {
			return fmt.Errorf("%w at offset %d", errSyntax, s.i)
		}
		return nil
	}
}

// span is the byte range [start, end) of a value in a document.
type span struct{ start, end int }

// splitModelTables finds model.vocab and model.merges in a tokenizer.json
// document and returns their raw values and the document with both replaced
// by null (small enough for encoding/json). A missing table has a zero span.
func splitModelTables(data []byte) (rest []byte, vocab, merges span, err error) {
	s := &jsonScanner{b: data}
	err = s.object(func(key []byte) error {
		if string(key) != "model" || s.peek() != '{' {
			return s.skipValue(1)
		}
		return s.object(func(key []byte) error {
			name := string(key)
			s.ws()
			start := s.i
			if err := s.skipValue(2); err != nil {
				return err
			}
			switch name {
			case "vocab":
				vocab = span{start, s.i}
			case "merges":
				merges = span{start, s.i}
			}
			return nil
		})
	})
	if err != nil {
		return nil, span{}, span{}, err
	}
	if s.peek() != 0 {
		return nil, span{}, span{}, fmt.Errorf("%w at offset %d: data after the document", errSyntax, s.i)
	}
	cuts := []span{vocab, merges}
	if merges.start < vocab.start {
		cuts[0], cuts[1] = merges, vocab
	}
	rest = make([]byte, 0, 4096)
	pos := 0
	for _, c := range cuts {
		if c.end == 0 {
			continue
		}
		rest = append(rest, data[pos:c.start]...)
		rest = append(rest, "null"...)
		pos = c.end
	}
	rest = append(rest, data[pos:]...)
	return rest, vocab, merges, nil
}

// object calls fn for each member of a JSON object (s is at '{'), with s
// positioned at the member's value; fn must consume the value. key is valid
// only until fn reads a string (it may be the scanner's scratch buffer).
func (s *jsonScanner) object(fn func(key []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := fn(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return fmt.Errorf("%w at offset %d: want ',' or '}'", errSyntax, s.i)
		}
	}
}

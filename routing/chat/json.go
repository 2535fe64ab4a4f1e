package chat

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// maxDepth bounds the nesting of JSON values (arrays and objects) the decoder accepts, so a
// hostile body cannot exhaust the stack.
const maxDepth = 512

// kind is the JSON type of a node.
type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k kind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "boolean"
	case kindNumber:
		return "number"
	case kindString:
		return "string"
	case kindArray:
		return "array"
	case kindObject:
		return "object"
	}
	return "unknown"
}

// withArticle is k's name after "a" or "an", as in schema errors ("not an array").
func (k kind) withArticle() string {
	if k == kindArray || k == kindObject {
		return "an " + k.String()
	}
	return "a " + k.String()
}

// node is one decoded JSON value that keeps what encoding/json loses: the order of object
// members (duplicates included), the exact text of numbers, and the byte range [start, end) of
// the value in the source.
type node struct {
	kind       kind
	b          bool // (next to kind: one padded word for both)
	start, end int
	str        string    // decoded string value, or the literal text of a number
	items      []*node   // array elements
	keys       []string  // object member names in source order (duplicates kept)
	vals       []*node   // object member values, parallel to keys
	entry      *msgEntry // a message's MessageCache entry (msgparse.go), else nil
}

// get returns the value of the last member named key (JSON duplicates: last wins, as in
// Python's json and pydantic), or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != kindObject {
		return nil
	}
	for i := len(n.keys) - 1; i >= 0; i-- {
		if n.keys[i] == key {
			return n.vals[i]
		}
	}
	return nil
}

// isNull reports whether n is absent or JSON null.
func (n *node) isNull() bool { return n == nil || n.kind == kindNull }

// errSyntax is wrapped by every decoding error.
var errSyntax = errors.New("invalid JSON")

// decoder is a strict RFC 8259 recursive-descent decoder over a byte slice.
type decoder struct {
	src []byte
	pos int
	// allowNaN accepts NaN, Infinity and -Infinity like Python's json.loads (used for tool call
	// arguments, which vLLM decodes with json.loads).
	allowNaN bool
	// count, when set, counts a request's messages, parts and values as they are decoded and
	// skips the top-level members the router never reads (ParseRequestLimited).
	count *counter
	// msgs, when set, is looked up for each element of messages (msgparse.go).
	msgs *MessageCache
	// items, keys and vals hold the elements and members of the arrays and objects being
	// decoded (a stack: each container's are above its base), so that each container gets its
	// slices at their exact length in one allocation instead of growing them.
	items []*node
	keys  []string
	vals  []*node
	// slab is where newNode takes nodes from (see there).
	slab []node
	// buf is string's scratch: the decoded value of an escaped string is built here, then
	// copied to its own string (reused from string to string).
	buf []byte
}

// parseJSON decodes src, which must hold exactly one JSON value (surrounding whitespace allowed).
func parseJSON(src []byte, allowNaN bool) (*node, error) {
	return decode(&decoder{src: src, allowNaN: allowNaN})
}

// scratch is a decoder's working memory (its stacks and string buffer), reused across bodies.
type scratch struct {
	items []*node
	keys  []string
	vals  []*node
	buf   []byte
}

// scratchPool keeps scratch between parses, so that a parse does not grow its stacks and string
// buffer from nothing (they reach the size of the body's longest string and largest container).
var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledBuf and maxPooledStack are the largest string buffer (bytes) and stack (elements)
// put back in the pool: one huge body does not keep its scratch alive after it.
const (
	maxPooledBuf   = 1 << 20
	maxPooledStack = 1 << 14
)

// decode decodes d.src, which must hold exactly one JSON value.
func decode(d *decoder) (*node, error) {
	s := scratchPool.Get().(*scratch)
	d.items, d.keys, d.vals, d.buf = s.items, s.keys, s.vals, s.buf
	n, err := decodeValue(d)
	if cap(d.buf) <= maxPooledBuf && max(cap(d.items), cap(d.keys), cap(d.vals)) <= maxPooledStack {
		// The stacks are cleared so that the pool keeps no node or key of this body alive.
		s.items, s.keys, s.vals = clearAll(d.items), clearAll(d.keys), clearAll(d.vals)
		s.buf = d.buf[:0]
		scratchPool.Put(s)
	}
	d.items, d.keys, d.vals, d.buf = nil, nil, nil, nil
	return n, err
}

// clearAll zeroes s up to its capacity and returns it empty.
func clearAll[E any](s []E) []E {
	clear(s[:cap(s)])
	return s[:0]
}

// decodeValue decodes d.src, which must hold exactly one JSON value.
func decodeValue(d *decoder) (*node, error) {
	d.skipSpace()
	n, err := d.value(0, roleRoot)
	if err != nil {
		return nil, err
	}
	d.skipSpace()
	if d.pos != len(d.src) {
		return nil, d.errorf("trailing data")
	}
	return n, nil
}

func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", errSyntax, d.pos, fmt.Sprintf(format, args...))
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.src) {
		switch d.src[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) literal(lit string) bool {
	if len(d.src)-d.pos >= len(lit) && string(d.src[d.pos:d.pos+len(lit)]) == lit {
		d.pos += len(lit)
		return true
	}
	return false
}

func (d *decoder) value(depth int, r role) (*node, error) {
	if depth > maxDepth {
		return nil, d.errorf("nesting deeper than %d", maxDepth)
	}
	if d.pos >= len(d.src) {
		return nil, d.errorf("unexpected end of input")
	}
	if err := d.count.value(d.pos); err != nil {
		return nil, err
	}
	start := d.pos
	switch c := d.src[d.pos]; {
	case c == '{':
		return d.object(depth, r)
	case c == '[':
		return d.array(depth, r)
	case c == '"':
		s, err := d.string()
		if err != nil {
			return nil, err
		}
		return d.newNode(node{kind: kindString, start: start, end: d.pos, str: s}), nil
	case c == 't':
		if d.literal("true") {
			return d.newNode(node{kind: kindBool, start: start, end: d.pos, b: true}), nil
		}
	case c == 'f':
		if d.literal("false") {
			return d.newNode(node{kind: kindBool, start: start, end: d.pos}), nil
		}
	case c == 'n':
		if d.literal("null") {
			return d.newNode(node{kind: kindNull, start: start, end: d.pos}), nil
		}
	case c == 'N' && d.allowNaN:
		if d.literal("NaN") {
			return d.newNode(node{kind: kindNumber, start: start, end: d.pos, str: "NaN"}), nil
		}
	case c == 'I' && d.allowNaN:
		if d.literal("Infinity") {
			return d.newNode(node{kind: kindNumber, start: start, end: d.pos, str: "Infinity"}), nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		if c == '-' && d.allowNaN && d.literal("-Infinity") {
			return d.newNode(node{kind: kindNumber, start: start, end: d.pos, str: "-Infinity"}), nil
		}
		if err := d.number(); err != nil {
			return nil, err
		}
		return d.newNode(node{kind: kindNumber, start: start, end: d.pos, str: string(d.src[start:d.pos])}), nil
	}
	return nil, d.errorf("unexpected character %q", d.src[d.pos])
}

// slabMax is the most nodes newNode allocates at once.
const slabMax = 64

// newNode returns a pointer to a copy of n. The nodes of one body are allocated in slabs of up
// to slabMax (4, 8, ..., then 64 at a time), not one by one: a body has hundreds of small
// values, and one allocation per node was a good part of the parse. A node kept after the
// parse keeps its slab alive. Only the MessageCache keeps nodes after the parse (a message's
// node, across requests), so with a cache the nodes of each element of messages are put in
// slabs of their own (array starts a new slab before and after each): a cached message must not
// keep its neighbours' nodes and strings too. (Without a cache the slabs are shared: a
// message's own slabs waste up to half their nodes.)
func (d *decoder) newNode(n node) *node {
	if len(d.slab) == cap(d.slab) {
		d.slab = make([]node, 0, min(slabMax, max(4, 2*cap(d.slab))))
	}
	d.slab = append(d.slab, n)
	return &d.slab[len(d.slab)-1]
}

func (d *decoder) digits() int {
	n := 0
	for d.pos < len(d.src) && d.src[d.pos] >= '0' && d.src[d.pos] <= '9' {
		d.pos++
		n++
	}
	return n
}

func (d *decoder) number() error {
	if d.src[d.pos] == '-' {
		d.pos++
	}
	if d.pos < len(d.src) && d.src[d.pos] == '0' {
		d.pos++
	} else if d.digits() == 0 {
		return d.errorf("invalid number")
	}
	if d.pos < len(d.src) && d.src[d.pos] == '.' {
		d.pos++
		if d.digits() == 0 {
			return d.errorf("invalid number fraction")
		}
	}
	if d.pos < len(d.src) && (d.src[d.pos] == 'e' || d.src[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.src) && (d.src[d.pos] == '+' || d.src[d.pos] == '-') {
			d.pos++
		}
		if d.digits() == 0 {
			return d.errorf("invalid number exponent")
		}
	}
	return nil
}

func (d *decoder) array(depth int, r role) (*node, error) {
	n := d.newNode(node{kind: kindArray, start: d.pos})
	d.pos++
	d.skipSpace()
	if d.pos < len(d.src) && d.src[d.pos] == ']' {
		d.pos++
		n.end = d.pos
		return n, nil
	}
	base := len(d.items) // this array's elements are d.items[base:] until its end
	for {
		d.skipSpace()
		if err := d.count.item(r, d.pos); err != nil {
			return nil, err
		}
		var v *node
		var err error
		if r == roleMessages && d.msgs != nil {
			// A message the cache may keep gets node slabs of its own (see newNode).
			d.slab = nil
			v, err = d.message(depth + 1) // msgparse.go
			d.slab = nil
		} else {
			v, err = d.value(depth+1, r.item())
		}
		if err != nil {
			return nil, err
		}
		d.items = append(d.items, v)
		d.skipSpace()
		if d.pos >= len(d.src) {
			return nil, d.errorf("unterminated array")
		}
		switch d.src[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			n.end = d.pos
			n.items = slices.Clone(d.items[base:]) // one allocation of the exact length
			d.items = d.items[:base]
			return n, nil
		default:
			return nil, d.errorf("expected ',' or ']' in array")
		}
	}
}

func (d *decoder) object(depth int, r role) (*node, error) {
	n := d.newNode(node{kind: kindObject, start: d.pos})
	d.pos++
	d.skipSpace()
	if d.pos < len(d.src) && d.src[d.pos] == '}' {
		d.pos++
		n.end = d.pos
		return n, nil
	}
	base := len(d.keys) // this object's members are d.keys[base:] and d.vals[base:] until its end
	for {
		d.skipSpace()
		if d.pos >= len(d.src) || d.src[d.pos] != '"' {
			return nil, d.errorf("expected object key")
		}
		k, err := d.string()
		if err != nil {
			return nil, err
		}
		d.skipSpace()
		if d.pos >= len(d.src) || d.src[d.pos] != ':' {
			return nil, d.errorf("expected ':' after object key")
		}
		d.pos++
		d.skipSpace()
		if d.count != nil && r == roleRoot && !readMembers[k] {
			if err := d.skip(depth + 1); err != nil {
				return nil, err
			}
		} else {
			v, err := d.value(depth+1, r.member(k))
			if err != nil {
				return nil, err
			}
			d.keys = append(d.keys, k)
			d.vals = append(d.vals, v)
		}
		d.skipSpace()
		if d.pos >= len(d.src) {
			return nil, d.errorf("unterminated object")
		}
		switch d.src[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			n.end = d.pos
			if len(d.keys) > base { // (an object whose members were all skipped keeps nil, as before)
				n.keys, n.vals = slices.Clone(d.keys[base:]), slices.Clone(d.vals[base:])
			}
			d.keys, d.vals = d.keys[:base], d.vals[:base]
			return n, nil
		default:
			return nil, d.errorf("expected ',' or '}' in object")
		}
	}
}

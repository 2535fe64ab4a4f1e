package chat

import (
	"errors"
	"fmt"
)

// ErrTooManyParts is wrapped by ParseRequestLimited when a body has more messages, content parts
// or JSON values than its Limits allow (the handler answers 400 too_many_parts).
var ErrTooManyParts = errors.New("too many parts")

// Default request limits (DESIGN.md §6).
const (
	DefaultMaxMessages = 4096
	DefaultMaxParts    = 8192
	// valuesPerItem is the JSON values allowed per allowed message or part: a message or part
	// has a handful (role, content, type, text, url, tool calls), tools a few hundred in total.
	valuesPerItem = 16
)

// Limits bound the structure of one request, checked while it is decoded so an oversized body
// stops before its tree is built.
type Limits struct {
	// MaxMessages caps the elements of messages; MaxParts the content parts of all messages
	// together (0: no cap).
	MaxMessages, MaxParts int
	// Messages, when set, is the message cache the decoder looks each message up in (the one
	// the template renders with: Template.MessageCache).
	Messages *MessageCache
}

// maxValues is the cap on materialized JSON values: valuesPerItem per allowed message and part
// (196 608 with the defaults). The tree costs ~150 bytes per value, so this bounds a request's
// tree at ~30 MB whatever its shape.
func (l Limits) maxValues() int { return valuesPerItem * (l.MaxMessages + l.MaxParts) }

// readMembers are the top-level request members the router reads (request.go fill: every
// optionalMembers entry, tools, prompt, messages). With Limits, the others are checked for JSON
// syntax and skipped without building their values. It is derived from optionalMembers so that a
// member added there is never skipped here (add_special_tokens once was).
var readMembers = func() map[string]bool {
	m := map[string]bool{"tools": true, "prompt": true, "messages": true}
	for _, o := range optionalMembers {
		m[o.name] = true
	}
	return m
}()

// ParseRequestLimited is ParseRequest under lim: a body over a limit fails with an error
// wrapping ErrTooManyParts as soon as the decoder reaches the first element over it, and
// top-level members the router does not read are validated but not kept.
func ParseRequestLimited(body []byte, lim Limits) (*Request, error) {
	c := &counter{lim: lim, maxValues: lim.maxValues()}
	if lim.MaxMessages <= 0 || lim.MaxParts <= 0 {
		c.maxValues = 0
	}
	return parseRequest(body, &decoder{src: body, count: c, msgs: lim.Messages})
}

// role is where a value sits in a chat request, as far as the limits care.
type role uint8

const (
	roleOther    role = iota
	roleRoot          // the top-level object
	roleMessages      // the messages array
	roleMessage       // one message object
	roleContent       // a message's content array
)

// item is the role of an element of an array in role r.
func (r role) item() role {
	if r == roleMessages {
		return roleMessage
	}
	return roleOther
}

// member is the role of the value of member k of an object in role r.
func (r role) member(k string) role {
	switch {
	case r == roleRoot && k == "messages":
		return roleMessages
	case r == roleMessage && k == "content":
		return roleContent
	}
	return roleOther
}

// counter counts messages, parts and values while a request is decoded. A nil counter counts
// nothing.
type counter struct {
	lim                     Limits
	maxValues               int
	messages, parts, values int
}

// item counts one array element of role r starting at byte pos.
func (c *counter) item(r role, pos int) error {
	if c == nil {
		return nil
	}
	switch r {
	case roleMessages:
		if c.messages++; c.lim.MaxMessages > 0 && c.messages > c.lim.MaxMessages {
			return fmt.Errorf("%w: more than %d messages (at byte %d)", ErrTooManyParts, c.lim.MaxMessages, pos)
		}
	case roleContent:
		if c.parts++; c.lim.MaxParts > 0 && c.parts > c.lim.MaxParts {
			return fmt.Errorf("%w: more than %d content parts (at byte %d)", ErrTooManyParts, c.lim.MaxParts, pos)
		}
	}
	return nil
}

// value counts one decoded value starting at byte pos.
func (c *counter) value(pos int) error {
	if c == nil {
		return nil
	}
	if c.values++; c.maxValues > 0 && c.values > c.maxValues {
		return fmt.Errorf("%w: more than %d JSON values (at byte %d)", ErrTooManyParts, c.maxValues, pos)
	}
	return nil
}

// skip checks the JSON syntax of one value (as value does: strict RFC 8259, maxDepth) and moves
// past it without building it.
func (d *decoder) skip(depth int) error {
	if depth > maxDepth {
		return d.errorf("nesting deeper than %d", maxDepth)
	}
	if d.pos >= len(d.src) {
		return d.errorf("unexpected end of input")
	}
	switch c := d.src[d.pos]; {
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		d.pos++
		d.skipSpace()
		if d.pos < len(d.src) && d.src[d.pos] == closer {
			d.pos++
			return nil
		}
		for {
			d.skipSpace()
			if c == '{' {
				if d.pos >= len(d.src) || d.src[d.pos] != '"' {
					return d.errorf("expected object key")
				}
				if err := d.skipString(); err != nil {
					return err
				}
				d.skipSpace()
				if d.pos >= len(d.src) || d.src[d.pos] != ':' {
					return d.errorf("expected ':' after object key")
				}
				d.pos++
				d.skipSpace()
			}
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			d.skipSpace()
			if d.pos >= len(d.src) {
				return d.errorf("unterminated container")
			}
			switch d.src[d.pos] {
			case ',':
				d.pos++
			case closer:
				d.pos++
				return nil
			default:
				return d.errorf("expected ',' or %q", closer)
			}
		}
	case c == '"':
		return d.skipString()
	case c == 't':
		if d.literal("true") {
			return nil
		}
	case c == 'f':
		if d.literal("false") {
			return nil
		}
	case c == 'n':
		if d.literal("null") {
			return nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return d.errorf("unexpected character %q", d.src[d.pos])
}

// skipString moves past a JSON string with the checks string makes (escapes as encoding/json
// accepts them, no control characters), without decoding it.
func (d *decoder) skipString() error {
	d.pos++
	for d.pos < len(d.src) {
		c := d.src[d.pos]
		switch {
		case c == '"':
			d.pos++
			return nil
		case c == '\\':
			if d.pos+1 >= len(d.src) {
				return d.errorf("unterminated string")
			}
			switch d.src[d.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.pos += 2
			case 'u':
				if d.pos+6 > len(d.src) {
					return d.errorf("unterminated string")
				}
				for _, h := range d.src[d.pos+2 : d.pos+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return d.errorf("invalid \\u escape")
					}
				}
				d.pos += 6
			default:
				return d.errorf("invalid escape")
			}
		case c < 0x20:
			return d.errorf("control character in string")
		default:
			d.pos++
		}
	}
	return d.errorf("unterminated string")
}

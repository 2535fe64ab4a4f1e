package chat

import "bytes"

// message decodes one element of messages through the decoder's MessageCache. It finds the
// element's end with objectEnd (a scan for the closing brace that steps over strings without
// decoding or checking them), hashes the bytes and looks them up: an entry with a decoded node
// is the node, because those exact bytes decoded to it before (decoding an element of
// messages depends on nothing but its bytes: same role, same depth), and so were valid JSON.
// Anything else decodes the element as before, and a message decoded here is stored for the
// next request. The cost of a hit is the scan and the hash, about 1/20 of decoding the text.
//
// A message whose content is a list is stored without its node: its media parts carry byte
// offsets into the body they came in (MediaPart.ObjStart), which differ in the next body.
func (d *decoder) message(depth int) (*node, error) {
	start := d.pos
	end, ok := objectEnd(d.src, start)
	if !ok {
		return d.value(depth, roleMessage) // not an object, or unterminated: decode says what is wrong
	}
	raw := d.src[start:end]
	key := messageKey(raw)
	e, hit := d.msgs.get(key, len(raw))
	if hit && e.Val.node != nil && d.count.addCached(e.Val) {
		d.pos = end
		return e.Val.node, nil
	}
	var parts0, values0 int
	if d.count != nil {
		parts0, values0 = d.count.parts, d.count.values
	}
	n, err := d.value(depth, roleMessage)
	if err != nil || n.end != end { // n.end differs only if objectEnd misread malformed text
		return n, err
	}
	if hit {
		n.entry = e // the entry's converted values serve this node too (Render)
		return n, nil
	}
	e = newMsgEntry(key, len(raw))
	if d.count != nil {
		e.Val.parts, e.Val.values = d.count.parts-parts0, d.count.values-values0
	}
	if c := n.get("content"); c == nil || c.kind != kindArray {
		e.Val.node = n // charged for the nodes the decoder just counted (put)
	}
	n.entry = e
	if stored := d.msgs.put(e); stored != e {
		n.entry = stored // a concurrent request stored the same message first
	}
	return n, nil
}

// addCached counts a cached message's parts and values, or reports false (counting nothing)
// when they would pass a limit: the caller then decodes the message, which fails at the same
// element and byte as without the cache.
func (c *counter) addCached(e *msgData) bool {
	if c == nil {
		return true
	}
	if c.lim.MaxParts > 0 && c.parts+e.parts > c.lim.MaxParts || c.maxValues > 0 && c.values+e.values > c.maxValues {
		return false
	}
	c.parts += e.parts
	c.values += e.values
	return true
}

// objectEnd returns the index just past the JSON object that starts at src[i] ('{'), found by
// bracket depth with strings stepped over (bytes.IndexByte for the closing quote, which is one
// preceded by an even number of backslashes). It decodes and checks nothing else; ok is false
// when src[i] is not '{' or the object does not close. O(len): every byte is passed once,
// except the backslashes just before a quote, which are counted back once.
func objectEnd(src []byte, i int) (end int, ok bool) {
	if i >= len(src) || src[i] != '{' {
		return 0, false
	}
	depth := 0
	for i < len(src) {
		switch src[i] {
		case '"':
			j := i + 1
			for {
				k := bytes.IndexByte(src[j:], '"')
				if k < 0 {
					return 0, false
				}
				j += k
				b := 0
				for p := j - 1; p > i && src[p] == '\\'; p-- {
					b++
				}
				if b%2 == 0 {
					break
				}
				j++
			}
			i = j + 1
		case '{', '[':
			depth++
			i++
		case '}', ']':
			depth--
			i++
			if depth == 0 {
				return i, true
			}
		default:
			i++
		}
	}
	return 0, false
}

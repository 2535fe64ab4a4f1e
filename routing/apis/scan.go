package apis

import "bytes"

// The converter's view of a request body (convert.go): the top-level object's members decoded as
// Parse decodes them, except the one list of items (Responses `input`, Messages `messages`),
// whose elements are only delimited, so that an element seen in an earlier turn is looked up by
// its bytes instead of decoded again.

// topLevel is a body split for the converter: req holds every top-level member but the list
// (decoded by Parse's rules: key order, a repeated key keeps its first place and its last
// value); items are the list's elements as they appear in the body; list reports whether the
// body had the list as a JSON array.
type topLevel struct {
	req   *Value
	items [][]byte
	list  bool
}

// scanTop splits body into its top-level members and the elements of the array member listKey.
// ok is false when the converter must take the full path instead: the body is not one JSON
// object, listKey is repeated or is not an array, or an element is not an object. An element's
// bytes are delimited by a scan that steps over strings and are not checked here: the caller
// parses each element it has not seen (parseItem), and an element it has seen parsed before.
func scanTop(body []byte, listKey string) (top topLevel, ok bool) {
	p := &parser{b: body}
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return top, false
	}
	p.i++
	top.req = &Value{Kind: KindObject, Obj: []Member{}}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return top, p.end()
	}
	for {
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return top, false
		}
		k, err := p.str()
		if err != nil {
			return top, false
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return top, false
		}
		p.i++
		p.ws()
		if k == listKey {
			if top.list || !p.elements(&top.items) {
				return top, false
			}
			top.list = true
			top.req.set(k, &Value{Kind: KindArray, Arr: []*Value{}}) // its place and kind for the checks
		} else {
			e, err := p.value(1)
			if err != nil {
				return top, false
			}
			top.req.set(k, e)
		}
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return top, p.end()
		}
		return top, false
	}
}

// end reports whether only whitespace follows.
func (p *parser) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// elements delimits the objects of the array at p.i, appending each one's bytes to out.
func (p *parser) elements(out *[][]byte) bool {
	if p.i >= len(p.b) || p.b[p.i] != '[' {
		return false
	}
	p.i++
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return true
	}
	for {
		p.ws()
		start := p.i
		if !p.skipObject() {
			return false
		}
		*out = append(*out, p.b[start:p.i])
		p.ws()
		if p.i < len(p.b) && p.b[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return true
		}
		return false
	}
}

// skipObject moves p.i past the object at p.i: braces and brackets counted outside strings, a
// string ending at the first quote not escaped. Valid JSON is delimited exactly; invalid JSON
// gives some span that parseItem then refuses.
func (p *parser) skipObject() bool {
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return false
	}
	depth := 0
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '{', '[':
			depth++
			if depth > maxDepth {
				return false
			}
		case '}', ']':
			depth--
			if depth == 0 {
				p.i++
				return true
			}
		case '"':
			if !p.skipString() {
				return false
			}
			continue
		}
		p.i++
	}
	return false
}

// skipString moves p.i past the string whose opening quote is at p.i: the first quote after it
// preceded by an even number of backslashes ends it (bytes.IndexByte finds the quotes: an item is
// mostly long strings).
func (p *parser) skipString() bool {
	start := p.i + 1
	for i := start; ; {
		j := bytes.IndexByte(p.b[i:], '"')
		if j < 0 {
			return false
		}
		i += j
		k := i
		for k > start && p.b[k-1] == '\\' {
			k--
		}
		if (i-k)%2 == 0 {
			p.i = i + 1
			return true
		}
		i++
	}
}

// parseItem decodes one element of the top-level list as Parse decodes it inside the body
// (depth 2: the body object, then the list).
func parseItem(b []byte) (*Value, error) {
	p := &parser{b: b}
	v, err := p.value(2)
	if err != nil {
		return nil, err
	}
	if p.i != len(p.b) {
		return nil, p.errf("data after the item")
	}
	return v, nil
}

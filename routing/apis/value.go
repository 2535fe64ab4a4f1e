package apis

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// Value is one JSON value that keeps the key order of its objects: vLLM's conversions copy
// client objects (a tool's input_schema, a tool_use input) into the chat form, and a template that
// `tojson`s them, or Python's json.dumps of them, shows the client's order.
type Value struct {
	Kind Kind
	Str  string // KindString; KindNumber: the number's text as sent
	Bool bool
	Arr  []*Value
	Obj  []Member
}

// Member is one key of an object, in order.
type Member struct {
	Key string
	Val *Value
}

// Kind is a JSON value's type.
type Kind uint8

const (
	KindNull Kind = iota
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

// maxDepth bounds the nesting of a decoded body (the chat parser has the same kind of bound).
const maxDepth = 256

// Constructors.

func Null() *Value                { return &Value{Kind: KindNull} }
func Str(s string) *Value         { return &Value{Kind: KindString, Str: s} }
func Bool(b bool) *Value          { return &Value{Kind: KindBool, Bool: b} }
func Arr(vs ...*Value) *Value     { return &Value{Kind: KindArray, Arr: append([]*Value{}, vs...)} }
func Obj(kv ...Member) *Value     { return &Value{Kind: KindObject, Obj: append([]Member{}, kv...)} }
func M(k string, v *Value) Member { return Member{Key: k, Val: v} }

// Get returns an object's member, nil when absent or when v is not an object.
func (v *Value) Get(k string) *Value {
	if v == nil || v.Kind != KindObject {
		return nil
	}
	for i := range v.Obj {
		if v.Obj[i].Key == k {
			return v.Obj[i].Val
		}
	}
	return nil
}

// Has reports whether an object has the key (a null value included).
func (v *Value) Has(k string) bool { return v.Get(k) != nil }

// set replaces a key's value in place or appends it.
func (v *Value) set(k string, e *Value) {
	for i := range v.Obj {
		if v.Obj[i].Key == k {
			v.Obj[i].Val = e
			return
		}
	}
	v.Obj = append(v.Obj, Member{k, e})
}

// Set is set for an object value.
func (v *Value) Set(k string, e *Value) { v.set(k, e) }

// IsNull reports a JSON null or an absent value.
func (v *Value) IsNull() bool { return v == nil || v.Kind == KindNull }

// IsStr reports a string.
func (v *Value) IsStr() bool { return v != nil && v.Kind == KindString }

// IsArr reports an array.
func (v *Value) IsArr() bool { return v != nil && v.Kind == KindArray }

// IsObj reports an object.
func (v *Value) IsObj() bool { return v != nil && v.Kind == KindObject }

// StrOr returns the string, or def when v is not a string.
func (v *Value) StrOr(def string) string {
	if v.IsStr() {
		return v.Str
	}
	return def
}

// Truthy is Python's bool() of the value (what `if x:` tests in vLLM's code).
func (v *Value) Truthy() bool {
	if v == nil {
		return false
	}
	switch v.Kind {
	case KindBool:
		return v.Bool
	case KindNumber:
		f, err := strconv.ParseFloat(v.Str, 64)
		return err != nil || f != 0
	case KindString:
		return v.Str != ""
	case KindArray:
		return len(v.Arr) > 0
	case KindObject:
		return len(v.Obj) > 0
	}
	return false
}

// Clone is a deep copy.
func (v *Value) Clone() *Value {
	if v == nil {
		return nil
	}
	c := *v
	if v.Arr != nil {
		c.Arr = make([]*Value, len(v.Arr))
		for i, e := range v.Arr {
			c.Arr[i] = e.Clone()
		}
	}
	if v.Obj != nil {
		c.Obj = make([]Member, len(v.Obj))
		for i, m := range v.Obj {
			c.Obj[i] = Member{m.Key, m.Val.Clone()}
		}
	}
	return &c
}

// MarshalJSON writes compact JSON with the keys in order (the chat body kvroute renders).
func (v *Value) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	v.write(&b)
	return b.Bytes(), nil
}

func (v *Value) write(b *bytes.Buffer) {
	if v == nil {
		b.WriteString("null")
		return
	}
	switch v.Kind {
	case KindNull:
		b.WriteString("null")
	case KindBool:
		b.WriteString(strconv.FormatBool(v.Bool))
	case KindNumber:
		b.WriteString(v.Str)
	case KindString:
		writeGoString(b, v.Str)
	case KindArray:
		b.WriteByte('[')
		for i, e := range v.Arr {
			if i > 0 {
				b.WriteByte(',')
			}
			e.write(b)
		}
		b.WriteByte(']')
	case KindObject:
		b.WriteByte('{')
		for i, m := range v.Obj {
			if i > 0 {
				b.WriteByte(',')
			}
			writeGoString(b, m.Key)
			b.WriteByte(':')
			m.Val.write(b)
		}
		b.WriteByte('}')
	}
}

// writeGoString writes s as a JSON string: quote, backslash and control characters escaped
// (and U+2028, U+2029, as encoding/json does); s is valid UTF-8 (Parse made it so).
func writeGoString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		i += plainRun(s[i:])
		if i >= len(s) {
			break
		}
		c := s[i]
		if c >= 0x80 {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == '\u2028' || r == '\u2029' {
				b.WriteString(s[start:i])
				b.WriteString(`\u202`)
				b.WriteByte(hex[r&0xf])
				i += n
				start = i
				continue
			}
			i += n
			continue
		}
		b.WriteString(s[start:i])
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
		i++
		start = i
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

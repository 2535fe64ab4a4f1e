package chat

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/kvroute/kvroute/internal/jinja"
)

// bigMark brackets the decimal text of an integer outside int64 while it travels through the
// template engine as a string (the engine has no big integer type). After rendering, every
// bracketed run is replaced by the bare digits, and a JSON-quoted one ("<mark>digits<mark>", as
// tojson writes a string) by the bare digits too, which is what Python's json.dumps and str()
// print for an int. U+10FFFD is a private-use code point; a request that carries it in a string
// and also has a big integer is refused (errReservedRune) rather than rendered wrongly.
const bigMark = "\U0010FFFD"

// errReservedRune is returned when a request both needs big-integer marking and contains the
// marker code point itself.
var errReservedRune = errors.New("request text contains U+10FFFD together with an integer beyond 64 bits")

// converter turns decoded JSON into jinja values with Python's json.loads semantics: objects
// keep member order (a duplicate key keeps its first position and takes the last value), int
// and float stay distinct, floats out of range become ±Inf, integers beyond int64 keep their
// exact digits (marked with bigMark).
type converter struct {
	big     bool // a big integer was marked
	sawMark bool // an input string contains bigMark
	// strBytes and strs are the length and the number of the strings converted: the bulk of a
	// rendered prompt, which sizes the engine's output buffer (renderSize).
	strBytes, strs int
	// recorded is the text the template engine holds recorded for the cached messages (their
	// replays, which a render in pieces does not copy: renderPieces sizes its buffer without it).
	recorded int
	// vals is the number of JSON values converted (the message cache charges them).
	vals int
}

// add counts what converting another value counted (a cached conversion).
func (c *converter) add(o *converter) {
	c.big = c.big || o.big
	c.sawMark = c.sawMark || o.sawMark
	c.strBytes += o.strBytes
	c.strs += o.strs
	c.vals += o.vals
}

func (c *converter) str(s string) jinja.Value {
	if strings.Contains(s, bigMark) {
		c.sawMark = true
	}
	c.strBytes += len(s)
	c.strs++
	return jinja.NewString(s)
}

func (c *converter) value(n *node) jinja.Value {
	if n == nil {
		return jinja.Undefined()
	}
	c.vals++
	switch n.kind {
	case kindNull:
		return jinja.None()
	case kindBool:
		return jinja.NewBool(n.b)
	case kindString:
		return c.str(n.str)
	case kindNumber:
		return c.number(n.str)
	case kindArray:
		items := make([]jinja.Value, len(n.items))
		for i, it := range n.items {
			items[i] = c.value(it)
		}
		return jinja.NewList(items)
	case kindObject:
		d := jinja.NewDict()
		dict := d.AsDict()
		for i, k := range n.keys {
			dict.Set(k, c.value(n.vals[i]))
		}
		return d
	}
	return jinja.Undefined()
}

// number converts JSON number text like Python's json.loads: text with '.', 'e' or 'E' is a
// float (overflow → ±Inf), other text an int (beyond int64: exact digits, marked).
func (c *converter) number(text string) jinja.Value {
	switch text {
	case "NaN":
		return jinja.NewFloat(math.NaN())
	case "Infinity":
		return jinja.NewFloat(math.Inf(1))
	case "-Infinity":
		return jinja.NewFloat(math.Inf(-1))
	}
	if strings.ContainsAny(text, ".eE") {
		f, _ := strconv.ParseFloat(text, 64) // a range error still yields ±Inf or ±0, as Python does
		return jinja.NewFloat(f)
	}
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		return jinja.NewInt(i)
	}
	c.big = true
	return jinja.NewString(bigMark + normalizeInt(text) + bigMark)
}

// normalizeInt returns the decimal text Python prints for a JSON integer ("-0" → "0").
func normalizeInt(text string) string {
	if text == "-0" {
		return "0"
	}
	return text
}

// restoreBigInts replaces marked big integers in rendered output by their digits.
func restoreBigInts(out string) string {
	var sb strings.Builder
	sb.Grow(len(out))
	for {
		i := strings.Index(out, bigMark)
		if i < 0 {
			sb.WriteString(out)
			return sb.String()
		}
		rest := out[i+len(bigMark):]
		j := strings.Index(rest, bigMark)
		if j < 0 || !isIntText(rest[:j]) {
			sb.WriteString(out[:i+len(bigMark)])
			out = rest
			continue
		}
		digits := rest[:j]
		after := rest[j+len(bigMark):]
		before := out[:i]
		// tojson wrote the marked string with quotes: drop them.
		if strings.HasSuffix(before, `"`) && strings.HasPrefix(after, `"`) {
			before = before[:len(before)-1]
			after = after[1:]
		}
		sb.WriteString(before)
		sb.WriteString(digits)
		out = after
	}
}

func isIntText(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

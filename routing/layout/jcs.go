package layout

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Canonical returns the RFC 8785 (JCS) canonical JSON of c with every v1 field present (absent
// optional fields written as null): object keys sorted by UTF-16 code units, no whitespace,
// numbers in ECMAScript form (2 and 2.0 both "2"), strings escaped as JSON.stringify does.
func (c *Contract) Canonical() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encoding contract: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decoding contract: %w", err)
	}
	if m, ok := v.(map[string]any); ok && c.Adapter == AdapterNemotronOmni {
		// The Qwen-only fields are null in a nemotron_omni contract; its own fields are always present.
		for _, k := range []string{"resize", "image_resize", "placeholder_target", "timestamp_tokenization", "sglang_preprocess"} {
			m[k] = nil
		}
		if _, ok := m["nemotron"]; !ok {
			m["nemotron"] = nil
		}
		if s, ok := m["sampler"].(map[string]any); ok {
			if _, ok := s["max_duration"]; !ok {
				s["max_duration"] = nil
			}
		}
	}
	var buf bytes.Buffer
	if err := writeJCS(&buf, v); err != nil {
		return nil, fmt.Errorf("canonicalizing contract: %w", err)
	}
	return buf.Bytes(), nil
}

// Digest is the contract digest of DESIGN.md §2.3: lowercase hex SHA-256 of Canonical().
func (c *Contract) Digest() (string, error) {
	b, err := c.Canonical()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// CanonicalJSON returns the RFC 8785 canonical form of any JSON document (numbers as float64).
func CanonicalJSON(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decoding json: %w", err)
	}
	var buf bytes.Buffer
	if err := writeJCS(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeJCS(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return fmt.Errorf("parsing number %s: %w", x, err)
		}
		s, err := ES6Number(f)
		if err != nil {
			return err
		}
		buf.WriteString(s)
	case string:
		writeJCSString(buf, x)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJCS(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return lessUTF16(keys[i], keys[j]) })
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJCSString(buf, k)
			buf.WriteByte(':')
			if err := writeJCS(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("unexpected JSON value of type %T", v)
	}
	return nil
}

func lessUTF16(a, b string) bool {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

func writeJCSString(buf *bytes.Buffer, s string) {
	const hexDigits = "0123456789abcdef"
	buf.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			buf.WriteString(`\"`)
		case '\\':
			buf.WriteString(`\\`)
		case '\b':
			buf.WriteString(`\b`)
		case '\f':
			buf.WriteString(`\f`)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		default:
			if r < 0x20 {
				buf.WriteString(`\u00`)
				buf.WriteByte(hexDigits[r>>4])
				buf.WriteByte(hexDigits[r&0xf])
			} else {
				buf.WriteRune(r)
			}
		}
	}
	buf.WriteByte('"')
}

// ES6Number formats x as ECMAScript's Number.prototype.toString does (RFC 8785 §3.2.2.3): the
// shortest round-trip digits, integers up to 1e21 without exponent, "1e+21", "1e-7", -0 as "0".
// NaN and infinities are errors.
func ES6Number(x float64) (string, error) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "", fmt.Errorf("number %v has no JSON form", x)
	}
	if x == 0 {
		return "0", nil
	}
	sign := ""
	if x < 0 {
		sign, x = "-", -x
	}
	e := strconv.FormatFloat(x, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	k, n := len(digits), exp+1
	var s string
	switch {
	case k <= n && n <= 21:
		s = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		s = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		s = "0." + strings.Repeat("0", -n) + digits
	default:
		s = digits[:1]
		if k > 1 {
			s += "." + digits[1:]
		}
		es := "+"
		if n-1 < 0 {
			es = "-"
		}
		s += "e" + es + strconv.Itoa(int(math.Abs(float64(n-1))))
	}
	return sign + s, nil
}

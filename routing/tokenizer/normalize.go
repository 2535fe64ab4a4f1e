package tokenizer

import (
	"fmt"
	"strings"
)

// normalizer rewrites one segment of text between added tokens, as a Hugging
// Face normalizer does (tokenizers/src/normalizers, 0.23).
type normalizer func(string) string

// normJSON is a tokenizer.json normalizer.
type normJSON struct {
	Type        string       `json:"type"`
	Normalizers []normJSON   `json:"normalizers"`
	Pattern     *patternJSON `json:"pattern"`
	Content     string       `json:"content"`
	Prepend     string       `json:"prepend"`
}

// patternJSON is a Split or Replace pattern: exactly one of Regex, String.
type patternJSON struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

// buildNormalizer returns the normalizer of n (nil for none or an identity),
// whether it is exactly NFC (the Qwen shape), or ErrUnsupported naming the
// type it does not implement. Implemented: NFC (Unicode 9.0.0 data, as
// Hugging Face), Replace (String or Regex pattern, every match replaced by
// content), Prepend (on non-empty text), Sequence of these.
func buildNormalizer(n *normJSON) (normalizer, error) {
	if n == nil {
		return nil, nil
	}
	switch n.Type {
	case "NFC":
		return nfc, nil
	case "Sequence":
		var fns []normalizer
		for i := range n.Normalizers {
			fn, err := buildNormalizer(&n.Normalizers[i])
			if err != nil {
				return nil, err
			}
			if fn != nil {
				fns = append(fns, fn)
			}
		}
		switch len(fns) {
		case 0:
			return nil, nil
		case 1:
			return fns[0], nil
		}
		return func(s string) string {
			for _, fn := range fns {
				s = fn(s)
			}
			return s
		}, nil
	case "Replace":
		content := n.Content
		switch {
		case n.Pattern != nil && n.Pattern.String != nil:
			old := *n.Pattern.String
			if old == "" {
				return nil, nil // HF: an empty pattern matches nothing
			}
			return func(s string) string { return strings.ReplaceAll(s, old, content) }, nil
		case n.Pattern != nil && n.Pattern.Regex != nil:
			re, err := compileRegex(*n.Pattern.Regex)
			if err != nil {
				return nil, fmt.Errorf("checking normalizer Replace: %w", err)
			}
			return func(s string) string { return replaceRegex(re, s, content) }, nil
		}
		return nil, fmt.Errorf("checking normalizer Replace: %w: no pattern", ErrUnsupported)
	case "Prepend":
		p := n.Prepend
		return func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		}, nil
	}
	return nil, fmt.Errorf("checking normalizer: %w: type %q (implemented: NFC, Replace, Prepend, Sequence, null)", ErrUnsupported, n.Type)
}

// replaceRegex replaces every match of re in s by content (HF Replace with a
// Regex pattern: content is literal, no group references).
func replaceRegex(re *splitRegex, s, content string) string {
	var b strings.Builder
	prev := 0
	re.each(s, func(start, end int) {
		b.WriteString(s[prev:start])
		b.WriteString(content)
		prev = end
	})
	if prev == 0 && b.Len() == 0 {
		return s
	}
	b.WriteString(s[prev:])
	return b.String()
}

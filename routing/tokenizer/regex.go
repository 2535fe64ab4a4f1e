package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// splitRegex is a tokenizer.json regex (a Split pattern or a Replace
// normalizer's pattern) on the general path. Hugging Face compiles these with
// Oniguruma (Ruby syntax, Unicode 16.0.0 tables); regexp2 (github.com/dlclark/
// regexp2/v2, .NET syntax: backtracking, look-around, alternatives tried in
// order, \s = Unicode White_Space, \p{..} from Go's tables) agrees on every
// construct checkPortable admits. Code points newer than Unicode 16.0.0 are
// masked before matching (asUnicode16), so they are \p{Cn} as in Oniguruma.
type splitRegex struct {
	re *regexp2.Regexp
}

// compileRegex compiles a tokenizer.json regex, or fails with ErrUnsupported
// when the pattern uses a construct whose meaning differs between Oniguruma
// and regexp2 or that regexp2 rejects.
func compileRegex(pattern string) (*splitRegex, error) {
	if err := checkPortable(pattern); err != nil {
		return nil, fmt.Errorf("%w: regex %q: %v", ErrUnsupported, pattern, err)
	}
	re, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("%w: regex %q: %v", ErrUnsupported, pattern, err)
	}
	initNewer()
	return &splitRegex{re: re}, nil
}

// each calls fn with the [start, end) byte offsets of the successive
// non-overlapping matches in s, leftmost first (Oniguruma's find_iter; an
// empty match advances by one character). Matches are streamed: memory is
// regexp2's rune copy of s, not a list of matches.
func (r *splitRegex) each(s string, fn func(start, end int)) {
	s16 := asUnicode16(s)
	m, err := r.re.FindStringMatch(s16)
	// regexp2 reports rune offsets; walk them to byte offsets (matches
	// only move forward). Invalid UTF-8 bytes are one rune each, as in
	// regexp2's decoding.
	bytePos, runePos := 0, 0
	toByte := func(runeIdx int) int {
		for runePos < runeIdx {
			_, n := utf8.DecodeRuneInString(s16[bytePos:])
			bytePos += n
			runePos++
		}
		return bytePos
	}
	for ; m != nil && err == nil; m, err = r.re.FindNextMatch(m) {
		start := toByte(m.RuneIndex)
		fn(start, toByte(m.RuneIndex+m.RuneLength))
	}
	if err != nil {
		// Only a match timeout returns an error, and none is set.
		panic(fmt.Sprintf("tokenizer: regexp2 without timeout failed: %v", err))
	}
}

// matches returns the [start, end) byte offsets of every match in s.
func (r *splitRegex) matches(s string) [][]int {
	var out [][]int
	r.each(s, func(a, b int) { out = append(out, []int{a, b}) })
	return out
}

// checkPortable rejects regex constructs that mean something else in
// Oniguruma's Ruby syntax than in regexp2's .NET syntax: ^ and $ (line
// anchors in Ruby, string anchors in .NET), \w \W \b \B (the word class
// differs in marks and numbers), POSIX brackets [[:alpha:]] (no such syntax
// in .NET), nested classes and && (set operations in Oniguruma, literals in
// .NET), possessive quantifiers, \h \H \R \X \K \G \Z (Oniguruma-only or
// differing escapes). Everything else either
// means the same or fails to compile in regexp2.
func checkPortable(p string) error {
	inClass := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '+' && inClass == 0 && endsQuantifier(p[:i]) {
			return fmt.Errorf("possessive quantifier at offset %d", i)
		}
		switch {
		case c == '\\' && i+1 < len(p):
			i++
			switch p[i] {
			case 'w', 'W', 'b', 'B', 'h', 'H', 'R', 'X', 'K', 'G', 'Z':
				return fmt.Errorf("escape \\%c differs between Oniguruma and regexp2", p[i])
			}
		case c == '[' && inClass > 0:
			return fmt.Errorf("nested character class at offset %d (a set operation in Oniguruma, a literal in .NET)", i)
		case c == '&' && inClass > 0 && i+1 < len(p) && p[i+1] == '&':
			return fmt.Errorf("class intersection && at offset %d", i)
		case c == '[':
			if i+1 < len(p) && p[i+1] == ':' {
				return fmt.Errorf("POSIX bracket at offset %d", i)
			}
			inClass++
			if i+1 < len(p) && p[i+1] == '^' {
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' { // a leading ] is a literal
				i++
			}
		case c == ']' && inClass > 0:
			inClass--
		case (c == '^' || c == '$') && inClass == 0:
			return fmt.Errorf("anchor %c at offset %d (line anchor in Oniguruma)", c, i)
		}
	}
	return nil
}

// endsQuantifier reports whether p ends with an unescaped quantifier: + * ?
// or a counted repetition {n}, {n,}, {n,m} (not the braces of \p{..}).
func endsQuantifier(p string) bool {
	if p == "" {
		return false
	}
	switch c := p[len(p)-1]; c {
	case '+', '*', '?':
		n := 0 // count the backslashes before c
		for k := len(p) - 2; k >= 0 && p[k] == '\\'; k-- {
			n++
		}
		return n%2 == 0 && (c != '?' || len(p) < 2 || p[len(p)-2] != '(')
	case '}':
		open := strings.LastIndexByte(p, '{')
		if open < 0 {
			return false
		}
		body := p[open+1 : len(p)-1]
		return body != "" && strings.Trim(body, "0123456789,") == "" && body[0] != ','
	}
	return false
}

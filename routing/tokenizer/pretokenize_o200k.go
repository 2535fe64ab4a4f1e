package tokenizer

import (
	"sync"
	"unicode"
)

// o200kSplitRegex is gpt-oss's split pattern (OpenAI's o200k_base), the
// fast path of nextPreTokenO200k.
const o200kSplitRegex = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// Case classes of o200kSplitRegex: U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}],
// W = [\p{Ll}\p{Lm}\p{Lo}\p{M}] (Lm, Lo and marks are in both).
const (
	caseU uint8 = 1 << 0
	caseW uint8 = 1 << 1
)

var (
	caseOnce sync.Once
	bmpCase  *[0x10000]uint8
)

// slowCase computes the U/W classes of r under the Unicode 16 policy of
// classOf (a letter or mark assigned in Unicode 17.0 is in neither).
func slowCase(r rune) uint8 {
	c := classOf(r)
	switch {
	case c&clsMark != 0:
		return caseU | caseW
	case c&clsLetter == 0:
		return 0
	case unicode.IsUpper(r) || unicode.IsTitle(r):
		return caseU
	case unicode.IsLower(r):
		return caseW
	}
	return caseU | caseW // Lm, Lo
}

// initCases builds the BMP case table (64 KiB). Load calls it for a
// tokenizer on this fast path.
func initCases() {
	initClasses()
	caseOnce.Do(func() {
		t := new([0x10000]uint8)
		for r := rune(0); r < 0x10000; r++ {
			t[r] = slowCase(r)
		}
		bmpCase = t
	})
}

func caseOf(r rune) uint8 {
	if r < 0x10000 {
		return bmpCase[r]
	}
	return slowCase(r)
}

// nextPreTokenO200k returns the end of the pre-token that starts at s[i]
// (i < len(s)): the match at i of o200kSplitRegex, alternatives tried in
// order as a backtracking engine does (TestScannerMatchesRegex checks it
// against regexp2). Cost is linear in the pre-token length plus, for
// whitespace, the length of the whitespace run.
func nextPreTokenO200k(s string, i int) int {
	r, n := decodeAt(s, i)
	c := classOf(r)
	j := i + n
	// [^\r\n\p{L}\p{N}]? : a mark, space or punctuation may prefix a word.
	prefix := c&(clsLetter|clsNumber|clsCRLF) == 0 && j < len(s)
	// Alternative 1: prefix? U* W+ contraction?
	if prefix {
		if e := matchUW(s, j); e > 0 {
			return withContraction(s, e)
		}
	}
	if e := matchUW(s, i); e > 0 {
		return withContraction(s, e)
	}
	// Alternative 2: prefix? U+ W* contraction?
	if prefix {
		if e := matchUplusW(s, j); e > 0 {
			return withContraction(s, e)
		}
	}
	if e := matchUplusW(s, i); e > 0 {
		return withContraction(s, e)
	}
	// \p{N}{1,3}
	if c&clsNumber != 0 {
		for k := 1; k < 3 && j < len(s); k++ {
			r2, n2 := decodeAt(s, j)
			if classOf(r2)&clsNumber == 0 {
				break
			}
			j += n2
		}
		return j
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n/]*
	const notOther = clsLetter | clsNumber | clsSpace
	if c&notOther == 0 {
		return breaksAndSlashes(s, scanOthers(s, j, notOther))
	}
	if r == ' ' && j < len(s) {
		r2, n2 := decodeAt(s, j)
		if classOf(r2)&notOther == 0 {
			return breaksAndSlashes(s, scanOthers(s, j+n2, notOther))
		}
	}
	return whitespaceEnd(s, i)
}

// breaksAndSlashes returns the end of [\r\n/]* at s[j] (scanOthers has
// taken the line breaks that directly follow the run; a '/' after them
// belongs to the pre-token too).
func breaksAndSlashes(s string, j int) int {
	for j < len(s) && (s[j] == '\r' || s[j] == '\n' || s[j] == '/') {
		j++
	}
	return j
}

// matchUW returns the end of U*W+ at s[p:], or 0: U* takes the longest run
// of U; if a W-only letter (\p{Ll}) follows, W+ takes the run of W from
// there; otherwise U* backs off to the last character of its run that is
// also in W.
func matchUW(s string, p int) int {
	lastW := 0
	k := p
	for k < len(s) {
		r, n := decodeAt(s, k)
		cc := caseOf(r)
		if cc&caseU == 0 {
			break
		}
		k += n
		if cc&caseW != 0 {
			lastW = k
		}
	}
	if k < len(s) {
		if r, _ := decodeAt(s, k); caseOf(r)&caseW != 0 {
			return scanCase(s, k, caseW)
		}
	}
	return lastW
}

// matchUplusW returns the end of U+W* at s[p:], or 0.
func matchUplusW(s string, p int) int {
	r, _ := decodeAt(s, p)
	if caseOf(r)&caseU == 0 {
		return 0
	}
	return scanCase(s, scanCase(s, p, caseU), caseW)
}

// scanCase returns the end of the run of characters in class cc from s[k].
func scanCase(s string, k int, cc uint8) int {
	for k < len(s) {
		r, n := decodeAt(s, k)
		if caseOf(r)&cc == 0 {
			break
		}
		k += n
	}
	return k
}

// withContraction extends a word ending at e by (?i:'s|'t|'re|'ve|'m|'ll|'d).
func withContraction(s string, e int) int {
	if e < len(s) && s[e] == '\'' {
		if k := contractionLen(s, e+1); k > 0 {
			return e + 1 + k
		}
	}
	return e
}

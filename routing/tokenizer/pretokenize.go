package tokenizer

import (
	"math/bits"
	"sort"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Character classes of the pre-tokenizer regex, as bit flags.
const (
	clsOther  uint8 = 0      // none of the classes below
	clsLetter uint8 = 1 << 0 // \p{L} (Unicode 16.0.0)
	clsNumber uint8 = 1 << 1 // \p{N} (Unicode 16.0.0)
	clsSpace  uint8 = 1 << 2 // \s: Unicode White_Space
	clsCRLF   uint8 = 1 << 3 // '\r' or '\n' (always with clsSpace)
	clsMark   uint8 = 1 << 4 // \p{M} (Unicode 16.0.0)
	clsPunct  uint8 = 1 << 5 // \p{P} (Unicode 16.0.0)
	clsSymbol uint8 = 1 << 6 // \p{S} (Unicode 16.0.0)

	// clsNonASCII marks the bytes 0x80–0xFF in asciiClass: the start or continuation of a
	// multi-byte character (or an invalid byte), whose class needs decodeAt and classOf. No
	// pattern mask contains it.
	clsNonASCII uint8 = 1 << 7
)

// asciiClass is classOf of every ASCII byte, and clsNonASCII for the other byte values: the
// scanners' loops over ASCII text classify a byte with one table load instead of decodeAt and
// classOf (the same classes, built from slowClass at init; ASCII's categories are the same in
// every Unicode version, TestASCIIClass checks the table against classOf).
var asciiClass = func() (t [256]uint8) {
	for b := range 256 {
		if b < utf8.RuneSelf {
			t[b] = slowClass(rune(b))
		} else {
			t[b] = clsNonASCII
		}
	}
	return t
}()

// classRange assigns the Unicode 16.0.0 class cls to the runes lo..hi.
type classRange struct {
	lo, hi rune
	cls    uint8
}

var (
	bmpOnce  sync.Once
	bmpClass *[0x10000]uint8 // class of every BMP rune, built once by initClasses
)

// initClasses builds the BMP class table (64 KiB, a few ms). Load calls it.
func initClasses() {
	bmpOnce.Do(func() {
		t := new([0x10000]uint8)
		for r := rune(0); r < 0x10000; r++ {
			t[r] = slowClass(r)
		}
		bmpClass = t
	})
}

// slowClass computes the class of r from Go's unicode tables corrected by
// unicode16Overrides (see the package doc's Unicode policy).
func slowClass(r rune) uint8 {
	var c uint8
	switch {
	case unicode.IsLetter(r):
		c = clsLetter
	case unicode.IsNumber(r):
		c = clsNumber
	case unicode.Is(unicode.White_Space, r):
		c = clsSpace
		if r == '\r' || r == '\n' {
			c |= clsCRLF
		}
	case unicode.IsMark(r) && assignedIn16(r):
		c = clsMark
	case unicode.IsPunct(r) && assignedIn16(r):
		c = clsPunct
	case unicode.IsSymbol(r) && assignedIn16(r):
		c = clsSymbol
	}
	if c&(clsLetter|clsNumber) != 0 {
		ov := unicode16Overrides
		i := sort.Search(len(ov), func(i int) bool { return ov[i].hi >= r })
		if i < len(ov) && ov[i].lo <= r {
			c = ov[i].cls
		}
	}
	return c
}

// classOf returns the class of r. initClasses must have run.
func classOf(r rune) uint8 {
	if r < 0x10000 {
		return bmpClass[r]
	}
	return slowClass(r)
}

// decodeAt decodes the rune at s[i] (i < len(s)). Invalid UTF-8 yields
// utf8.RuneError with width 1, which classifies as clsOther.
func decodeAt(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// contractionLen returns the length of the contraction suffix
// (?i:s|t|re|ve|m|ll|d) at s[i:] (after an apostrophe), or 0. Case folding
// is Oniguruma's Unicode simple folding: ASCII letters and U+017F LATIN
// SMALL LETTER LONG S, which folds to 's' (Oniguruma's test_utf8.c:
// x2("(?i)s", "\xc5\xbf", 0, 2)); no other code point folds to one of
// these letters (U+212A KELVIN SIGN folds to 'k', U+0130 to "i̇"). regexp2
// folds the same way, which TestScannerMatchesRegex checks.
func contractionLen(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	switch s[i] | 0x20 {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if i+1 < len(s) && s[i+1]|0x20 == 'e' {
			return 2
		}
	case 'l':
		if i+1 < len(s) && s[i+1]|0x20 == 'l' {
			return 2
		}
	case 0xC5 | 0x20: // U+017F is C5 BF
		if s[i] == 0xC5 && i+1 < len(s) && s[i+1] == 0xBF {
			return 2
		}
	}
	return 0
}

// nextPreToken returns the end of the pre-token that starts at s[i]
// (i < len(s)): the match at i of a Qwen-style split regex, alternatives
// tried in order as a backtracking engine does. letters selects the word
// class: clsLetter for Qwen2/Qwen3 and Llama 3 (\p{L}+), clsLetter|clsMark
// for Qwen3.5 ([\p{L}\p{M}]+, and marks leave the punctuation class).
// digits is the longest run of \p{N} one pre-token takes: 1 for Qwen
// (\p{N}), 3 for Llama 3 (\p{N}{1,3}). Every position matches one
// alternative, so pre-tokens tile the segment. Cost is linear in the
// pre-token length plus, for whitespace, the length of the whitespace run.
func nextPreToken(s string, i int, letters uint8, digits int) int {
	// The two commonest starts in prose, decided from asciiClass alone; each is the case of
	// the general code below that it would reach (an ASCII letter or a space is not '\'', so
	// the contraction alternative fails first):
	//   "word": \p{L}+ from the first letter on;
	//   " word": [^\r\n\p{L}\p{N}]?\p{L}+ with the space as its optional character.
	if c := asciiClass[s[i]]; c&letters != 0 {
		return scanLetters(s, i+1, letters)
	} else if s[i] == ' ' && i+1 < len(s) && asciiClass[s[i+1]]&letters != 0 {
		return scanLetters(s, i+2, letters)
	}
	r, n := decodeAt(s, i)
	c := classOf(r)
	j := i + n
	// Not \s, not a letter (or mark, for Qwen3.5), not \p{N}.
	notOther := letters | clsNumber | clsSpace
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' {
		if k := contractionLen(s, j); k > 0 {
			return j + k
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+   (Qwen3.5: [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+)
	if c&letters != 0 {
		return scanLetters(s, j, letters)
	}
	if c&(clsLetter|clsNumber|clsCRLF) == 0 && j < len(s) {
		r2, n2 := decodeAt(s, j)
		if classOf(r2)&letters != 0 {
			return scanLetters(s, j+n2, letters)
		}
	}
	// \p{N}   (Llama 3: \p{N}{1,3})
	if c&clsNumber != 0 {
		for k := 1; k < digits && j < len(s); k++ {
			r2, n2 := decodeAt(s, j)
			if classOf(r2)&clsNumber == 0 {
				break
			}
			j += n2
		}
		return j
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*   (Qwen3.5: ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*)
	if c&notOther == 0 {
		return scanOthers(s, j, notOther)
	}
	if r == ' ' && j < len(s) {
		r2, n2 := decodeAt(s, j)
		if classOf(r2)&notOther == 0 {
			return scanOthers(s, j+n2, notOther)
		}
	}
	return whitespaceEnd(s, i)
}

// whitespaceEnd returns the end of \s*[\r\n]+|\s+(?!\S)|\s+ at s[i], a
// whitespace character.
func whitespaceEnd(s string, i int) int {
	// Find the maximal whitespace run s[i:end], its last '\r'/'\n' and
	// the start of its last rune.
	end, lastNL, lastStart := i, -1, i
	for k := i; k < len(s); {
		rk, nk := decodeAt(s, k)
		ck := classOf(rk)
		if ck&clsSpace == 0 {
			break
		}
		if ck&clsCRLF != 0 {
			lastNL = k
		}
		lastStart = k
		k += nk
		end = k
	}
	// \s*[\r\n]+ : the greedy \s* backs off to the last line break.
	if lastNL >= 0 {
		return lastNL + 1
	}
	// \s+(?!\S) : the whole run at the end of the text, otherwise all but its
	// last character (which is followed by whitespace, not \S).
	if end == len(s) || lastStart == i {
		// \s+ when the run is a single character followed by \S.
		return end
	}
	return lastStart
}

// scanLetters returns the end of the run of letters (classes in mask)
// starting at s[j].
func scanLetters(s string, j int, mask uint8) int {
	for j < len(s) {
		j = asciiLettersEnd(s, j) // the ASCII letters are in every letters mask
		if j == len(s) || s[j] < utf8.RuneSelf {
			break // the end, or an ASCII byte that is not a letter
		}
		r, n := utf8.DecodeRuneInString(s[j:])
		if classOf(r)&mask == 0 {
			break
		}
		j += n
	}
	return j
}

// asciiLettersEnd returns the end of the run of ASCII letters [A-Za-z] starting at s[j] (j when
// s[j] is none), eight bytes at a time. Among ASCII bytes these are exactly the \p{L} ones (and
// none is \p{M}), so for ASCII text the run is the one the loop "while asciiClass[b] & letters"
// finds for either letters mask (TestASCIILettersEnd).
func asciiLettersEnd(s string, j int) int {
	for j+8 <= len(s) {
		x := le64(s, j)
		// Per byte: y = b|0x20 folds A–Z onto a–z and maps no other byte into a–z; h = y&0x7F.
		// Adding 0x1F (0x80-'a') to h sets its top bit iff h >= 'a', adding 0x05 (0x80-'z'-1)
		// iff h > 'z'; seven-bit values plus these never carry into the next byte. A letter is
		// h in a..z with y's own top bit clear (an ASCII byte).
		y := x | 0x2020202020202020
		h := y & 0x7f7f7f7f7f7f7f7f
		letter := (h + 0x1f1f1f1f1f1f1f1f) &^ (h + 0x0505050505050505) &^ y & 0x8080808080808080
		if other := ^letter & 0x8080808080808080; other != 0 {
			return j + bits.TrailingZeros64(other)/8
		}
		j += 8
	}
	for j < len(s) && isASCIILetter(s[j]) {
		j++
	}
	return j
}

// scanOthers returns the end of [^\s\p{L}\p{N}]*[\r\n]* starting at s[j]
// (notOther: the classes that end the run).
func scanOthers(s string, j int, notOther uint8) int {
	for j < len(s) {
		c := asciiClass[s[j]]
		if c != clsNonASCII {
			if c&notOther != 0 {
				break
			}
			j++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[j:])
		if classOf(r)&notOther != 0 {
			break
		}
		j += n
	}
	for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
		j++
	}
	return j
}

package tokenizer

// DeepSeek-V3's pre-tokenizer: a Sequence of three Splits (Isolated, not
// inverted) and ByteLevel. The third pattern holds literal CR and LF
// characters inside its classes, as the tokenizer.json does.
const (
	deepseekDigitsRegex = `\p{N}{1,3}`
	deepseekCJKRegex    = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	deepseekWordRegex   = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

// deepseekPreTokens calls emit with the pre-tokens of s under DeepSeek-V3's
// three Splits, as the general path would produce them (each Split keeps
// the text between its matches as pieces too): runs of \p{N} cut into
// groups of at most three, then runs of the CJK ranges, then
// deepseekWordRegex within each remaining piece (TestScannerMatchesRegex
// checks the composition against regexp2).
func deepseekPreTokens(s string, emit func(string)) {
	// Split 1: \p{N}{1,3}.
	gap := 0
	for i := 0; i < len(s); {
		r, n := decodeAt(s, i)
		if classOf(r)&clsNumber == 0 {
			i += n
			continue
		}
		deepseekCJK(s[gap:i], emit)
		j := i + n
		for k := 1; k < 3 && j < len(s); k++ {
			r2, n2 := decodeAt(s, j)
			if classOf(r2)&clsNumber == 0 {
				break
			}
			j += n2
		}
		deepseekCJK(s[i:j], emit)
		i, gap = j, j
	}
	deepseekCJK(s[gap:], emit)
}

// inDeepseekCJK reports U+4E00–U+9FA5, U+3040–U+309F, U+30A0–U+30FF.
func inDeepseekCJK(r rune) bool {
	return r >= 0x4E00 && r <= 0x9FA5 || r >= 0x3040 && r <= 0x30FF
}

// deepseekCJK is Split 2 on one piece of Split 1.
func deepseekCJK(s string, emit func(string)) {
	gap := 0
	for i := 0; i < len(s); {
		r, n := decodeAt(s, i)
		if !inDeepseekCJK(r) {
			i += n
			continue
		}
		deepseekWords(s[gap:i], emit)
		j := i + n
		for j < len(s) {
			r2, n2 := decodeAt(s, j)
			if !inDeepseekCJK(r2) {
				break
			}
			j += n2
		}
		deepseekWords(s[i:j], emit)
		i, gap = j, j
	}
	deepseekWords(s[gap:], emit)
}

// deepseekWords is Split 3 on one piece of Split 2: each match of
// deepseekWordRegex, and each run of characters where no alternative
// matches, is a pre-token.
func deepseekWords(s string, emit func(string)) {
	gap := 0
	for i := 0; i < len(s); {
		end := deepseekWordAt(s, i)
		if end < 0 {
			_, n := decodeAt(s, i)
			i += n
			continue
		}
		if gap < i {
			emit(s[gap:i])
		}
		emit(s[i:end])
		i, gap = end, end
	}
	if gap < len(s) {
		emit(s[gap:])
	}
}

// isASCIIPunct reports [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~].
func isASCIIPunct(b byte) bool {
	return b >= '!' && b <= '/' || b >= ':' && b <= '@' || b >= '[' && b <= '`' || b >= '{' && b <= '~'
}

func isASCIILetter(b byte) bool { return b|0x20 >= 'a' && b|0x20 <= 'z' }

// deepseekWordAt returns the end of the match of deepseekWordRegex at s[i],
// alternatives tried in order, or -1 when none matches there.
func deepseekWordAt(s string, i int) int {
	// [!"#…~][A-Za-z]+
	if isASCIIPunct(s[i]) && i+1 < len(s) && isASCIILetter(s[i+1]) {
		j := i + 2
		for j < len(s) && isASCIILetter(s[j]) {
			j++
		}
		return j
	}
	r, n := decodeAt(s, i)
	c := classOf(r)
	j := i + n
	const letterMark = clsLetter | clsMark
	// [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
	if c&(clsLetter|clsPunct|clsSymbol|clsCRLF) == 0 && j < len(s) {
		if r2, n2 := decodeAt(s, j); classOf(r2)&letterMark != 0 {
			return scanLetters(s, j+n2, letterMark)
		}
	}
	if c&letterMark != 0 {
		return scanLetters(s, j, letterMark)
	}
	//  ?[\p{P}\p{S}]+[\r\n]*
	const punctSymbol = clsPunct | clsSymbol
	if c&punctSymbol != 0 {
		return scanPunct(s, j)
	}
	if r == ' ' && j < len(s) {
		if r2, n2 := decodeAt(s, j); classOf(r2)&punctSymbol != 0 {
			return scanPunct(s, j+n2)
		}
	}
	if c&clsSpace != 0 {
		return whitespaceEnd(s, i)
	}
	return -1
}

// scanPunct returns the end of [\p{P}\p{S}]*[\r\n]* at s[j].
func scanPunct(s string, j int) int {
	for j < len(s) {
		r, n := decodeAt(s, j)
		if classOf(r)&(clsPunct|clsSymbol) == 0 {
			break
		}
		j += n
	}
	for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
		j++
	}
	return j
}

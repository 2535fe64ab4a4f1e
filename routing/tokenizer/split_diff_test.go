package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// splitAtoms are the characters the scanner distinguishes: letters (ASCII,
// Latin-1, CJK, Unicode 16 and 17 additions), marks, numbers (ASCII, other
// scripts, Nl/No), White_Space (with CR/LF, NBSP, U+3000, NEL), apostrophes
// and contraction letters, punctuation, symbols, emoji, format characters
// and invalid UTF-8.
var splitAtoms = []string{
	"a", "b", "s", "t", "re", "ve", "m", "ll", "d", "S", "LL", "é", "ß", "İ", "ſ", "K", "A", "Z", "É",
	"ǅ", "ʰ", "ー", "ª", "ᾈ",
	"中", "ก", "\U000105C0", "\U0002EBF0", "\U000323B0", "\uA7CE",
	"\u0301", "\u0E31", "\u093C", "\u05B0", "\u20DD", "\uFE0F", "\u1ACF",
	"0", "7", "٣", "\u00b2", "\u2167", "\U00010D40", "\U00011DE0",
	" ", " ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u0085", "\u2028", "\u200b",
	"'", "’", "!", ".", ",", "-", "_", "/", "$", "😀", "\u200d", "\ufeff", "\xff",
}

// randomSplitText is a seeded random concatenation of splitAtoms.
func randomSplitText(rng *rand.Rand) string {
	var b strings.Builder
	for n := rng.IntN(24); n >= 0; n-- {
		b.WriteString(splitAtoms[rng.IntN(len(splitAtoms))])
	}
	return b.String()
}

// scannerCuts returns the pre-token ends of the hand-written scanner.
// (letters 0: the o200k scanner).
func scannerCuts(s string, letters uint8, digits int) []int {
	var cuts []int
	for i := 0; i < len(s); {
		if letters == 0 {
			i = nextPreTokenO200k(s, i)
		} else {
			i = nextPreToken(s, i, letters, digits)
		}
		cuts = append(cuts, i)
	}
	return cuts
}

// TestScannerMatchesRegex: on 20 000 seeded random texts per pattern, the
// scanner cuts exactly where regexp2 (the general path, with the Unicode 16
// mask) cuts: the Qwen2/3, Qwen3.5, Llama 3 and o200k (gpt-oss) patterns. Invalid UTF-8 is
// left out (regexp2 sees U+FFFD there, Hugging Face never sees it).
func TestScannerMatchesRegex(t *testing.T) {
	initClasses()
	n := 20_000
	if raceEnabled {
		n = 3_000
	}
	initCases()
	for _, p := range []struct {
		name    string
		pattern string
		letters uint8
		digits  int
	}{
		{"qwen3", qwenSplitRegex, clsLetter, 1},
		{"qwen35", qwen35SplitRegex, clsLetter | clsMark, 1},
		{"llama3", llama3SplitRegex, clsLetter, 3},
		{"o200k", o200kSplitRegex, 0, 0},
	} {
		t.Run(p.name, func(t *testing.T) {
			re, err := compileRegex(p.pattern)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(20261201, uint64(len(p.name))))
			bad := 0
			for i := 0; i < n; i++ {
				s := strings.ToValidUTF8(randomSplitText(rng), "")
				if s == "" {
					continue
				}
				var want []int
				end := 0
				(&splitStage{re: re, behavior: behIsolated}).split(piece{s: s}, func(pc piece) {
					end += len(pc.s)
					want = append(want, end)
				})
				if got := scannerCuts(s, p.letters, p.digits); !slices.Equal(got, want) {
					if bad++; bad <= 10 {
						t.Errorf("%+q: scanner cuts %v, regex %v", s, got, want)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d texts differ", bad, n)
			}
		})
	}
}

// TestDeepseekScannerMatchesRegex: the DeepSeek-V3 scanner's pre-tokens
// equal the general path's three regexp2 Splits on seeded random text (with
// digits, the CJK ranges and their neighbours, ASCII punctuation before
// letters).
func TestDeepseekScannerMatchesRegex(t *testing.T) {
	initClasses()
	stages, _, err := buildStages(deepseekPreTokJSON())
	if err != nil {
		t.Fatal(err)
	}
	extra := []string{"12", "345", "٣٤", "一", "龥", "龦", "ぁ", "ア", "ヿ", "㄀", "ゟ", "'A", "-x", "[z", "`q", "é", "©", "±", "\x00", "\x1f"}
	atoms := append(append([]string{}, splitAtoms...), extra...)
	rng := rand.New(rand.NewPCG(3, 20261201))
	n := 20_000
	if raceEnabled {
		n = 3_000
	}
	for i := 0; i < n; i++ {
		var b strings.Builder
		for k := rng.IntN(24); k >= 0; k-- {
			b.WriteString(atoms[rng.IntN(len(atoms))])
		}
		s := strings.ToValidUTF8(b.String(), "")
		var want, got []string
		emit := make([]func(piece), len(stages)+1)
		emit[len(stages)] = func(p piece) { want = append(want, p.s) }
		for k := len(stages) - 1; k >= 0; k-- {
			st, next := stages[k], emit[k+1]
			emit[k] = func(p piece) { st.split(p, next) }
		}
		emit[0](piece{s: s})
		deepseekPreTokens(s, func(w string) { got = append(got, w) })
		if !slices.Equal(got, want) {
			t.Fatalf("%+q: scanner %q, regex %q", s, got, want)
		}
	}
}

// TestGeneralSplitInvalidUTF8: on random text with invalid UTF-8 bytes
// (regexp2 reads each as one U+FFFD, the scanners as one RuneError, both
// punctuation-like) regexp2's rune offsets map back to the same byte cuts
// as the scanners make.
func TestGeneralSplitInvalidUTF8(t *testing.T) {
	initCases()
	rng := rand.New(rand.NewPCG(7, 7))
	for _, p := range []struct {
		pattern string
		letters uint8
	}{{qwenSplitRegex, clsLetter}, {o200kSplitRegex, 0}} {
		re, err := compileRegex(p.pattern)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2000; i++ {
			s := randomSplitText(rng) + "\xc5" + randomSplitText(rng) + "\xe4\xb8" + randomSplitText(rng) + "\xff"
			var want []int
			end := 0
			(&splitStage{re: re, behavior: behIsolated}).split(piece{s: s}, func(pc piece) {
				end += len(pc.s)
				want = append(want, end)
			})
			if got := scannerCuts(s, p.letters, 1); !slices.Equal(got, want) {
				t.Fatalf("%+q: scanner cuts %v, regex %v", s, got, want)
			}
		}
	}
}

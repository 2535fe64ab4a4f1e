package tokenizer

import (
	"slices"
	"testing"
)

// generalTwin loads path a second time and forces the general path: the
// split regex runs through regexp2 (compileRegex) instead of the scanner.
func generalTwin(t testing.TB, path, pattern string) *Tokenizer {
	t.Helper()
	tok, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	re, err := compileRegex(pattern)
	if err != nil {
		t.Fatal(err)
	}
	tok.fast, tok.fastO200k, tok.fastDeepseek = 0, false, false
	tok.stages = []stage{&splitStage{re: re, behavior: behIsolated}}
	return tok
}

// TestGeneralPathMatchesGoldens: the general path (regexp2 with the Unicode
// 16 mask) reproduces the Qwen, Llama 3 and gpt-oss goldens that the
// scanners pass, including
// the Unicode 15.1/16/17 letters of tokenizer_unicode_skew.jsonl; so regexp2
// agrees with Oniguruma on the constructs these patterns use.
func TestGeneralPathMatchesGoldens(t *testing.T) {
	t.Parallel() // independent: its own tokenizers or the lock-guarded shared ones
	t.Run("qwen3", func(t *testing.T) {
		tok := generalTwin(t, testModelPath, qwenSplitRegex)
		cases := append(corpusCases(t, "tokenizer_corpus.jsonl"), corpusCases(t, "tokenizer_unicode_skew.jsonl")...)
		checkCases(t, tok, append(cases, tokensCases(t)...))
	})
	t.Run("qwen35", func(t *testing.T) {
		loadFamily(t, "qwen35_pretok") // fails when make deps has not run
		tok := generalTwin(t, familyDir+"qwen35_pretok/tokenizer.json", qwen35SplitRegex)
		checkCases(t, tok, familyCases(t, "qwen35_pretok"))
	})
	t.Run("llama3", func(t *testing.T) {
		loadFamily(t, "llama3")
		tok := generalTwin(t, familyDir+"llama3/tokenizer.json", llama3SplitRegex)
		checkCases(t, tok, familyCases(t, "llama3"))
	})
	t.Run("deepseek_v3", func(t *testing.T) {
		tok := loadFamily(t, "deepseek_v3")
		gen, err := Load(familyDir + "deepseek_v3/tokenizer.json")
		if err != nil {
			t.Fatal(err)
		}
		gen.fastDeepseek = false
		if gen.stages, _, err = buildStages(deepseekPreTokJSON()); err != nil {
			t.Fatal(err)
		}
		if !tok.fastDeepseek || len(gen.stages) != 3 {
			t.Fatalf("fast %v, general stages %d", tok.fastDeepseek, len(gen.stages))
		}
		checkCases(t, gen, familyCases(t, "deepseek_v3"))
	})
	t.Run("gptoss", func(t *testing.T) {
		loadFamily(t, "gptoss")
		tok := generalTwin(t, familyDir+"gptoss/tokenizer.json", o200kSplitRegex)
		checkCases(t, tok, familyCases(t, "gptoss"))
	})
}

// TestRegexUnicode16: code points assigned in Unicode 17.0 are \p{Cn} on
// the general path, as in Hugging Face's Oniguruma, while Unicode 15.1/16.0
// letters stay letters.
func TestRegexUnicode16(t *testing.T) {
	re, err := compileRegex(`[\p{L}\p{M}]+`)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		text string
		want [][]int
	}{
		{"ab\U000323B0cd", [][]int{{0, 2}, {6, 8}}}, // CJK Ext-J (17.0) splits the word
		{"a\u1ACFb", [][]int{{0, 1}, {4, 5}}},       // combining mark U+1ACF (17.0)
		{"a\u0301b", [][]int{{0, 4}}},               // combining acute (1.1)
		{"x\U0002EBF0\U000105C0", [][]int{{0, 9}}},  // CJK Ext-I (15.1), Todhri (16.0)
		{"\uA7CEz", [][]int{{3, 4}}},                // Latin Extended-D (17.0)
	}
	for _, c := range cases {
		if got := re.matches(c.text); !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("matches(%+q) = %v, want %v", c.text, got, c.want)
		}
	}
	if s := "plain ascii and é"; asUnicode16(s) != s {
		t.Error("asUnicode16 changed text without Unicode 17 code points")
	}
	initClasses()
	for _, c := range []struct {
		r    rune
		want uint8
	}{{'\u0301', clsMark}, {'\u0E31', clsMark}, {'\u093C', clsMark}, {0x1ACF, clsOther}} {
		if got := classOf(c.r); got != c.want {
			t.Errorf("classOf(%U) = %d, want %d", c.r, got, c.want)
		}
	}
}

// TestSplitBehaviors: the five delimiter behaviors on the example of Hugging
// Face's SplitDelimiterBehavior documentation ("the-final--countdown" split
// on "-"), and on delimiters at the ends (worked out from HF's folds in
// NormalizedString::split).
func TestSplitBehaviors(t *testing.T) {
	want := map[string]map[string][]string{
		"the-final--countdown": {
			"Removed":            {"the", "final", "countdown"},
			"Isolated":           {"the", "-", "final", "-", "-", "countdown"},
			"MergedWithPrevious": {"the-", "final-", "-", "countdown"},
			"MergedWithNext":     {"the", "-final", "-", "-countdown"},
			"Contiguous":         {"the", "-", "final", "--", "countdown"},
		},
		"-a-": {
			"Removed":            {"a"},
			"Isolated":           {"-", "a", "-"},
			"MergedWithPrevious": {"-", "a-"},
			"MergedWithNext":     {"-a", "-"},
			"Contiguous":         {"-", "a", "-"},
		},
		"--a": {
			"Removed":            {"a"},
			"Isolated":           {"-", "-", "a"},
			"MergedWithPrevious": {"-", "-", "a"},
			"MergedWithNext":     {"-", "-a"},
			"Contiguous":         {"--", "a"},
		},
	}
	re, err := compileRegex(`-`)
	if err != nil {
		t.Fatal(err)
	}
	for text, byBehavior := range want {
		for name, w := range byBehavior {
			for _, st := range []*splitStage{{lit: "-", behavior: behaviors[name]}, {re: re, behavior: behaviors[name]}} {
				var got []string
				st.split(piece{s: text}, func(p piece) { got = append(got, p.s) })
				if !slices.Equal(got, w) {
					t.Errorf("%q %s (regex %v): %q, want %q", text, name, st.re != nil, got, w)
				}
			}
		}
	}
}

// deepseekPreTokJSON is DeepSeek-V3's pre_tokenizer.
func deepseekPreTokJSON() *preTokJSON {
	f, no := false, false
	split := func(re string) preTokJSON {
		return preTokJSON{Type: "Split", Pattern: &patternJSON{Regex: &re}, Behavior: "Isolated"}
	}
	return &preTokJSON{Type: "Sequence", PreTokenizers: []preTokJSON{
		split(deepseekDigitsRegex), split(deepseekCJKRegex), split(deepseekWordRegex),
		{Type: "ByteLevel", AddPrefixSpace: &f, UseRegex: &no},
	}}
}

// charDoc is a character-level (byte fallback) tokenizer.json with a
// Metaspace pre-tokenizer: <0x00>..<0xFF> are ids 0..255, "▁" 256, "a" 257,
// "b" 258, "▁a" 259, "ab" 260; merges "▁ a", "a b".
func charDoc(scheme string, split bool) func(doc map[string]any) {
	return func(doc map[string]any) {
		vocab := map[string]any{}
		for b := 0; b < 256; b++ {
			vocab["<0x"+hex2(b)+">"] = b
		}
		vocab["▁"], vocab["a"], vocab["b"], vocab["▁a"], vocab["ab"] = 256, 257, 258, 259, 260
		m := doc["model"].(map[string]any)
		m["vocab"], m["merges"], m["byte_fallback"] = vocab, []any{"▁ a", "a b"}, true
		doc["normalizer"] = nil
		doc["decoder"] = map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"}}}
		doc["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}
	}
}

func hex2(b int) string {
	const digits = "0123456789ABCDEF"
	return string([]byte{digits[b>>4], digits[b&15]})
}

// TestMetaspaceByteFallback: Metaspace's prepend schemes and split, and byte
// fallback for characters outside the vocabulary (HF BPE merge_word).
func TestMetaspaceByteFallback(t *testing.T) {
	cases := []struct {
		scheme string
		split  bool
		text   string
		want   []uint32
	}{
		// "▁ab▁ab" cut before each ▁: "▁ab" = ▁a + b (no "▁a b" merge).
		{"always", true, "ab ab", []uint32{259, 258, 259, 258}},
		// Without split one word: ▁a, b, ▁a, b as well (merges stay inside).
		{"always", false, "ab ab", []uint32{259, 258, 259, 258}},
		{"never", true, "ab ab", []uint32{260, 259, 258}},
		// first: only the piece at offset 0 of the text gets the ▁; after an
		// added token it does not.
		{"first", true, "ab", []uint32{259, 258}},
		{"first", true, "<|x|>ab", []uint32{300, 260}},
		{"always", true, "<|x|>ab", []uint32{300, 259, 258}},
		// ç is not in the vocabulary: its UTF-8 bytes C3 A7 as <0xC3><0xA7>.
		{"never", true, "aç", []uint32{257, 0xC3, 0xA7}},
	}
	for _, c := range cases {
		tok, err := Load(tinyJSON(t, false, charDoc(c.scheme, c.split)))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if got := tok.Encode(c.text); !slices.Equal(got, c.want) {
			t.Errorf("%s split=%v: Encode(%q) = %v, want %v", c.scheme, c.split, c.text, got, c.want)
		}
	}
	tok, err := Load(tinyJSON(t, false, charDoc("always", true)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Decode([]uint32{259, 258, 0xC3, 0xA7}), " abç"; got != want {
		t.Errorf("Decode = %q, want %q", got, want)
	}
}

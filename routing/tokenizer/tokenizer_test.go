package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// tinyJSON returns a minimal Qwen-shaped tokenizer.json: the 256 byte tokens
// (ids 0..255 in byte order), merges a+b, ab+c, Ġ+ab (as "a b" strings or
// ["a","b"] arrays) and two added tokens. edit may change the document.
func tinyJSON(t *testing.T, arrays bool, edit func(doc map[string]any)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, tinyDoc(arrays, edit), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tinyDoc returns the document of tinyJSON.
func tinyDoc(arrays bool, edit func(doc map[string]any)) []byte {
	vocab := map[string]any{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	vocab["ab"], vocab["abc"], vocab["Ġab"] = 256, 257, 258
	pairs := [][2]string{{"a", "b"}, {"ab", "c"}, {"Ġ", "ab"}}
	var merges []any
	for _, p := range pairs {
		if arrays {
			merges = append(merges, []string{p[0], p[1]})
		} else {
			merges = append(merges, p[0]+" "+p[1])
		}
	}
	added := func(id int, content string, special bool) map[string]any {
		return map[string]any{"id": id, "content": content, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": special}
	}
	doc := map[string]any{
		"version":      "1.0",
		"added_tokens": []any{added(300, "<|x|>", true), added(301, "<|x|><", false)},
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwenSplitRegex}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel"},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges},
	}
	if edit != nil {
		edit(doc)
	}
	data, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return data
}

func TestTinyMergeForms(t *testing.T) {
	for _, arrays := range []bool{false, true} {
		tok, err := Load(tinyJSON(t, arrays, nil))
		if err != nil {
			t.Fatalf("arrays=%v: Load: %v", arrays, err)
		}
		cases := []struct {
			text string
			want []uint32
		}{
			{"", []uint32{}},
			{"abc", []uint32{257}},
			{"ab ab", []uint32{256, 258}},
			{"abcab", []uint32{257, 256}},
			{"<|x|>", []uint32{300}},
			{"<|x|><ab", []uint32{301, 256}}, // leftmost-longest
			{"a<|x|>b", []uint32{'a', 300, 'b'}},
			{"<|x|", []uint32{'<', '|', 'x', '|'}},
		}
		for _, c := range cases {
			if got := tok.Encode(c.text); !slices.Equal(got, c.want) {
				t.Errorf("arrays=%v: Encode(%q) = %v, want %v", arrays, c.text, got, c.want)
			}
		}
	}
}

func TestLoadRejectsUnsupported(t *testing.T) {
	model := func(doc map[string]any) map[string]any { return doc["model"].(map[string]any) }
	preTok := func(doc map[string]any, i int) map[string]any {
		return doc["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[i].(map[string]any)
	}
	cases := map[string]func(doc map[string]any){
		"nfkc normalizer": func(doc map[string]any) { doc["normalizer"] = map[string]any{"type": "NFKC"} },
		"lowercase in seq": func(doc map[string]any) {
			doc["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}, map[string]any{"type": "Lowercase"}}}
		},
		"word class regex": func(doc map[string]any) { preTok(doc, 0)["pattern"] = map[string]any{"Regex": `\w+`} },
		"word boundary":    func(doc map[string]any) { preTok(doc, 0)["pattern"] = map[string]any{"Regex": `\bx`} },
		"posix bracket":    func(doc map[string]any) { preTok(doc, 0)["pattern"] = map[string]any{"Regex": `[[:alpha:]]+`} },
		"line anchor":      func(doc map[string]any) { preTok(doc, 0)["pattern"] = map[string]any{"Regex": `^ +`} },
		"class set op":     func(doc map[string]any) { preTok(doc, 0)["pattern"] = map[string]any{"Regex": `[a-z&&[^b]]`} },
		"possessive":       func(doc map[string]any) { preTok(doc, 0)["pattern"] = map[string]any{"Regex": `a++`} },
		"bad regex":        func(doc map[string]any) { preTok(doc, 0)["pattern"] = map[string]any{"Regex": `(a`} },
		"no pattern":       func(doc map[string]any) { delete(preTok(doc, 0), "pattern") },
		"unknown behavior": func(doc map[string]any) { preTok(doc, 0)["behavior"] = "Sideways" },
		"bytelevel first": func(doc map[string]any) {
			pl := doc["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)
			pl[0], pl[1] = pl[1], pl[0]
		},
		"whitespace pretok": func(doc map[string]any) { doc["pre_tokenizer"] = map[string]any{"type": "Whitespace"} },
		"metaspace without byte fallback": func(doc map[string]any) {
			doc["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}
		},
		"bad prepend scheme": func(doc map[string]any) {
			doc["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "sometimes"}
		},
		"wordpiece":          func(doc map[string]any) { model(doc)["type"] = "WordPiece" },
		"dropout":            func(doc map[string]any) { model(doc)["dropout"] = 0.1 },
		"byte fallback":      func(doc map[string]any) { model(doc)["byte_fallback"] = true },
		"subword prefix":     func(doc map[string]any) { model(doc)["continuing_subword_prefix"] = "##" },
		"wordpiece decoder":  func(doc map[string]any) { doc["decoder"] = map[string]any{"type": "WordPiece"} },
		"missing byte token": func(doc map[string]any) { delete(model(doc)["vocab"].(map[string]any), "Ġ") },
		"lstrip added": func(doc map[string]any) {
			doc["added_tokens"].([]any)[0].(map[string]any)["lstrip"] = true
		},
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Load(tinyJSON(t, false, edit))
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Load error = %v, want ErrUnsupported", err)
			}
		})
	}
	bad := map[string]func(doc map[string]any){
		"merge not in vocab":  func(doc map[string]any) { model(doc)["merges"] = []any{"x y"} },
		"merge with 3 parts":  func(doc map[string]any) { model(doc)["merges"] = []any{"a b c"} },
		"merge array of 1":    func(doc map[string]any) { model(doc)["merges"] = []any{[]string{"a"}} },
		"merge of wrong type": func(doc map[string]any) { model(doc)["merges"] = []any{7} },
		"vocab of wrong type": func(doc map[string]any) { model(doc)["vocab"] = []any{"a"} },
		"negative vocab id":   func(doc map[string]any) { model(doc)["vocab"].(map[string]any)["zz"] = -1 },
		"huge vocab id":       func(doc map[string]any) { model(doc)["vocab"].(map[string]any)["zz"] = 1 << 30 },
	}
	for name, edit := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := Load(tinyJSON(t, false, edit)); err == nil {
				t.Fatal("Load succeeded, want an error")
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err = %v, want os.ErrNotExist", err)
	}
	good := string(tinyDoc(false, nil))
	for name, doc := range map[string]string{
		"truncated":     `{"model":`,
		"cut in half":   good[:len(good)/2],
		"trailing data": good + `{}`,
		"deep nesting":  `{"x":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}`,
		"not an object": `[1, 2]`,
		"bad literal":   strings.Replace(good, `"version":"1.0"`, `"version":nul!`, 1),
	} {
		if _, err := parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), "decoding json") {
			t.Errorf("%s: err = %v, want a json decoding error", name, err)
		}
	}
	// Escaped keys and tokens are decoded like encoding/json does.
	escaped := strings.Replace(good, `"model":`, `"mod\u0065l":`, 1)
	escaped = strings.Replace(escaped, `"abc":257`, `"\u0061bc":257`, 1)
	if !strings.Contains(escaped, `"mod\u0065l":`) || !strings.Contains(escaped, `"\u0061bc":257`) {
		t.Fatal("test document was not rewritten")
	}
	tok, err := parse([]byte(escaped))
	if err != nil {
		t.Fatalf("escaped keys: %v", err)
	}
	if got := tok.Encode("abc"); !slices.Equal(got, []uint32{257}) {
		t.Errorf("escaped keys: Encode(abc) = %v, want [257]", got)
	}
}

// FuzzParse: parse never panics on arbitrary tokenizer.json bytes.
func FuzzParse(f *testing.F) {
	f.Add(tinyDoc(false, nil))
	f.Add(tinyDoc(true, nil))
	f.Add([]byte(`{"model":{"vocab":{"a":0},"merges":["a a"]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := parse(data)
		if err == nil {
			tok.Encode("abc <|x|> a\u0301b")
		}
	})
}

func TestTokenIDAndDecode(t *testing.T) {
	tok := loadTest(t)
	for s, want := range map[string]uint32{
		"<|im_start|>": 151644, "<|im_end|>": 151645, "<|endoftext|>": 151643,
		"<|vision_start|>": 151652, "<|vision_end|>": 151653, "<|image_pad|>": 151655,
		"<|video_pad|>": 151656, "<tool_call>": 151657, "Ġworld": 1879, "Hello": 9707,
	} {
		if got, ok := tok.TokenID(s); !ok || got != want {
			t.Errorf("TokenID(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	if _, ok := tok.TokenID(" world"); ok {
		t.Error(`TokenID(" world") found; vocabulary tokens are looked up in byte-level spelling`)
	}
	if got := tok.Encode("Hello world"); !slices.Equal(got, []uint32{9707, 1879}) {
		t.Errorf("Encode(Hello world) = %v", got)
	}
	if got := tok.Decode([]uint32{151644, 9707, 1879, 1 << 30, 151645}); got != "<|im_start|>Hello world<|im_end|>" {
		t.Errorf("Decode = %q (unknown ids must be skipped)", got)
	}
	if got := tok.VocabSize(); got != 151669 {
		t.Errorf("VocabSize = %d, want 151669", got)
	}
}

// TestUnicodePolicy pins the class policy of the package doc.
func TestUnicodePolicy(t *testing.T) {
	if unicode.Version != goUnicodeVersion {
		t.Fatalf("Go's unicode tables are %s, unicode16.go was generated for %s: rerun gen_unicode16.go",
			unicode.Version, goUnicodeVersion)
	}
	initClasses()
	cases := []struct {
		r    rune
		want uint8
		why  string
	}{
		{'a', clsLetter, "ASCII"},
		{'7', clsNumber, "ASCII digit"},
		{'\u00b2', clsNumber, "superscript two (No)"},
		{'\u2167', clsNumber, "roman numeral (Nl)"},
		{'\u00a0', clsSpace, "NBSP is White_Space"},
		{'\u0085', clsSpace, "NEL is White_Space"},
		{'\u3000', clsSpace, "ideographic space"},
		{'\ufeff', clsOther, "BOM is not White_Space"},
		{'\u200b', clsOther, "ZWSP is not White_Space"},
		{'\n', clsSpace | clsCRLF, "LF"},
		{'\r', clsSpace | clsCRLF, "CR"},
		{'\t', clsSpace, "tab"},
		{0x2EBF0, clsLetter, "CJK Ext-I, Unicode 15.1"},
		{0x105C0, clsLetter, "Todhri, Unicode 16.0"},
		{0x10D40, clsNumber, "Garay digit zero, Unicode 16.0"},
		{0x1E5F1, clsNumber, "Ol Onal digit one, Unicode 16.0"},
		{0x1CCF0, clsNumber, "outlined digit zero, Unicode 16.0"},
		{0x323B0, clsOther, "CJK Ext-J, Unicode 17.0"},
		{0x11DE0, clsOther, "Tolong Siki digit zero, Unicode 17.0"},
		{0x10940, clsOther, "Sidetic, Unicode 17.0"},
		{0xA7CE, clsOther, "Latin Extended-D letter, Unicode 17.0"},
	}
	for _, c := range cases {
		if got := classOf(c.r); got != c.want {
			t.Errorf("classOf(%U) = %d, want %d (%s)", c.r, got, c.want, c.why)
		}
		if c.r < 0x10000 && slowClass(c.r) != bmpClass[c.r] {
			t.Errorf("BMP table and slowClass disagree on %U", c.r)
		}
	}
}

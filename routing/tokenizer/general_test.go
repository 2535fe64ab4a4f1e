package tokenizer

import (
	"slices"
	"testing"
)

// TestGeneralShapes: tokenizer.json shapes off the Qwen fast path load and
// encode as Hugging Face's pipeline defines them (ids worked out by hand
// from tinyDoc's vocabulary: byte b has id b, "ab" 256, "abc" 257, "Ġab"
// 258; added "<|x|>" 300, "<|x|><" 301).
func TestGeneralShapes(t *testing.T) {
	preTok := func(doc map[string]any, i int) map[string]any {
		return doc["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[i].(map[string]any)
	}
	model := func(doc map[string]any) map[string]any { return doc["model"].(map[string]any) }
	cases := []struct {
		name string
		edit func(doc map[string]any)
		text string
		want []uint32
		fast bool // the Qwen pre-tokenizer stays on the fast path
	}{
		// No NFC: e + U+0301 stays decomposed; the mark is punctuation for the
		// Qwen2 split: "e", "\u0301" (bytes CC 81).
		{"no normalizer", func(doc map[string]any) { doc["normalizer"] = nil }, "e\u0301", []uint32{101, 0xCC, 0x81}, true},
		{"nfc", nil, "e\u0301", []uint32{0xC3, 0xA9}, true},
		// Replace " " by "_" then the Qwen split: "ab", "_ab" ("_" prefixes a
		// letter run; "_ab" has no merge with "_": "_", "ab").
		{"replace normalizer", func(doc map[string]any) {
			doc["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{
				map[string]any{"type": "NFC"},
				map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "_"}}}
		}, "ab ab", []uint32{256, '_', 256}, true},
		{"replace regex normalizer", func(doc map[string]any) {
			doc["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": ` +`}, "content": " "}
		}, "ab     ab", []uint32{256, 258}, true},
		{"prepend normalizer", func(doc map[string]any) {
			doc["normalizer"] = map[string]any{"type": "Prepend", "prepend": " "}
		}, "ab", []uint32{258}, true},
		// Every character matches the Qwen regex: Removed keeps nothing.
		{"removed behavior", func(doc map[string]any) { preTok(doc, 0)["behavior"] = "Removed" }, "ab c", []uint32{}, false},
		{"string pattern", func(doc map[string]any) {
			preTok(doc, 0)["pattern"] = map[string]any{"String": " "}
		}, "ab c", []uint32{256, ' ', 'c'}, false},
		{"other regex", func(doc map[string]any) {
			preTok(doc, 0)["pattern"] = map[string]any{"Regex": `\s+`}
		}, "ab c", []uint32{256, ' ', 'c'}, false},
		// Inverted: the matches of [a-z]+ are the content, the rest delimiters.
		{"inverted removed", func(doc map[string]any) {
			preTok(doc, 0)["pattern"] = map[string]any{"Regex": `[a-z]+`}
			preTok(doc, 0)["behavior"], preTok(doc, 0)["invert"] = "Removed", true
		}, "ab, abc", []uint32{256, 257}, false},
		{"prefix space", func(doc map[string]any) { preTok(doc, 1)["add_prefix_space"] = true }, "ab", []uint32{258}, false},
		// ByteLevel alone with its GPT-2 regex: " ab" is one pre-token.
		{"bytelevel regex", func(doc map[string]any) {
			doc["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}
		}, "ab ab", []uint32{256, 258}, false},
		// ignore_merges: a pre-token that is a vocabulary token is that token,
		// even without a merge path ("bc" has no merge).
		{"ignore merges", func(doc map[string]any) {
			model(doc)["ignore_merges"] = true
			model(doc)["vocab"].(map[string]any)["bc"] = 259
		}, "bc", []uint32{259}, true},
		{"merges without ignore", func(doc map[string]any) {
			model(doc)["vocab"].(map[string]any)["bc"] = 259
		}, "bc", []uint32{'b', 'c'}, true},
		{"normalized added", func(doc map[string]any) {
			doc["added_tokens"].([]any)[0].(map[string]any)["normalized"] = true
		}, "a<|x|>b", []uint32{'a', 300, 'b'}, true},
		// A normalized added token is matched in the normalized text: "é"
		// written decomposed becomes the token after NFC.
		{"normalized added after nfc", func(doc map[string]any) {
			doc["added_tokens"] = []any{map[string]any{"id": 310, "content": "é", "normalized": true, "special": false}}
		}, "e\u0301!", []uint32{310, '!'}, true},
		{"non-normalized added before nfc", func(doc map[string]any) {
			doc["added_tokens"] = []any{map[string]any{"id": 310, "content": "é", "normalized": false, "special": false}}
		}, "e\u0301!", []uint32{0xC3, 0xA9, '!'}, true},
		{"vocab token outside byte alphabet", func(doc map[string]any) {
			model(doc)["vocab"].(map[string]any)["a b"] = 400
		}, "a b", []uint32{'a', ' ', 'b'}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok, err := Load(tinyJSON(t, false, c.edit))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if (tok.fast != 0) != c.fast {
				t.Errorf("fast path = %v, want %v", tok.fast != 0, c.fast)
			}
			if got := tok.Encode(c.text); !slices.Equal(got, c.want) {
				t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
			}
		})
	}
}

package model_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// specialVectors is the oracle's ids for folder and reading (testkit.SpecialTokenVectors).
func specialVectors(t *testing.T, folder, reading string) map[string]map[bool][]uint32 {
	return testkit.SpecialTokenVectors(t, "../../testdata/special_tokens/vectors.jsonl", folder, reading)
}

// TestPromptTokensSpecialTokens: a completions prompt gets the special tokens the worker's
// tokenizer adds (vLLM CompletionRequest add_special_tokens default true), a chat prompt does not
// (ChatCompletionRequest default false), and the request's add_special_tokens overrides both, for
// the BOS-adding test tokenizers (DeepSeek-V3 through transformers' LlamaTokenizerFast override,
// Gemma 3 through tokenizer.json) and Qwen (adds nothing). Expected ids are the oracle's
// (testdata/special_tokens).
func TestPromptTokensSpecialTokens(t *testing.T) {
	for _, c := range []struct{ folder, reading string }{
		{"tokenizers/deepseek_v3", "transformers4"},
		{"tokenizers/gemma3", "transformers4"},
		{"golden/qwen3vl-test-model", "tokenizer.json"},
	} {
		m, err := model.Load(filepath.Join("../../testdata", c.folder))
		if err != nil {
			t.Fatal(err)
		}
		for text, byFlag := range specialVectors(t, c.folder, c.reading) {
			for _, field := range []string{"", `,"add_special_tokens":true`, `,"add_special_tokens":false`} {
				add := field != `,"add_special_tokens":false`
				req, err := chat.ParseRequest([]byte(`{"model":"m","prompt":` + strconv.Quote(text) + field + `}`))
				if err != nil {
					t.Fatal(err)
				}
				_, ids, err := m.PromptTokens(req)
				if want := byFlag[add]; err != nil || !slices.Equal(ids, want) {
					t.Errorf("%s completions %q%s: %v %v, want %v", c.folder, text, field, ids, err, want)
				}
			}
		}
		// Chat: the rendered prompt without special tokens by default; add_special_tokens true puts
		// the post-processor's tokens around the rendered prompt (the template's own BOS stays).
		msgs := `{"model":"m","messages":[{"role":"user","content":"Hello world"}]`
		plain, _ := chat.ParseRequest([]byte(msgs + `}`))
		prompt, ids, err := m.PromptTokens(plain)
		if err != nil || !slices.Equal(ids, m.Tokenizer.Encode(prompt)) {
			t.Errorf("%s chat default: %v %v, want Encode(prompt) %v", c.folder, ids, err, m.Tokenizer.Encode(prompt))
		}
		withST, _ := chat.ParseRequest([]byte(msgs + `,"add_special_tokens":true}`))
		_, got, err := m.PromptTokens(withST)
		want, _ := m.Special.Apply(ids, true)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s chat add_special_tokens true: %v %v, want %v", c.folder, got, err, want)
		}
		if adds := len(want) > len(ids); adds != (c.folder != "golden/qwen3vl-test-model") {
			t.Errorf("%s: special tokens added to chat %t (%s)", c.folder, adds, m.Special)
		}
	}
}

// TestPromptTokensSpecialTokensUnsupported: a model whose tokenizer_config.json says
// add_bos_token true while its tokenizer.json post-processor adds nothing (a class without a known
// transformers override) cannot say what the worker adds: PromptTokens refuses a prompt with
// special tokens (tokenizer.ErrSpecialTokens), and still encodes one without.
func TestPromptTokensSpecialTokensUnsupported(t *testing.T) {
	dir := t.TempDir()
	src, err := filepath.Abs("../../testdata/tokenizers/deepseek_v3/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(src, filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	cfg := `{"tokenizer_class":"PreTrainedTokenizerFast","add_bos_token":true,"bos_token":"<｜begin▁of▁sentence｜>"}`
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := chat.ParseRequest([]byte(`{"prompt":"Hello world"}`))
	if _, ids, err := m.PromptTokens(req); !errors.Is(err, tokenizer.ErrSpecialTokens) {
		t.Errorf("completions with an unsupported post-processor: %v, %v; want ErrSpecialTokens", ids, err)
	}
	req, _ = chat.ParseRequest([]byte(`{"prompt":"Hello world","add_special_tokens":false}`))
	if _, ids, err := m.PromptTokens(req); err != nil || !slices.Equal(ids, m.Tokenizer.Encode("Hello world")) {
		t.Errorf("completions without special tokens: %v, %v", ids, err)
	}
}

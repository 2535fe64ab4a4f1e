package router

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/scheduler"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// newSpecialRouter is newTestRouter over the test model with its special-token post-processor
// read from tokenizerConfig (tokenizer.Tokenizer.ForTransformers) instead of the folder's.
func newSpecialRouter(t *testing.T, tokenizerConfig string) *Router {
	t.Helper()
	base, err := testModel()
	if err != nil {
		t.Fatal(err)
	}
	m := *base
	m.Special = m.Tokenizer.ForTransformers([]byte(tokenizerConfig), nil)
	lm, err := layout.LoadModel(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	ix, _ := index.New(nil)
	s, _ := scheduler.New(nil, rand.NewPCG(1, 2))
	r, err := New(DefaultConfig(), &m, lm, ix, s, &fakeMedia{}, Hooks{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSpecialTokensFallback: a prompt whose special tokens kvroute cannot reproduce is routed on
// load alone with special_tokens_unsupported (nothing hashed, explain shows the code), the body
// forwarded unchanged; the same prompt without special tokens is exact. With a post-processor
// that adds a BOS, a completions prompt is hashed with it, and a chat request with media that asks
// for special tokens falls back (where the worker's processor puts them is not modelled).
func TestSpecialTokensFallback(t *testing.T) {
	// add_eos_token true while tokenizer.json's post_processor adds nothing: unsupported.
	unsupported := newSpecialRouter(t, `{"tokenizer_class":"Qwen2TokenizerFast","add_eos_token":true,"eos_token":"<|im_end|>"}`)
	// A Llama-class override that prepends <|endoftext|>.
	bos := newSpecialRouter(t, `{"tokenizer_class":"LlamaTokenizerFast","bos_token":"<|endoftext|>"}`)
	prompt := strings.Repeat("The router hashes blocks of sixteen tokens. ", 8)
	completions := `{"model":"qwen","prompt":"` + prompt + `"}`
	for _, c := range []struct {
		name     string
		r        *Router
		path     string
		body     string
		fallback reason.Code
		tokens   int // prompt tokens scored (RequestTokens); -1: not checked
	}{
		{"completions, unsupported", unsupported, "/v1/completions", completions, reason.SpecialTokensUnsupported, -1},
		{"completions without special tokens, unsupported", unsupported, "/v1/completions", strings.Replace(completions, `"}`, `","add_special_tokens":false}`, 1), "", len(unsupported.model.Tokenizer.Encode(prompt))},
		{"chat default, unsupported", unsupported, "/v1/chat/completions", `{"model":"qwen","messages":[{"role":"user","content":"` + prompt + `"}]}`, "", -1},
		{"chat asking for special tokens, unsupported", unsupported, "/v1/chat/completions", `{"model":"qwen","messages":[{"role":"user","content":"hi"}],"add_special_tokens":true}`, reason.SpecialTokensUnsupported, -1},
		{"completions, BOS", bos, "/v1/completions", completions, "", len(bos.model.Tokenizer.Encode(prompt)) + 1},
		{"chat with media asking for special tokens, BOS", bos, "/v1/chat/completions", strings.Replace(chat000, `"add_generation_prompt":true`, `"add_special_tokens":true`, 1), reason.SpecialTokensUnsupported, -1},
	} {
		res, err := c.r.Route(context.Background(), &Input{Path: c.path, Body: []byte(c.body), Workers: testWorkers()})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.Fallback != c.fallback || string(res.Body) != c.body || res.Chosen == nil {
			t.Errorf("%s: fallback %q (%s), body forwarded unchanged %t, chosen %v; want fallback %q", c.name, res.Fallback, res.Detail,
				string(res.Body) == c.body, res.Chosen != nil, c.fallback)
		}
		if c.fallback == reason.SpecialTokensUnsupported && (res.TotalBlocks != 0 || !strings.Contains(res.Detail, tokenizer.ErrSpecialTokens.Error())) {
			t.Errorf("%s: %d blocks scored, detail %q", c.name, res.TotalBlocks, res.Detail)
		}
		if c.tokens >= 0 && (res.RequestTokens != c.tokens || res.TotalBlocks != c.tokens/16) {
			t.Errorf("%s: %d request tokens, %d blocks; want %d tokens", c.name, res.RequestTokens, res.TotalBlocks, c.tokens)
		}
	}
	if !reason.SpecialTokensUnsupported.LoadOnly() || reason.SpecialTokensUnsupported.IsClientError() {
		t.Error("special_tokens_unsupported must be a load-only fallback")
	}
}

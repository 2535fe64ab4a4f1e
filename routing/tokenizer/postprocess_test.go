package tokenizer

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestPostProcessorUnsupported: shapes tokenizers refuses or panics on load as unsupported for the
// flag they break, and Apply refuses them with ErrSpecialTokens instead of guessing.
func TestPostProcessorUnsupported(t *testing.T) {
	bosA := `{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<b>","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"<b>","type_id":0}}],"special_tokens":{"<b>":{"id":"<b>","ids":[7],"tokens":["<b>"]}}}`
	for _, c := range []struct {
		name, json      string
		withOK, plainOK bool
		why             string
	}{
		{"unknown type", `{"type":"FancyProcessing"}`, false, false, `type "FancyProcessing"`},
		{"single names B", `{"type":"TemplateProcessing","single":[{"Sequence":{"id":"B","type_id":0}}],"special_tokens":{}}`, false, false, `sequence "B"`},
		{"missing special token", `{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<x>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{}}`, false, false, `"<x>" is not in special_tokens`},
		// With special tokens the first template yields three encodings; a second template over
		// three is tokenizers' todo!() panic. Without, one encoding: fine.
		{"template over three encodings", `{"type":"Sequence","processors":[` + bosA + `,` + bosA + `]}`, false, true, "over 3 encodings"},
		{"nested too deep", strings.Repeat(`{"type":"Sequence","processors":[`, 9) + `{"type":"ByteLevel"}` + strings.Repeat(`]}`, 9), false, false, "too deep"},
	} {
		p, err := parsePostProcessor([]byte(c.json))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, add := range []bool{true, false} {
			want := c.withOK
			if !add {
				want = c.plainOK
			}
			ok, why := p.Exact(add)
			_, aerr := p.Apply([]uint32{1, 2}, add)
			if ok != want || !ok && (!strings.Contains(why, c.why) || !errors.Is(aerr, ErrSpecialTokens)) || ok && aerr != nil {
				t.Errorf("%s add=%t: Exact = %t %q, Apply err %v; want exact %t, reason with %q", c.name, add, ok, why, aerr, want, c.why)
			}
		}
	}
	if _, err := parsePostProcessor([]byte(`{"type":"BertProcessing","cls":"x","sep":["</s>",2]}`)); err == nil {
		t.Error("BertProcessing with a malformed cls loaded")
	}
}

// TestForTransformersRules: the readings ForTransformers takes apart from the oracle's vectors
// (postprocess_golden_test.go): unresolved tokens and add_bos_token/add_eos_token that the
// tokenizer.json post-processor of a class without a known override does not bear out are
// unsupported (with add_special_tokens only); special_tokens_map.json fills a missing bos_token.
func TestForTransformersRules(t *testing.T) {
	qwen := loadTest(t)
	deepseek := loadFamily(t, "deepseek_v3")
	gemma := loadFamily(t, "gemma3")
	text := qwen.Encode("Hello world")
	endoftext, _ := qwen.TokenID("<|endoftext|>")
	for _, c := range []struct {
		name      string
		tok       *Tokenizer
		cfg, stm  string
		why       string   // non-empty: unsupported with add_special_tokens, reason containing it
		wantFirst []uint32 // else: the ids added before the text
	}{
		{"Qwen2Tokenizer add_bos_token false, nothing added", qwen, `{"tokenizer_class":"Qwen2Tokenizer","add_bos_token":false,"bos_token":null}`, "", "", nil},
		{"generic class, add_bos_token true, ByteLevel post_processor", deepseek, `{"tokenizer_class":"PreTrainedTokenizerFast","add_bos_token":true,"bos_token":"<｜begin▁of▁sentence｜>"}`, "", "sets add_bos_token to true", nil},
		{"generic class, add_eos_token true, nothing added", qwen, `{"tokenizer_class":"Qwen2TokenizerFast","add_eos_token":true,"eos_token":"<|im_end|>"}`, "", "sets add_eos_token to true", nil},
		{"generic class, add_bos_token true, tokenizer.json adds it", gemma, `{"tokenizer_class":"PreTrainedTokenizerFast","add_bos_token":true,"bos_token":"<bos>"}`, "", "", []uint32{2}},
		{"generic class, only add_eos_token set, tokenizer.json adds a BOS", gemma, `{"tokenizer_class":"PreTrainedTokenizerFast","add_eos_token":false,"eos_token":"<eos>"}`, "", "sets only one of", nil},
		{"generic class, add_bos_token false, tokenizer.json adds one", gemma, `{"tokenizer_class":"PreTrainedTokenizerFast","add_bos_token":false,"bos_token":"<bos>"}`, "", "sets add_bos_token to false", nil},
		{"add_bos_token not a boolean", qwen, `{"tokenizer_class":"Qwen2Tokenizer","add_bos_token":"yes"}`, "", "reading tokenizer_config.json", nil},
		{"Llama, bos_token null", qwen, `{"tokenizer_class":"LlamaTokenizerFast","bos_token":null}`, "", "bos_token but it is null", nil},
		{"Llama, bos_token not a token", qwen, `{"tokenizer_class":"LlamaTokenizer","bos_token":"<no such token>"}`, "", `"<no such token>", which is not a token`, nil},
		{"Gemma, eos_token not a token", qwen, `{"tokenizer_class":"GemmaTokenizerFast","add_bos_token":false,"add_eos_token":true,"eos_token":"<no eos>"}`, "", `eos_token "<no eos>", which is not a token`, nil},
		{"Llama, bos_token from special_tokens_map.json", qwen, `{"tokenizer_class":"LlamaTokenizerFast"}`, `{"bos_token":{"content":"<|endoftext|>"}}`, "", []uint32{endoftext}},
	} {
		var stm []byte
		if c.stm != "" {
			stm = []byte(c.stm)
		}
		p := c.tok.ForTransformers([]byte(c.cfg), stm)
		if ok, why := p.Exact(false); !ok {
			t.Errorf("%s: add_special_tokens=false unsupported: %s", c.name, why)
		}
		ok, why := p.Exact(true)
		if c.why != "" {
			if ok || !strings.Contains(why, c.why) {
				t.Errorf("%s: Exact(true) = %t %q, want unsupported with %q", c.name, ok, why, c.why)
			}
			continue
		}
		ids := c.tok.Encode("Hello world")
		if c.tok == qwen {
			ids = text
		}
		got, err := p.Apply(ids, true)
		if want := slices.Concat(c.wantFirst, ids); err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: Apply = %v, %v; want %v (%s)", c.name, got, err, want, p)
		}
	}
}

package tokenizer

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// tokenizerConfigJSON is what ForTransformers reads of tokenizer_config.json (and
// special_tokens_map.json).
type tokenizerConfigJSON struct {
	TokenizerClass string          `json:"tokenizer_class"`
	AddBOS         *bool           `json:"add_bos_token"`
	AddEOS         *bool           `json:"add_eos_token"`
	BOS            json.RawMessage `json:"bos_token"`
	EOS            json.RawMessage `json:"eos_token"`
}

// bosEOSClasses are the tokenizer classes whose fast tokenizer, in Hugging Face transformers 4.x,
// replaces tokenizer.json's post_processor at load time (update_post_processor, called from
// __init__): a TemplateProcessing "bos:0 $A:0 eos:0" with bos only when add_bos_token and eos only
// when add_eos_token. The values are the __init__ defaults (add_bos_token, add_eos_token,
// bos_token, eos_token) used when tokenizer_config.json does not set them. Sources (transformers
// 4.56–4.57, the range vLLM pins in requirements/common.txt: "transformers >= 4.56.0, < 5"):
// models/llama/tokenization_llama_fast.py (LlamaTokenizerFast) and
// models/gemma/tokenization_gemma_fast.py (GemmaTokenizerFast, "Copied from" Llama's). AutoTokenizer
// maps tokenizer_class "LlamaTokenizer"/"GemmaTokenizer" to these fast classes (vLLM's default
// tokenizer_mode "auto"). Other classes with such an override are not listed on purpose: for them
// the add_bos_token/add_eos_token consistency check below decides.
var bosEOSClasses = map[string]struct {
	addBOS, addEOS bool
	bos, eos       string
}{
	"LlamaTokenizer": {true, false, "<s>", "</s>"},
	"GemmaTokenizer": {true, false, "<bos>", "<eos>"},
}

// ForTransformers returns the post-processor Hugging Face transformers 4.x (what vLLM and SGLang
// load) applies for add_special_tokens=True, given the model directory's tokenizer_config.json and
// special_tokens_map.json bytes (nil when absent; special_tokens_map.json only fills bos_token and
// eos_token that tokenizer_config.json does not set, as from_pretrained does):
//
//   - tokenizer_class LlamaTokenizer[Fast] or GemmaTokenizer[Fast]: the template transformers builds
//     from add_bos_token/add_eos_token (bosEOSClasses), whatever tokenizer.json says. A token that is
//     needed but unset or not in the vocabulary gives an unsupported post-processor (transformers
//     itself fails to load such a tokenizer).
//   - any other class: tokenizer.json's post_processor; but when tokenizer_config.json sets
//     add_bos_token or add_eos_token to a value that post_processor does not bear out (true and the
//     token is not added first/last, or false and it is), the reading depends on code not modelled
//     here, and the post-processor is unsupported (never silently wrong).
//
// transformers 5 (tokenization_utils_tokenizers.py TokenizersBackend.__init__) generalizes the
// rebuild: any class whose tokenizer_config.json has either key gets "[bos] $A [eos]" with a
// missing flag read as false and a null token dropped. Where that differs from the 4.x reading
// above for a class without a known override (a flag that disagrees with tokenizer.json, or one
// flag set while tokenizer.json adds a token at the other end), the check makes the post-processor
// unsupported. For Llama/Gemma classes the two versions agree when both flags are set (DeepSeek-V3,
// Gemma 3); with a flag missing, 4.x's __init__ default is taken.
//
// A file that is not the JSON shape expected gives an unsupported post-processor, not an error.
func (t *Tokenizer) ForTransformers(tokenizerConfig, specialTokensMap []byte) *PostProcessor {
	base := t.PostProcessor()
	if tokenizerConfig == nil {
		return base
	}
	var cfg, stm tokenizerConfigJSON
	err := json.Unmarshal(tokenizerConfig, &cfg)
	if err == nil && specialTokensMap != nil {
		err = json.Unmarshal(specialTokensMap, &stm)
	}
	if err != nil {
		// A member of another type than transformers expects (add_bos_token: "yes", …): what the
		// worker makes of it is not known. The folder still loads; prompts with special tokens
		// are not hashed.
		p := *base
		p.with, p.whyWith = nil, "reading tokenizer_config.json/special_tokens_map.json: "+err.Error()
		return &p
	}
	class := strings.TrimSuffix(cfg.TokenizerClass, "Fast")
	def, override := bosEOSClasses[class]
	if !override {
		return t.checkConsistent(base, &cfg, &stm)
	}
	addBOS, addEOS := def.addBOS, def.addEOS
	if cfg.AddBOS != nil {
		addBOS = *cfg.AddBOS
	}
	if cfg.AddEOS != nil {
		addEOS = *cfg.AddEOS
	}
	// update_post_processor replaces the whole post-processor; without add_special_tokens its
	// template keeps the sequence alone (p.without nil).
	p := &PostProcessor{source: "transformers " + class + "Fast.update_post_processor, tokenizer_config.json add_bos_token/add_eos_token"}
	// The template "[bos:0 ]$A:0[ eos:0]": one encoding per piece, as TemplateProcessing gives.
	encs := [][]tmplPiece{{{seq: true}}}
	for _, tok := range []struct {
		add      bool
		name     string
		cfg, stm json.RawMessage
		def      string
		first    bool
	}{{addBOS, "bos_token", cfg.BOS, stm.BOS, def.bos, true}, {addEOS, "eos_token", cfg.EOS, stm.EOS, def.eos, false}} {
		if !tok.add {
			continue
		}
		content, set := specialContent(tok.cfg)
		if !set {
			content, set = specialContent(tok.stm)
		}
		if !set {
			content = tok.def
		}
		if content == "" {
			p.whyWith = fmt.Sprintf("%s adds %s but it is null", class, tok.name)
			return p
		}
		id, ok := t.TokenID(content)
		if !ok {
			p.whyWith = fmt.Sprintf("%s adds %s %q, which is not a token of tokenizer.json", class, tok.name, content)
			return p
		}
		if tok.first {
			encs = append([][]tmplPiece{{{ids: []uint32{id}}}}, encs...)
		} else {
			encs = append(encs, []tmplPiece{{ids: []uint32{id}}})
		}
	}
	p.with = flatten(encs)
	return p
}

// checkConsistent returns base, or an unsupported post-processor when tokenizer_config.json's
// add_bos_token/add_eos_token say otherwise than base does.
func (t *Tokenizer) checkConsistent(base *PostProcessor, cfg, stm *tokenizerConfigJSON) *PostProcessor {
	if ok, _ := base.Exact(true); !ok || cfg.AddBOS == nil && cfg.AddEOS == nil {
		return base
	}
	// What base adds around one sequence: the first and last pieces when they are not the text.
	var prefix, suffix []uint32
	if n := len(base.with); n > 0 {
		if !base.with[0].seq {
			prefix = base.with[0].ids
		}
		if !base.with[n-1].seq {
			suffix = base.with[n-1].ids
		}
	}
	check := func(want *bool, raw, rawMap json.RawMessage, got []uint32, name string) string {
		if want == nil {
			return ""
		}
		content, set := specialContent(raw)
		if !set {
			content, _ = specialContent(rawMap)
		}
		id, known := t.TokenID(content)
		adds := known && content != "" && slices.Equal(got, []uint32{id})
		if *want == adds && (*want || len(got) == 0) {
			return ""
		}
		return fmt.Sprintf("tokenizer_config.json sets %s to %t for tokenizer_class %q, but tokenizer.json's post_processor (%s) does not match it",
			"add_"+name, *want, cfg.TokenizerClass, base)
	}
	why := check(cfg.AddBOS, cfg.BOS, stm.BOS, prefix, "bos_token")
	if why == "" {
		why = check(cfg.AddEOS, cfg.EOS, stm.EOS, suffix, "eos_token")
	}
	// One flag set: transformers 5 rebuilds the template with the other flag false, 4.x keeps
	// tokenizer.json's; they differ when tokenizer.json adds a token at the unset end.
	if why == "" && (cfg.AddBOS == nil && len(prefix) > 0 || cfg.AddEOS == nil && len(suffix) > 0) {
		why = fmt.Sprintf("tokenizer_config.json sets only one of add_bos_token/add_eos_token for tokenizer_class %q and tokenizer.json's post_processor (%s) adds a token at the other end (transformers 4 and 5 read this differently)",
			cfg.TokenizerClass, base)
	}
	if why == "" {
		return base
	}
	p := *base
	p.with, p.whyWith = nil, why
	return &p
}

// specialContent reads a bos_token/eos_token value: a string, an AddedToken object
// ({"content": …}) or null (set, empty). set is false when the member is absent.
func specialContent(raw json.RawMessage) (content string, set bool) {
	if len(raw) == 0 {
		return "", false
	}
	if string(raw) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Content, true
	}
	return "", true
}

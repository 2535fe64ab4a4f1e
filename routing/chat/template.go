package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kvroute/kvroute/internal/jinja"
)

// ErrNoTemplate is returned by LoadTemplate when the model directory holds no chat template.
var ErrNoTemplate = errors.New("no chat template found")

// maxTemplateFile bounds the size of a template or tokenizer_config.json file read from disk.
const maxTemplateFile = 16 << 20

// Template is a compiled chat template with the Hugging Face rendering environment
// (transformers' apply_chat_template: Jinja2 with trim_blocks and lstrip_blocks, the
// loopcontrols extension, tojson = json.dumps(ensure_ascii=False), raise_exception,
// strftime_now, and the tokenizer's special tokens as variables). Whitespace control follows
// Jinja2's lexer (see normalizeTemplate). Safe for concurrent use.
type Template struct {
	// Source is the template text.
	Source string
	// File is the file the template came from.
	File string

	tmpl *jinja.Template
	// special holds the tokenizer's special-token variables (bos_token, eos_token, …,
	// additional_special_tokens), passed to every render.
	special map[string]jinja.Value
	// stringContent is set when the template never loops over a message's content; vLLM then
	// passes content as one string ("string" content format) instead of a part list.
	stringContent bool
	// msgs keeps converted messages across requests (msgcache.go); nil: convert every time.
	msgs *MessageCache
}

// NewTemplate compiles source. special maps special-token variable names to their text
// (strings) or lists of texts; nil is fine.
func NewTemplate(source string, special map[string]any) (*Template, error) {
	norm, blockTags, err := normalizeTemplateBlocks(source)
	if err != nil {
		return nil, fmt.Errorf("compiling chat template: %w", err)
	}
	tmpl, err := jinja.Compile(norm)
	if err != nil {
		return nil, fmt.Errorf("compiling chat template: %w", err)
	}
	t := &Template{
		Source:        source,
		tmpl:          tmpl,
		special:       make(map[string]jinja.Value, len(special)),
		stringContent: !loopsOverContent(blockTags),
	}
	for k, v := range special {
		t.special[k] = jinja.FromGoValue(v)
	}
	return t, nil
}

// LoadTemplate finds the chat template in modelDir, in this order (DESIGN.md §1 step 2):
// chat_template.jinja, chat_template.json ("chat_template" member), tokenizer_config.json
// ("chat_template" member; a list of named templates uses the one named "default"). The special
// tokens come from tokenizer_config.json when it exists. Errors wrap ErrNoTemplate when no
// template is found.
func LoadTemplate(modelDir string) (*Template, error) {
	special, cfgTemplate, err := readTokenizerConfig(filepath.Join(modelDir, "tokenizer_config.json"))
	if err != nil {
		return nil, err
	}
	var src, file string
	if b, err := readSmall(filepath.Join(modelDir, "chat_template.jinja")); err == nil {
		src, file = string(b), "chat_template.jinja"
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reading chat_template.jinja: %w", err)
	} else if b, err := readSmall(filepath.Join(modelDir, "chat_template.json")); err == nil {
		var doc struct {
			ChatTemplate json.RawMessage `json:"chat_template"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("decoding chat_template.json: %w", err)
		}
		if src, err = pickTemplate(doc.ChatTemplate); err != nil {
			return nil, fmt.Errorf("decoding chat_template.json: %w", err)
		}
		file = "chat_template.json"
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reading chat_template.json: %w", err)
	} else if cfgTemplate != "" {
		src, file = cfgTemplate, "tokenizer_config.json"
	}
	if file == "" {
		return nil, fmt.Errorf("loading template from %s: %w", modelDir, ErrNoTemplate)
	}
	t, err := NewTemplate(src, special)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", file, err)
	}
	t.File = filepath.Join(modelDir, file)
	return t, nil
}

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxTemplateFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxTemplateFile)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return nil, err
	}
	return b, nil
}

// pickTemplate reads a chat_template member: a string, or a list of {"name", "template"} from
// which "default" is taken.
func pickTemplate(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("chat_template is neither a string nor a list of named templates: %w", err)
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", errors.New("no template named \"default\" in the chat_template list")
}

// specialTokenKeys are the special-token attributes transformers exposes to templates
// (special_tokens_map), in its order.
var specialTokenKeys = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

// readTokenizerConfig returns the special-token variables and the chat_template of a
// tokenizer_config.json; a missing file gives no tokens and no template.
func readTokenizerConfig(path string) (map[string]any, string, error) {
	b, err := readSmall(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading tokenizer_config.json: %w", err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, "", fmt.Errorf("decoding tokenizer_config.json: %w", err)
	}
	special := map[string]any{}
	for _, k := range specialTokenKeys {
		if s, ok := tokenText(cfg[k]); ok {
			special[k] = s
		}
	}
	if raw, ok := cfg["additional_special_tokens"]; ok {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err == nil {
			var texts []any
			for _, it := range list {
				if s, ok := tokenText(it); ok {
					texts = append(texts, s)
				}
			}
			if texts != nil {
				special["additional_special_tokens"] = texts
			}
		}
	}
	tmpl, err := pickTemplate(cfg["chat_template"])
	if err != nil {
		return nil, "", fmt.Errorf("decoding tokenizer_config.json: %w", err)
	}
	return special, tmpl, nil
}

// tokenText reads a special token given as a string or as an AddedToken object {"content": …}.
func tokenText(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err == nil && obj.Content != nil {
		return *obj.Content, true
	}
	return "", false
}

// Package model loads what the router needs to know about a served model from its Hugging Face
// directory (tokenizer.json, the chat template, config.json) and turns a request into the
// prompt token ids the worker will compute (DESIGN.md §1 step 2). A text chat's prompt, rendered
// in pieces (chat.Prompt), is encoded as it is, without joining or copying it, into runs with
// their keys (EncodePromptRuns: the tokenizer side of the prompt-pieces seam; the router keeps the
// block hashes of a keyed run).
package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// ErrNoTemplate is returned by PromptTokens for a chat request when the model has no chat
// template.
var ErrNoTemplate = errors.New("model has no chat template")

// Model is a loaded model directory. It is read-only after Load and safe for concurrent use.
type Model struct {
	// Dir is the model directory.
	Dir string
	// Tokenizer is the model's tokenizer.json.
	Tokenizer *tokenizer.Tokenizer
	// Special is what the worker's tokenizer adds around a prompt encoded with
	// add_special_tokens=True (a BOS, …): tokenizer.json's post_processor as Hugging Face
	// transformers reads it with tokenizer_config.json (tokenizer.Tokenizer.ForTransformers).
	// Never nil; it may be unsupported (Special.Exact), and then such a prompt is not hashed.
	Special *tokenizer.PostProcessor
	// Template is the chat template (chat.LoadTemplate's lookup order), or nil when the
	// directory has none (completions prompts still tokenize).
	Template *chat.Template
	// TokenIDs are the vision token ids from config.json; Vision says they are present (false
	// for a text-only model or a directory without config.json).
	TokenIDs layout.TokenIDs
	Vision   bool
}

// Load reads dir: tokenizer.json (required), the chat template (optional) and config.json
// (optional; when it names vision_start_token_id, all four vision ids must be valid; a Nemotron 3
// Nano Omni config.json must hold every field layout.LoadNemotronModel needs, and the tokenizer
// must give <img>, </img> and <image> one id each: layout.NemotronTokenIDs). Errors
// are wrapped with the file they come from.
func Load(dir string) (*Model, error) {
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("loading model %s: %w", dir, err)
	}
	m := &Model{Dir: dir, Tokenizer: tok}
	if m.Special, err = loadSpecial(dir, tok); err != nil {
		return nil, fmt.Errorf("loading model %s: %w", dir, err)
	}
	m.Template, err = chat.LoadTemplate(dir)
	if err != nil && !errors.Is(err, chat.ErrNoTemplate) {
		return nil, fmt.Errorf("loading model %s: %w", dir, err)
	}
	cfgPath := filepath.Join(dir, "config.json")
	if nemotron, err := isNemotron(cfgPath); err != nil {
		return nil, fmt.Errorf("loading model %s: %w", dir, err)
	} else if nemotron {
		// Nemotron 3 Nano Omni: the <img>/</img> ids come from the tokenizer, and a folder that
		// lacks a field the adapter needs is refused here, at start.
		lm, err := layout.LoadNemotronModel(dir)
		if err != nil {
			return nil, fmt.Errorf("loading model %s: %w", dir, err)
		}
		if m.TokenIDs, err = layout.NemotronTokenIDs(lm, tok); err != nil {
			return nil, fmt.Errorf("loading model %s: %w", dir, err)
		}
		m.Vision = true
		return m, nil
	}
	vision, err := hasVisionIDs(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("loading model %s: %w", dir, err)
	}
	if vision {
		if m.TokenIDs, err = layout.ReadTokenIDs(cfgPath); err != nil {
			return nil, fmt.Errorf("loading model %s: %w", dir, err)
		}
		m.Vision = true
	}
	return m, nil
}

// loadSpecial reads tokenizer_config.json and special_tokens_map.json (each optional) and returns
// the post-processor transformers applies with them.
func loadSpecial(dir string, tok *tokenizer.Tokenizer) (*tokenizer.PostProcessor, error) {
	var files [2][]byte
	for i, name := range []string{"tokenizer_config.json", "special_tokens_map.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		files[i] = b
	}
	return tok.ForTransformers(files[0], files[1]), nil
}

// isNemotron reports whether config.json exists and names the Nemotron 3 Nano Omni architecture.
func isNemotron(path string) (bool, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	ok, err := layout.IsNemotronConfig(path)
	if err != nil {
		return false, fmt.Errorf("reading config.json: %w", err)
	}
	return ok, nil
}

// hasVisionIDs reports whether config.json exists and names vision_start_token_id.
func hasVisionIDs(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading config.json: %w", err)
	}
	var probe struct {
		VisionStart json.RawMessage `json:"vision_start_token_id"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return false, fmt.Errorf("decoding config.json: %w", err)
	}
	return len(probe.VisionStart) > 0 && string(probe.VisionStart) != "null", nil
}

// PromptTokens returns the prompt text and its token ids for a parsed request, as the worker
// computes them (vLLM's OpenAI server; SGLang's agrees on the defaults):
//   - a chat request is rendered through the chat template (chat.Template.Render) and encoded with
//     add_special_tokens=False by default (vLLM ChatCompletionRequest: the template writes the BOS
//     itself; added tokens in the text become single ids);
//   - a completions request's string prompt is encoded with add_special_tokens=True by default
//     (vLLM CompletionRequest, SGLang's tokenizer call): the tokenizer's post-processor (Special:
//     Llama 3's and Gemma 3's BOS, DeepSeek-V3's through transformers' add_bos_token, nothing
//     for Qwen) is applied;
//   - the request's add_special_tokens member, when it is a boolean, overrides the default on
//     both paths (chat.Request.AddSpecialTokens).
//
// A completions prompt of token ids (req.PromptIDs) is returned as sent, with an empty prompt
// text: the worker prefills the ids without adding anything.
//
// Media placeholders stay unexpanded. Errors: the request's SchemaErr, ErrNoTemplate, a
// chat.ErrRender error, or tokenizer.ErrSpecialTokens when special tokens are to be added and
// Special is unsupported.
func (m *Model) PromptTokens(req *chat.Request) (string, []uint32, error) {
	if req.SchemaErr != nil {
		return "", nil, fmt.Errorf("tokenizing prompt: %w", req.SchemaErr)
	}
	var prompt string
	switch {
	case req.HasMessages:
		if m.Template == nil {
			return "", nil, fmt.Errorf("tokenizing prompt: %w", ErrNoTemplate)
		}
		var err error
		if prompt, err = m.Template.Render(req); err != nil {
			return "", nil, fmt.Errorf("tokenizing prompt: %w", err)
		}
	case req.PromptIDs != nil:
		return "", slices.Clone(req.PromptIDs), nil // token ids: prefilled as sent
	case req.HasPrompt:
		prompt = req.Prompt
	default:
		return "", nil, errors.New("tokenizing prompt: request has neither messages nor prompt")
	}
	ids, err := m.EncodePrompt(prompt, AddSpecialTokens(req, !req.HasMessages))
	if err != nil {
		return "", nil, fmt.Errorf("tokenizing prompt: %w", err)
	}
	return prompt, ids, nil
}

// AddSpecialTokens reports whether the worker adds the tokenizer's special tokens to req's prompt:
// req.AddSpecialTokens when the body sets it, else vLLM's default for the path (true for a
// completions prompt, false for a rendered chat; vllm/entrypoints/openai/protocol.py
// CompletionRequest and ChatCompletionRequest add_special_tokens).
func AddSpecialTokens(req *chat.Request, completions bool) bool {
	if req.AddSpecialTokens != nil {
		return *req.AddSpecialTokens
	}
	return completions
}

// EncodePrompt returns prompt's token ids as the worker's tokenizer gives them,
// encode(prompt, add_special_tokens=addSpecial): Tokenizer.Encode(prompt) with Special applied for
// that flag (nothing changes without special tokens for every tokenizer.json of the package doc).
// The error wraps tokenizer.ErrSpecialTokens when Special is unsupported for the flag.
//
// With a word bound on the tokenizer (tokenizer.Tokenizer.SetMaxWordBytes), a prompt holding a
// pre-token over the bound gives an error wrapping tokenizer.ErrTooCostly and no ids.
func (m *Model) EncodePrompt(prompt string, addSpecial bool) ([]uint32, error) {
	ids := m.Tokenizer.Encode(prompt)
	if err := m.Tokenizer.CheckBounded(len(prompt), ids); err != nil {
		return nil, err
	}
	return m.Special.Apply(ids, addSpecial)
}

// EncodePromptRuns is EncodePrompt(p.String(), addSpecial) without joining p or the ids: the ids
// are the runs concatenated (tokenizer.Tokenizer.EncodePiecesRuns; the runs are shared and only
// read). The pieces the template cache replayed are encoded from their notes, so a
// conversation's earlier turns are neither copied nor scanned again, and each is a run of its own
// with its key (tokenizer.RunKey): the router hashes the runs in place (blocks.HashRuns) and keeps
// a keyed run's block hashes in its note. A pre-token over the tokenizer's word bound gives an
// error wrapping tokenizer.ErrTooCostly, as in EncodePrompt.
func (m *Model) EncodePromptRuns(p chat.Prompt, addSpecial bool) (tokenizer.Runs, error) {
	n := 0
	for _, x := range p {
		n += len(x.Text)
	}
	runs := m.Tokenizer.EncodePiecesRuns(p)
	if err := m.Tokenizer.CheckBoundedRuns(n, runs); err != nil {
		return tokenizer.Runs{}, err
	}
	return m.Special.ApplyRuns(runs, addSpecial)
}

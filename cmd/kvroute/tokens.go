package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/kvroute/kvroute/routing/apis"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/router"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// maxRequestBytes bounds the request body read from stdin (the handler's default body cap).
const maxRequestBytes = 64 << 20

// loadModel and loadTokenizer are the loaders tokens uses (tests substitute caching ones).
var (
	loadModel     = model.Load
	loadTokenizer = tokenizer.Load
)

func init() {
	register("tokens", "tokens --model DIR [--path /v1/chat/completions|/v1/completions|/v1/responses|/v1/messages] [--text TEXT] [< request.json]", runTokens)
}

// tokensOutput is the output for a chat or completions request on stdin.
type tokensOutput struct {
	Prompt   string   `json:"prompt"`
	TokenIDs []uint32 `json:"token_ids"`
}

// textTokensOutput is the output for --text.
type textTokensOutput struct {
	TokenIDs []uint32 `json:"token_ids"`
}

func runTokens(args []string) (any, error) {
	return tokens(args, os.Stdin)
}

// tokens implements `kvroute tokens` (DESIGN.md §10a). With --text it prints the Hugging Face
// encode(text, add_special_tokens=False) ids of TEXT; otherwise it reads an OpenAI chat (or
// completions) request body from stdin and prints the rendered prompt, media placeholders
// unexpanded, and its token ids as the worker computes them (model.PromptTokens: a completions
// prompt with the special tokens its tokenizer adds, add_special_tokens as the request sets it).
func tokens(args []string, stdin io.Reader) (any, error) {
	fs := newFlags("tokens")
	dir := fs.String("model", "", "model directory (tokenizer.json, chat template, config.json)")
	text := fs.String("text", "", "encode this text instead of a request read from stdin")
	path := fs.String("path", "/v1/chat/completions", "the request's path: /v1/responses and /v1/messages bodies are converted to the chat form vLLM builds")
	inline := fs.String("anthropic-inline-system", "preserve", "the workers' vLLM inline_system (preserve or fold), for --path /v1/messages")
	effort := fs.String("anthropic-disabled-thinking-effort", "none", "the reasoning_effort the workers give thinking disabled (none or low)")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if *dir == "" {
		return nil, errors.New("tokens: --model DIR is required")
	}
	if flagsSet(fs)["text"] {
		tok, err := loadTokenizer(filepath.Join(*dir, "tokenizer.json"))
		if err != nil {
			return nil, err
		}
		return textTokens(tok, *text), nil
	}
	body, err := readLimited(stdin, maxRequestBytes, "request from stdin")
	if err != nil {
		return nil, err
	}
	body, err = router.ChatBody(*path, body, apis.Options{Anthropic: apis.AnthropicOptions{InlineSystem: *inline, DisabledThinkingEffort: *effort}})
	if err != nil {
		return nil, err
	}
	req, err := chat.ParseRequest(body)
	if err != nil {
		return nil, err
	}
	m, err := loadModel(*dir)
	if err != nil {
		return nil, err
	}
	prompt, ids, err := m.PromptTokens(req)
	if err != nil {
		return nil, err
	}
	return tokensOutput{Prompt: prompt, TokenIDs: nonNil(ids)}, nil
}

// textTokens is the --text output for text.
func textTokens(tok *tokenizer.Tokenizer, text string) textTokensOutput {
	return textTokensOutput{TokenIDs: nonNil(tok.Encode(text))}
}

func nonNil(ids []uint32) []uint32 {
	if ids == nil {
		return []uint32{}
	}
	return ids
}

package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// words are the completion tokens, in turn.
var words = []string{"The", " cache", " is", " warm", ",", " the", " route", " is", " short", "."}

// generation is one completion in progress.
type generation struct {
	s            *Server
	id           string
	promptTokens int
	cachedTokens int
	maxTokens    int
	includeUsage bool
	// hitBlocks is the prefix cache hit at admission, reported in HitBlocksHeader.
	hitBlocks int
	// text answers in the /v1/completions shape (text_completion objects, choices[].text).
	text bool
	// lookup consults the prefix cache when the prefill starts and sets hitBlocks and
	// cachedTokens.
	lookup func()
	// prefilled runs when prefill ends, before the first response byte (the block cache stores
	// the prompt's blocks and publishes their events).
	prefilled func()
}

// HitBlocksHeader is the response header that carries the request's prefix cache hit at
// admission, in blocks (cached_tokens / block size).
const HitBlocksHeader = "X-Kvroute-Sim-Hit-Blocks"

// prefill runs the request's prefill on the worker's engine (the cache is consulted when it starts,
// the prefill time follows the uncached tokens), runs prefilled and sets the hit header; it reports
// false when the client went away first (nothing is stored then).
func (g *generation) prefill(ctx context.Context, w http.ResponseWriter) bool {
	lookup := func() int {
		if g.lookup != nil {
			g.lookup()
		}
		return g.promptTokens - g.cachedTokens
	}
	done := func() {
		if g.prefilled != nil {
			g.prefilled()
		}
	}
	if !g.s.engine.runPrefill(ctx, lookup, done) {
		return false
	}
	w.Header().Set(HitBlocksHeader, strconv.Itoa(g.hitBlocks))
	return true
}

func (g *generation) usage(completion int) *usage {
	return &usage{PromptTokens: g.promptTokens, CompletionTokens: completion, TotalTokens: g.promptTokens + completion,
		PromptTokensDetails: promptTokensDetails{CachedTokens: g.cachedTokens}}
}

// token waits for token i (the first comes right after prefill, the token delay before each
// other) and returns its text, or false when the client went away.
func (g *generation) token(ctx context.Context, i int) (string, bool) {
	var d time.Duration
	if i > 0 {
		d = g.s.cfg.TokenDelay
	}
	if !wait(ctx, d) {
		return "", false
	}
	return words[i%len(words)], true
}

// complete answers with one JSON chat.completion (or text_completion).
func (g *generation) complete(ctx context.Context, w http.ResponseWriter) DoneInfo {
	if !g.prefill(ctx, w) {
		return DoneInfo{Canceled: true, At: time.Now()}
	}
	var text strings.Builder
	for i := 0; i < g.maxTokens; i++ {
		t, ok := g.token(ctx, i)
		if !ok {
			return DoneInfo{Canceled: true, At: time.Now(), Tokens: i}
		}
		text.WriteString(t)
	}
	stop := "length"
	c := choice{Index: 0, Message: &outMessage{Role: "assistant", Content: text.String()}, FinishReason: &stop}
	object := "chat.completion"
	if g.text {
		out := text.String()
		c, object = choice{Index: 0, Text: &out, FinishReason: &stop}, "text_completion"
	}
	writeJSON(w, http.StatusOK, chatCompletion{
		ID: g.id, Object: object, Created: time.Now().Unix(), Model: g.s.cfg.Model,
		SystemFingerprint: g.s.cfg.WorkerID, Choices: []choice{c}, Usage: g.usage(g.maxTokens),
	})
	return DoneInfo{At: time.Now(), Tokens: g.maxTokens}
}

// stream answers with server-sent events, one chat.completion.chunk (or text_completion) per token, each flushed as
// soon as it is produced, then `data: [DONE]`.
func (g *generation) stream(ctx context.Context, w http.ResponseWriter) DoneInfo {
	if !g.prefill(ctx, w) {
		return DoneInfo{Canceled: true, At: time.Now()}
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	send := func(c chatCompletion) bool {
		b, err := json.Marshal(c)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	object := "chat.completion.chunk"
	if g.text {
		object = "text_completion"
	}
	chunk := func(delta *outMessage, finish *string) chatCompletion {
		c := choice{Index: 0, Delta: delta, FinishReason: finish}
		if g.text {
			t := delta.Content
			c = choice{Index: 0, Text: &t, FinishReason: finish}
		}
		return chatCompletion{ID: g.id, Object: object, Created: time.Now().Unix(), Model: g.s.cfg.Model,
			SystemFingerprint: g.s.cfg.WorkerID, Choices: []choice{c}}
	}
	for i := 0; i < g.maxTokens; i++ {
		t, ok := g.token(ctx, i)
		if !ok {
			return DoneInfo{Canceled: true, At: time.Now(), Tokens: i}
		}
		d := &outMessage{Content: t}
		if i == 0 {
			d.Role = "assistant"
		}
		if !send(chunk(d, nil)) {
			return DoneInfo{Canceled: true, At: time.Now(), Tokens: i}
		}
	}
	stop := "length"
	last := chunk(&outMessage{}, &stop)
	if !send(last) {
		return DoneInfo{Canceled: true, At: time.Now(), Tokens: g.maxTokens}
	}
	if g.includeUsage {
		u := chatCompletion{ID: g.id, Object: object, Created: time.Now().Unix(), Model: g.s.cfg.Model,
			SystemFingerprint: g.s.cfg.WorkerID, Choices: []choice{}, Usage: g.usage(g.maxTokens)}
		if !send(u) {
			return DoneInfo{Canceled: true, At: time.Now(), Tokens: g.maxTokens}
		}
	}
	if _, err := fmt.Fprint(w, "data: [DONE]\n\n"); err != nil {
		return DoneInfo{Canceled: true, At: time.Now(), Tokens: g.maxTokens}
	}
	_ = rc.Flush()
	return DoneInfo{At: time.Now(), Tokens: g.maxTokens}
}

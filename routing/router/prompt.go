package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// What is hashed: the prompt's tokens (the chat template rendered, or a completions prompt, then
// tokenized, with the tokenizer's special tokens added where the worker adds them:
// model.AddSpecialTokens), the text prefix a fallback routes on, and the engine's view of the tokens that the
// block hashes are taken over.

// textChatRuns returns a text chat's prompt ids as runs (model.EncodePromptRuns): nothing after
// it needs the prompt text or the ids whole (no media view expands them; the block hashes are
// taken over the runs), so the conversation's replayed turns are neither copied nor scanned.
func (r *Router) textChatRuns(ctx context.Context, req *chat.Request) (tokenizer.Runs, error) {
	if r.model.Template == nil {
		return tokenizer.Runs{}, model.ErrNoTemplate
	}
	t := time.Now()
	p, err := r.model.Template.RenderPrompt(req)
	r.stage(ctx, "template", t)
	if err != nil {
		return tokenizer.Runs{}, err
	}
	t = time.Now()
	runs, err := r.model.EncodePromptRuns(p, model.AddSpecialTokens(req, false))
	r.stage(ctx, "tokenize", t)
	return runs, err
}

// isTextChat reports whether req takes textChatRuns' path: a chat with messages and no media.
func isTextChat(req *chat.Request, kind PathKind) bool {
	return kind == PathChat && req.HasMessages && len(req.Media) == 0 && !req.HasAudio
}

func (r *Router) promptTokens(ctx context.Context, req *chat.Request, kind PathKind) (string, []uint32, error) {
	var prompt string
	switch {
	case kind == PathChat && req.HasMessages:
		if r.model.Template == nil {
			return "", nil, model.ErrNoTemplate
		}
		t := time.Now()
		var err error
		prompt, err = r.model.Template.Render(req)
		r.stage(ctx, "template", t)
		if err != nil {
			return "", nil, err
		}
	case kind == PathCompletions && req.PromptIDs != nil:
		// token ids: the worker prefills them as sent, no special tokens added (vLLM's
		// CompletionRequest with a list[int] prompt); there is no text to tokenize
		return "", slices.Clone(req.PromptIDs), nil
	case kind == PathCompletions && req.HasPrompt:
		prompt = req.Prompt
	default:
		return "", nil, errors.New("the request has no messages (chat) or prompt (completions)")
	}
	add := model.AddSpecialTokens(req, kind == PathCompletions)
	if len(req.Media) > 0 && r.model.Special.Adds(add) {
		// The media layout is expanded from the prompt text (mediaView); where the worker's
		// multimodal processor puts special tokens around it is not modelled.
		return "", nil, fmt.Errorf("%w: the worker adds special tokens (%s) around a prompt with media", tokenizer.ErrSpecialTokens, r.model.Special)
	}
	t := time.Now()
	ids, err := r.model.EncodePrompt(prompt, add)
	r.stage(ctx, "tokenize", t)
	if err != nil {
		return "", nil, err
	}
	return prompt, ids, nil
}

// textPrefix returns the prompt tokens before the first vision token or the first run of
// placeholder (when not empty): what can be routed exactly when the media cannot (DESIGN.md §1: a
// fallback routes on its text prefix).
func textPrefix(ids []uint32, t layout.TokenIDs, placeholder []uint32) []uint32 {
	for i, id := range ids {
		if id == t.VisionStart || id == t.ImagePad || id == t.VideoPad ||
			len(placeholder) > 0 && id == placeholder[0] && slices.Equal(ids[i:min(i+len(placeholder), len(ids))], placeholder) {
			return ids[:i:i]
		}
	}
	return ids
}

// hashPrompt hashes the routing view of tokens. SGLang workers key their cache by the prompt with
// each media span's pads replaced by its pad value (their KV events carry those ids), so a cohort
// of SGLang workers is hashed that way; vLLM workers by the DESIGN.md §5 rule.
func (r *Router) hashPrompt(workers []Worker, bs int, seed uint64, tokens []uint32, spans []blocks.Span) ([]kv.BlockHash, error) {
	cfg := blocks.Config{BlockSize: bs, ImagePad: r.model.TokenIDs.ImagePad, VideoPad: r.model.TokenIDs.VideoPad}
	if len(spans) > 0 && workers[0].Engine == kv.EngineSGLang {
		h, err := blocks.NewHasher(cfg)
		if err != nil {
			return nil, err
		}
		p, err := h.PromptPadded(tokens, spans, seed)
		if err != nil {
			return nil, err
		}
		return p.Hashes(), nil
	}
	return blocks.HashBlocks(cfg, seed, tokens, spans)
}

// routeRuns hashes and scores a text chat's ids given as runs (textChatRuns): every block is
// plain, so they hash as HashBlocks of the joined ids would, for vLLM and SGLang workers alike.
// The blocks inside a keyed run (a turn the template cache replayed) are taken from the block
// memo in the turn's note instead of hashed (HashTextRuns).
func (r *Router) routeRuns(ctx context.Context, res *Result, workers []Worker, in *Input, bs int, seed uint64, runs tokenizer.Runs) (*Result, error) {
	t := time.Now()
	hashes, n, err := HashTextRuns(blocks.Config{BlockSize: bs, ImagePad: r.model.TokenIDs.ImagePad, VideoPad: r.model.TokenIDs.VideoPad}, seed, runs)
	r.stage(ctx, "hash", t)
	if err != nil {
		return r.loadOnly(ctx, res, workers, in, reason.LayoutError, err.Error())
	}
	res.TotalBlocks = len(hashes)
	_ = r.score(ctx, res, workers, in, hashes, n, bs)
	return res, nil
}

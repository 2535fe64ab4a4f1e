package router

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/apis"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// Route: the steps of DESIGN.md §1 for one request in order (parse, client checks, the model's
// workers, prompt tokens, media view, hash, score, forward), each problem recorded as a fallback
// where it happens. The steps with more than a few lines live in their own files: prompt.go,
// mediaview.go, score.go, forward.go.

// Route computes the decision for one request. The error is non-nil only for a request that must
// be answered with a 4xx (a *reason.Error with a client error code); every other problem is a
// fallback recorded in the Result.
func (r *Router) Route(ctx context.Context, in *Input) (*Result, error) {
	res := &Result{Body: in.Body}
	t0 := time.Now()
	lim := chat.Limits{MaxMessages: r.cfg.MaxMessages, MaxParts: r.cfg.MaxParts}
	if r.model.Template != nil {
		lim.Messages = r.model.Template.MessageCache() // earlier turns of a conversation: not decoded again
	}
	kind := ClassifyPath(in.Path)
	body, apiErr := in.Body, error(nil)
	api := kind == PathResponses || kind == PathMessages
	if api {
		// Route the chat form vLLM builds; the client's body is what is forwarded (res.Body).
		var chatBody []byte
		chatBody, apiErr = r.apiChatBody(res, kind, in.Body)
		if apiErr == nil {
			body = chatBody
			// the parsed request aliases the chat body; nothing that outlives Route keeps it
			defer apis.ReleaseChatBody(chatBody)
		}
		kind = PathChat
	}
	req, err := chat.ParseRequestLimited(body, lim)
	r.stage(ctx, "parse", t0)
	if errors.Is(err, chat.ErrTooManyParts) {
		return nil, reason.Wrap(reason.TooManyParts, err, "the request has too many messages or content parts: %s", parseDetail(err))
	}
	if err != nil {
		// The client is told what is wrong and where (the byte offset, the nesting limit, a top
		// level that is not an object), not only that something is.
		return nil, reason.Wrap(reason.BodyInvalid, err, "request body is not one valid JSON object: %s", parseDetail(err))
	}
	res.Model, res.MediaItems = req.Model, len(req.Media)
	if kind != PathOther && req.SchemaErr == nil && apiErr == nil {
		// Client errors come first, whatever the routing outcome: a forwarded media part is
		// fetched by the worker, so a refused address is refused here on every path.
		if len(req.Media) > r.cfg.MaxMedia {
			return nil, reason.New(reason.TooManyMedia, "the request has %d media items; at most %d are allowed", len(req.Media), r.cfg.MaxMedia)
		}
		if err := r.checkMediaURLs(req); err != nil {
			return nil, err
		}
	}
	if !r.listed.Load() {
		r.verify.setWorkers(in.Workers)
		r.adapters.learn(in.Workers)
	}
	tg := r.targetFor(in.Workers, req.Model)
	workers, matched := tg.workers, tg.matched
	res.Adapter, res.AdapterBase = tg.adapter, tg.base
	seed := blocks.SeedFor(tg.lora, req.CacheSalt) // an adapter's blocks are its own (adapter.go)
	if kind == PathOther {
		// No preference, as the handler forwards such a path (the policy's fallback picks): the
		// explain endpoint must not name a worker the handler would not choose.
		res.Fallback, res.Detail = reason.NotRouted, "path is not routed by KV overlap"
		return res, nil
	}
	if len(workers) == 0 {
		res.Fallback, res.Detail = reason.IndexUnavailable, "no registered workers"
		return res, nil
	}
	if tg.notServed {
		return r.loadOnly(ctx, res, workers, in, reason.AdapterNotServed, tg.notServedDetail())
	}
	if !matched && req.Model != "" {
		// No record declares the model: nothing says these workers' caches or contracts are for
		// it, so route on load alone (the workers answer as they do for an unknown model).
		return r.loadOnly(ctx, res, workers, in, reason.IndexUnavailable, "no registered worker serves model "+strconv.Quote(req.Model))
	}
	if in.IndexUnavailable != "" {
		return r.loadOnly(ctx, res, workers, in, reason.IndexUnavailable, in.IndexUnavailable)
	}
	if apiErr != nil {
		return r.loadOnly(ctx, res, workers, in, reason.APIRequestInvalid, apiErr.Error())
	}
	if req.SchemaErr != nil {
		return r.loadOnly(ctx, res, workers, in, reason.TemplateError, req.SchemaErr.Error())
	}
	var prompt string
	var ids []uint32
	var runs tokenizer.Runs
	if isTextChat(req, kind) {
		runs, err = r.textChatRuns(ctx, req)
	} else {
		prompt, ids, err = r.promptTokens(ctx, req, kind)
	}
	if errors.Is(err, tokenizer.ErrSpecialTokens) {
		// The worker adds special tokens this tokenizer's post-processor cannot reproduce: every
		// block hash could be off from the first token, so no prefix is scored.
		return r.loadOnly(ctx, res, workers, in, reason.SpecialTokensUnsupported, err.Error())
	}
	if errors.Is(err, tokenizer.ErrTooCostly) {
		// One pre-token over the word bound: its BPE alone would cost seconds and gigabytes
		// (DESIGN.md §6 "Prompts"), so the prompt has no ids to score.
		return r.loadOnly(ctx, res, workers, in, reason.PromptTooCostly, err.Error())
	}
	if err != nil {
		return r.loadOnly(ctx, res, workers, in, reason.TemplateError, err.Error())
	}

	bs := workers[0].BlockSize
	for _, w := range workers {
		if w.BlockSize != bs {
			return r.loadOnly(ctx, res, workers, in, reason.BlockSizeMismatch, "workers of the model disagree on block_size")
		}
	}
	if bs <= 0 {
		return r.loadOnly(ctx, res, workers, in, reason.IndexUnavailable, "worker has no block_size")
	}

	if runs.IDs != nil {
		return r.routeRuns(ctx, res, workers, in, bs, seed, runs)
	}

	tokens := ids
	var spans []blocks.Span
	if api && (len(req.Media) > 0 || req.HasAudio) {
		// The worker keys these media blocks by its own hash (no uuid reaches it on this API):
		// only the text before the first media item can match.
		res.Fallback, res.Detail = reason.APIMediaUnkeyed, "vLLM's "+in.Path+" parser takes no media uuid; routed on the text before the first media item"
		tokens = textPrefix(ids, r.model.TokenIDs, r.videoPlaceholder)
	} else if len(req.Media) > 0 || req.HasAudio {
		exp, code, detail, err := r.mediaView(ctx, req, prompt, workers, res)
		if err != nil {
			return nil, err
		}
		if code != "" {
			res.Fallback, res.Detail = code, detail
			setAffinity(res, req)
			tokens = textPrefix(ids, r.model.TokenIDs, r.videoPlaceholder)
		} else {
			tokens, spans = exp.Tokens, exp.Spans
		}
	}

	t1 := time.Now()
	hashes, err := r.hashPrompt(workers, bs, seed, tokens, spans)
	r.stage(ctx, "hash", t1)
	if err != nil {
		// Spans come from our own expansion; a failure here is a bug, not a client error.
		res.Fallback, res.Detail = reason.LayoutError, err.Error()
		tokens, spans = textPrefix(ids, r.model.TokenIDs, r.videoPlaceholder), nil
		if hashes, err = blocks.HashBlocks(blocks.Config{BlockSize: bs, ImagePad: r.model.TokenIDs.ImagePad, VideoPad: r.model.TokenIDs.VideoPad},
			seed, tokens, nil); err != nil {
			return r.loadOnly(ctx, res, workers, in, reason.LayoutError, err.Error())
		}
	}
	res.TotalBlocks = len(hashes)
	requestTokens := len(tokens)
	if res.Fallback != "" && len(ids) > requestTokens {
		requestTokens = len(ids)
	}
	if err := r.score(ctx, res, workers, in, hashes, requestTokens, bs); err != nil {
		return res, nil
	}
	if res.Fallback == "" && len(spans) > 0 {
		r.forward(res, in, req, tokens, spans)
	}
	return res, nil
}

// checkMediaURLs applies the network-free URL rules to every media part with a URL.
func (r *Router) checkMediaURLs(req *chat.Request) error {
	if r.media == nil {
		return nil
	}
	for _, p := range req.Media {
		if p.URL == "" {
			continue
		}
		if err := r.media.CheckURL(p.URL); err != nil {
			return err
		}
	}
	return nil
}

// parseDetail is the parser's own account of a body it refused, without the "parsing request
// body: " frame and the sentinel's text the message around it already says.
func parseDetail(err error) string {
	d := strings.TrimPrefix(err.Error(), "parsing request body: ")
	return strings.TrimPrefix(d, chat.ErrTooManyParts.Error()+": ")
}

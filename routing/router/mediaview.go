package router

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kvroute/kvroute/kv"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/layout"
)

// Frame count sources of the contract (DESIGN.md §2.3).
const frameCountContainer = "container"

// mediaView resolves every media item of req and expands the prompt into the worker-visible
// tokens. It returns a client error (4xx) as err, or a fallback reason code with a detail when
// exact routing is not possible; exactly one of the expansion, the code or the error is set.
func (r *Router) mediaView(ctx context.Context, req *chat.Request, prompt string, workers []Worker, res *Result) (*layout.Expansion, reason.Code, string, error) {
	switch {
	case req.HasAudio:
		return nil, reason.AudioPresent, "the request has an audio part", nil
	case !r.cfg.FrontendDecoding || r.media == nil:
		return nil, reason.FrontendDecodingOff, "frontend decoding is off", nil
	case r.lmodel == nil || !r.model.Vision:
		return nil, reason.NoMediaSupport, "the model folder has no vision processor", nil
	case req.ClientUUID:
		return nil, reason.ClientUUID, "the client sent a uuid on a media part", nil
	case req.MMProcessorKwargs:
		return nil, reason.MMProcessorKwargs, "the request sets mm_processor_kwargs", nil
	case req.AdjacentVideos:
		return nil, reason.AdjacentVideos, "two video parts are adjacent in one message", nil
	}
	for _, p := range req.Media {
		if p.Embedded || p.URL == "" {
			return nil, reason.NoMediaSupport, "a media part has no URL (embeddings are not decoded)", nil
		}
		if p.NoSplice {
			// vLLM would read another media key of this part first: a forwarded uuid could
			// change what the worker takes the part for.
			return nil, reason.NoMediaSupport, "a media part carries more than one media key", nil
		}
	}
	cs := r.cohortFor(res.Model, workers)
	if cs.err != nil {
		return nil, reason.CodeOf(cs.err), cs.err.Error(), nil
	}
	for _, w := range workers {
		if w.Engine == kv.EngineSGLang && !w.hasFeature(kv.FeatureMMHashes) {
			return nil, reason.EngineNoMMHashes, "worker " + w.ID + " is SGLang without mm_hashes forwarding", nil
		}
	}
	if r.verify.mismatched(res.Model, cs.cohort.Digest) {
		return nil, reason.LayoutMismatch, "a worker's KV events disagreed with the router's layout", nil
	}

	if code, detail := mediaMix(cs.cohort.Contract, req.Media); code != "" {
		return nil, code, detail, nil
	}
	rs, code, detail, err := r.resolveAll(ctx, req.Media, cs.cohort.Contract)
	if code != "" {
		res.mediaKey = fetchedKey(rs)
	}
	if err != nil || code != "" {
		return nil, code, detail, err
	}
	items := make([]layout.Media, len(rs))
	for i := range rs {
		items[i] = rs[i].item
	}
	t := time.Now()
	exp, err := cs.adapter.Expand(prompt, items)
	r.stage(ctx, "layout", t)
	if err != nil {
		code := reason.CodeOf(err)
		if code == "" {
			code = reason.LayoutError
		}
		return nil, code, err.Error(), nil
	}
	res.Media = make([]MediaSummary, len(items))
	for i, it := range items {
		s := exp.Spans[i]
		ms := MediaSummary{Kind: it.Kind.String(), Identity: it.Identity.Hex(), Tokens: s.End - s.Start}
		if it.Nemotron != nil {
			// [tubelets, patch rows, patch columns]
			ms.Frames, ms.GridTHW = len(it.Nemotron.Indices), [3]int{it.Nemotron.NumTubelets, it.Nemotron.PatchGridWH[1], it.Nemotron.PatchGridWH[0]}
		} else if it.Video != nil {
			ms.Frames, ms.GridTHW = it.Video.NumFrames, it.Video.GridTHW
		} else {
			ms.Frames, ms.GridTHW = 1, it.Image.GridTHW
		}
		ms.Width, ms.Height = rs[i].width, rs[i].height
		res.Media[i] = ms
	}
	return exp, "", "", nil
}

// resolved is one media item's outcome.
type resolved struct {
	item          layout.Media
	width, height int
	err           error
}

// resolveAll fetches and decodes every media part concurrently and computes its layout. Parts
// of one kind with one URL are resolved once and share the outcome: 32 copies of an image in a
// request (the same data: URL, or the same http URL) cost one fetch or revalidation and one
// decode, not 32 (equal bytes behind different URLs meet in the decoder's single-flight instead).
// The worker fetches each copy itself; a media server answering two fetches of one URL with two
// pictures is the same risk as revalidation (resolver revalidate.go) already takes.
func (r *Router) resolveAll(ctx context.Context, parts []chat.MediaPart, c *layout.Contract) ([]resolved, reason.Code, string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]resolved, len(parts))
	type partKey struct {
		kind blocks.MediaKind
		url  string
	}
	first := make(map[partKey]int, len(parts)) // the first part of each kind and URL
	same := make([]int, len(parts))            // the part whose outcome part i takes
	var wg sync.WaitGroup
	for i := range parts {
		k := partKey{parts[i].Kind, parts[i].URL}
		if j, ok := first[k]; ok {
			same[i] = j
			continue
		}
		first[k], same[i] = i, i
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			out[i] = r.resolveOne(ctx, parts[i], c)
			if code := reason.CodeOf(out[i].err); code.IsClientError() {
				cancel() // the request is rejected: stop the other fetches
			}
		}(i)
	}
	wg.Wait()
	for i, j := range same {
		out[i] = out[j] // the layout values are read-only from here on
	}
	// A client error anywhere rejects the request; report the first in prompt order.
	for _, o := range out {
		if code := reason.CodeOf(o.err); code.IsClientError() {
			return nil, "", "", o.err
		}
	}
	for _, o := range out {
		if o.err != nil {
			code := reason.CodeOf(o.err)
			if code == "" {
				code = reason.IdentityError
			}
			return out, code, o.err.Error(), nil // out: the fetched items' affinity keys
		}
	}
	return out, "", "", nil
}

// mediaMix applies the adapter's limits on the media of one request before anything is fetched:
// nemotron_omni routes exactly only one video and no other media (Dynamo's nemotron.rs rule), since
// its image budget is shared by the request's images and depends on which of them hit vLLM's
// processor cache (golden/nemotron/README.md §1).
func mediaMix(c *layout.Contract, parts []chat.MediaPart) (reason.Code, string) {
	if c.Adapter != layout.AdapterNemotronOmni {
		return "", ""
	}
	if len(parts) != 1 || parts[0].Kind != blocks.Video {
		return reason.MediaMixUnsupported, fmt.Sprintf("adapter %s routes exactly only one video and no other media (the request has %d media items)",
			layout.AdapterNemotronOmni, len(parts))
	}
	return "", ""
}

func (r *Router) resolveOne(ctx context.Context, p chat.MediaPart, c *layout.Contract) resolved {
	if p.Kind == blocks.Image && c.Adapter == layout.AdapterNemotronOmni {
		return resolved{err: reason.New(reason.MediaMixUnsupported, "adapter %s does not route images exactly", layout.AdapterNemotronOmni)}
	}
	if p.Kind == blocks.Image {
		info, err := r.media.Image(ctx, p.URL)
		if err != nil {
			return resolved{err: err}
		}
		budget := r.lmodel.Image
		if c.ImageResize != nil {
			budget = *c.ImageResize
		}
		il, err := layout.LayoutImage(c.Resize, budget, info.Width, info.Height)
		if err != nil {
			return resolved{err: reason.Wrap(reason.LayoutError, err, "image layout")}
		}
		return resolved{item: layout.Media{Kind: blocks.Image, Identity: info.Identity, Image: il}, width: info.Width, height: info.Height}
	}
	info, err := r.media.Video(ctx, p.URL, c)
	if err != nil {
		return resolved{err: err}
	}
	total := info.DecodedFrames
	if c.FrameCountSource == frameCountContainer && info.ContainerFrames != info.DecodedFrames {
		return resolved{err: reason.New(reason.FrameCountMismatch,
			"the container says %d frames, %d decode", info.ContainerFrames, info.DecodedFrames)}
	}
	in := layout.VideoInput{TotalFrames: total, SourceFPS: info.SourceFPS, Width: info.Width, Height: info.Height}
	if c.Adapter == layout.AdapterNemotronOmni {
		return resolveNemotron(c, in, info)
	}
	vl, err := layout.LayoutVideo(c, in)
	if err != nil {
		return resolved{err: reason.Wrap(reason.LayoutError, err, "video layout")}
	}
	if !slices.Equal(vl.Indices, info.Indices) {
		return resolved{err: reason.New(reason.IdentityError, "the identity covers other frames than the layout samples")}
	}
	if ce := r.log.Check(zapcore.DebugLevel, "video routing metadata resolved"); ce != nil {
		ce.Write(zap.Int("frames", vl.NumFrames), zap.Int("width", info.Width), zap.Int("height", info.Height),
			zap.Int("replacement_tokens", vl.VideoPadTokens()), zap.String("identity", info.Identity.Hex()))
	}
	return resolved{item: layout.Media{Kind: blocks.Video, Identity: info.Identity, Video: vl}, width: info.Width, height: info.Height}
}

// resolveNemotron lays out a decoded clip under a nemotron_omni contract.
func resolveNemotron(c *layout.Contract, in layout.VideoInput, info *VideoInfo) resolved {
	nl, err := layout.LayoutNemotronVideoFor(c, in)
	if err != nil {
		return resolved{err: reason.Wrap(reason.LayoutError, err, "video layout")}
	}
	if !slices.Equal(nl.Indices, info.Indices) {
		return resolved{err: reason.New(reason.IdentityError, "the identity covers other frames than the layout samples")}
	}
	return resolved{item: layout.Media{Kind: blocks.Video, Identity: info.Identity, Nemotron: nl}, width: info.Width, height: info.Height}
}

package layout

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/reason"
)

// Tokenizer encodes text as Hugging Face encode(text, add_special_tokens=False) does: added
// (special) tokens inside the text become their single ids, nothing is added around it.
// routing/tokenizer.Tokenizer implements it. Implementations must be safe for concurrent use.
type Tokenizer interface {
	Encode(text string) []uint32
}

// The Qwen3-VL special token strings; NewQwen3VL checks that each encodes to its contract id.
const (
	visionStartText = "<|vision_start|>"
	visionEndText   = "<|vision_end|>"
	imagePadText    = "<|image_pad|>"
	videoPadText    = "<|video_pad|>"
)

// MaxExpandedTokens bounds the worker-visible token count of one expanded prompt.
const MaxExpandedTokens = 1 << 24

// Media is one media item of a request, in prompt order, with its layout.
type Media struct {
	Kind blocks.MediaKind
	// Identity is the item's content identity (DESIGN.md §3), copied into its span.
	Identity kv.Identity
	// Video is the layout of a video item (Kind blocks.Video); Image that of an image item.
	Video *VideoLayout
	Image *ImageLayout
	// Nemotron is the layout of a video item under adapter nemotron_omni (Video is then nil).
	Nemotron *NemotronVideoLayout
}

// Expansion is a prompt as the worker sees it.
type Expansion struct {
	// Tokens are the worker-visible token ids (placeholders expanded).
	Tokens []uint32
	// Spans are the media placeholder ranges in Tokens, one per media item in prompt order
	// (DESIGN.md §5): an image's run of image pads; a video's first timestamp token to its last
	// group's vision_end.
	Spans []blocks.Span
}

// Qwen3VL is the Qwen3-VL model adapter (DESIGN.md §4) for one agreed contract. It is immutable and
// safe for concurrent use when its tokenizer is.
type Qwen3VL struct {
	c     *Contract
	ids   TokenIDs
	image ImageResize
	tok   Tokenizer
}

// NewQwen3VL returns the adapter for a contract. The contract must Validate; with a model it must
// also fit the model (Model.CheckContract), whose image budget applies when the contract's
// image_resize is null (with a nil model, image_resize must be set). The tokenizer must encode
// each vision special token string to the contract's id. Errors wrap ErrInvalidContract for
// contract problems.
func NewQwen3VL(c *Contract, m *Model, tok Tokenizer) (*Qwen3VL, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	a := &Qwen3VL{c: c, ids: c.TokenIDs, tok: tok}
	if m != nil {
		if err := m.CheckContract(c); err != nil {
			return nil, err
		}
		a.image = m.Image
	}
	if c.ImageResize != nil {
		a.image = *c.ImageResize
	}
	if a.image.MinPixels <= 0 {
		return nil, fmt.Errorf("%w: image_resize is null and no model budget is given", ErrInvalidContract)
	}
	if tok == nil {
		return nil, fmt.Errorf("creating qwen3_vl adapter: no tokenizer")
	}
	for _, s := range []struct {
		text string
		id   uint32
	}{{visionStartText, a.ids.VisionStart}, {visionEndText, a.ids.VisionEnd}, {imagePadText, a.ids.ImagePad}, {videoPadText, a.ids.VideoPad}} {
		if got := tok.Encode(s.text); len(got) != 1 || got[0] != s.id {
			return nil, fmt.Errorf("%w: tokenizer encodes %s as %v, contract says %d", ErrInvalidContract, s.text, got, s.id)
		}
	}
	return a, nil
}

// Contract returns the adapter's contract.
func (a *Qwen3VL) Contract() *Contract { return a.c }

// VideoLayout computes a video's layout (LayoutVideo). Errors are *reason.Error with code
// layout_error wrapping the *StageError; the partial layout is returned with them.
func (a *Qwen3VL) VideoLayout(in VideoInput) (*VideoLayout, error) {
	l, err := LayoutVideo(a.c, in)
	if err != nil {
		return l, reason.Wrap(reason.LayoutError, err, "computing video layout")
	}
	return l, nil
}

// ImageLayout computes an image's layout with the contract's (or the model's) image budget.
// Errors are *reason.Error with code layout_error.
func (a *Qwen3VL) ImageLayout(width, height int) (*ImageLayout, error) {
	l, err := LayoutImage(a.c.Resize, a.image, width, height)
	if err != nil {
		return nil, reason.Wrap(reason.LayoutError, err, "computing image layout")
	}
	return l, nil
}

// TimestampTokens tokenizes one timestamp text on its own (vLLM's get_video_repl).
func (a *Qwen3VL) TimestampTokens(text string) []uint32 { return a.tok.Encode(text) }

// VideoReplacement returns the worker-visible tokens that replace a video's placeholder, each
// timestamp text tokenized alone: per group, the timestamp tokens, vision_start, TokensPerGroup
// video pads, vision_end. The placeholder it replaces is the template's bare <|video_pad|>
// (bare_video_token) or the whole <|vision_start|><|video_pad|><|vision_end|>
// (vision_wrapped_video_token); the replacement is the same.
func (a *Qwen3VL) VideoReplacement(l *VideoLayout) ([]uint32, error) {
	if err := checkVideo(l); err != nil {
		return nil, err
	}
	return a.appendVideo(nil, l)
}

func checkVideo(l *VideoLayout) error {
	if l == nil || l.TokensPerGroup <= 0 || l.GridTHW[0] <= 0 || len(l.TimestampTexts) != l.GridTHW[0] {
		return reason.New(reason.LayoutError, "video layout is incomplete")
	}
	return nil
}

func (a *Qwen3VL) appendVideo(out []uint32, l *VideoLayout) ([]uint32, error) {
	for _, text := range l.TimestampTexts {
		ts := a.tok.Encode(text)
		if len(ts) == 0 {
			return nil, reason.New(reason.LayoutError, "timestamp text %q encodes to no tokens", text)
		}
		if len(out)+len(ts)+l.TokensPerGroup+2 > MaxExpandedTokens {
			return nil, reason.New(reason.LayoutError, "expansion exceeds %d tokens", MaxExpandedTokens)
		}
		out = append(out, ts...)
		out = append(out, a.ids.VisionStart)
		out = appendN(out, a.ids.VideoPad, l.TokensPerGroup)
		out = append(out, a.ids.VisionEnd)
	}
	return out, nil
}

func appendN(out []uint32, id uint32, n int) []uint32 {
	out = slices.Grow(out, n)
	for range n {
		out = append(out, id)
	}
	return out
}

// placeholder is one media placeholder found in the prompt: [start, end) in tokens or bytes.
type placeholder struct {
	kind       blocks.MediaKind
	start, end int
}

// Expand turns the rendered prompt (placeholders unexpanded) into the worker-visible tokens and
// media spans, for the media items in prompt order. Image placeholders (<|image_pad|>) become
// Image.Tokens image pads inside the template's own vision_start … vision_end; video placeholders
// per placeholder_target (see VideoReplacement). With timestamp_tokenization spliced (vLLM) the
// prompt is tokenized and each timestamp text tokenized alone; with whole (the HF processor) the
// expanded prompt text is tokenized in one call, so text touching a video may merge with its first
// timestamp (a video span then starts at the merged token).
//
// Errors are *reason.Error: placeholder_mismatch when the prompt's placeholders (count, kind or
// order) do not match media, or a video placeholder is not wrapped as the target requires;
// layout_error for an incomplete layout, an expansion over MaxExpandedTokens, or a whole-prompt
// tokenization that does not reproduce the expected runs.
func (a *Qwen3VL) Expand(prompt string, media []Media) (*Expansion, error) {
	return a.ExpandEncoded(prompt, nil, media)
}

// ExpandEncoded is Expand for a prompt whose tokens are already known (ids must be
// tok.Encode(prompt), e.g. from routing/model's PromptTokens): with spliced timestamp tokenization
// they are used instead of encoding the prompt again; nil ids, or whole tokenization, encode it.
func (a *Qwen3VL) ExpandEncoded(prompt string, ids []uint32, media []Media) (*Expansion, error) {
	for i, m := range media {
		switch {
		case m.Kind == blocks.Video:
			if err := checkVideo(m.Video); err != nil {
				return nil, reason.Wrap(reason.LayoutError, err, "media item %d", i)
			}
		case m.Kind == blocks.Image:
			if m.Image == nil || m.Image.Tokens <= 0 {
				return nil, reason.New(reason.LayoutError, "media item %d: image layout is incomplete", i)
			}
		default:
			return nil, reason.New(reason.LayoutError, "media item %d: unknown kind %v", i, m.Kind)
		}
	}
	if a.c.TimestampTokenization == TimestampsWhole {
		return a.expandWhole(prompt, media)
	}
	if ids == nil {
		ids = a.tok.Encode(prompt)
	}
	return a.expandSpliced(ids, media)
}

func matchKinds(places []placeholder, media []Media) error {
	kinds := func(n int, at func(int) blocks.MediaKind) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(at(i).String())
		}
		return "[" + b.String() + "]"
	}
	same := len(places) == len(media)
	for i := 0; same && i < len(places); i++ {
		same = places[i].kind == media[i].Kind
	}
	if !same {
		return reason.New(reason.PlaceholderMismatch, "prompt placeholders %s do not match request media %s",
			kinds(len(places), func(i int) blocks.MediaKind { return places[i].kind }),
			kinds(len(media), func(i int) blocks.MediaKind { return media[i].Kind }))
	}
	return nil
}

// findTokenPlaceholders locates the media placeholders in prompt tokens.
func (a *Qwen3VL) findTokenPlaceholders(ids []uint32) ([]placeholder, error) {
	wrapped := a.c.PlaceholderTarget == PlaceholderVisionWrappedVideoToken
	var places []placeholder
	for i, id := range ids {
		switch id {
		case a.ids.ImagePad:
			places = append(places, placeholder{blocks.Image, i, i + 1})
		case a.ids.VideoPad:
			if !wrapped {
				places = append(places, placeholder{blocks.Video, i, i + 1})
				continue
			}
			if i == 0 || i+1 >= len(ids) || ids[i-1] != a.ids.VisionStart || ids[i+1] != a.ids.VisionEnd {
				return nil, reason.New(reason.PlaceholderMismatch,
					"video placeholder at token %d is not wrapped in vision_start/vision_end", i)
			}
			places = append(places, placeholder{blocks.Video, i - 1, i + 2})
		}
	}
	return places, nil
}

func (a *Qwen3VL) expandSpliced(ids []uint32, media []Media) (*Expansion, error) {
	places, err := a.findTokenPlaceholders(ids)
	if err != nil {
		return nil, err
	}
	if err := matchKinds(places, media); err != nil {
		return nil, err
	}
	size := len(ids)
	for _, m := range media {
		if m.Kind == blocks.Video {
			size += m.Video.VideoPadTokens() + 12*m.Video.GridTHW[0]
		} else {
			size += m.Image.Tokens
		}
	}
	if size > MaxExpandedTokens {
		return nil, reason.New(reason.LayoutError, "expansion of about %d tokens exceeds %d", size, MaxExpandedTokens)
	}
	ex := &Expansion{Tokens: make([]uint32, 0, size), Spans: make([]blocks.Span, 0, len(media))}
	prev := 0
	for i, p := range places {
		ex.Tokens = append(ex.Tokens, ids[prev:p.start]...)
		prev = p.end
		start := len(ex.Tokens)
		m := media[i]
		if m.Kind == blocks.Image {
			ex.Tokens = appendN(ex.Tokens, a.ids.ImagePad, m.Image.Tokens)
		} else if ex.Tokens, err = a.appendVideo(ex.Tokens, m.Video); err != nil {
			return nil, err
		}
		ex.Spans = append(ex.Spans, blocks.Span{Start: start, End: len(ex.Tokens), Identity: m.Identity, Kind: m.Kind})
	}
	ex.Tokens = append(ex.Tokens, ids[prev:]...)
	if len(ex.Tokens) > MaxExpandedTokens {
		return nil, reason.New(reason.LayoutError, "expansion of %d tokens exceeds %d", len(ex.Tokens), MaxExpandedTokens)
	}
	return ex, nil
}

package layout

import (
	"fmt"
	"slices"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/reason"
)

// NemotronOmni is the NVIDIA Nemotron 3 Nano Omni model adapter (DESIGN.md §4,
// golden/nemotron/README.md) for one agreed nemotron_omni contract. Exact routing covers a request
// with exactly one video and no other media, as Dynamo's nemotron.rs does: any other mix is
// reason media_mix_unsupported (image layouts depend on a request-wide budget and on which items
// hit vLLM's processor cache, README §1). It is immutable and safe for concurrent use when its
// tokenizer is.
type NemotronOmni struct {
	c   *Contract
	ids TokenIDs
	tok Tokenizer
	// video is tok.Encode("<video>"): the prompt tokens vLLM replaces with the item's span.
	video []uint32
}

// NewNemotronOmni returns the adapter for a contract. The contract must Validate with adapter
// nemotron_omni; with a model it must also fit the model (Model.CheckContract: geometry, image
// budget and <image> id of config.json). The tokenizer must encode <img>, </img> and <image> to
// the contract's vision_start, vision_end and image_pad ids (one id each) and <video> to at least
// one id. Errors wrap ErrInvalidContract for contract problems.
func NewNemotronOmni(c *Contract, m *Model, tok Tokenizer) (*NemotronOmni, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Adapter != AdapterNemotronOmni {
		return nil, fmt.Errorf("%w: adapter %q is not %s", ErrInvalidContract, c.Adapter, AdapterNemotronOmni)
	}
	if m != nil {
		if err := m.CheckContract(c); err != nil {
			return nil, err
		}
	}
	if tok == nil {
		return nil, fmt.Errorf("creating nemotron_omni adapter: no tokenizer")
	}
	a := &NemotronOmni{c: c, ids: c.TokenIDs, tok: tok, video: tok.Encode(NemotronVideoToken)}
	for _, s := range []struct {
		text string
		id   uint32
	}{{NemotronImgStart, a.ids.VisionStart}, {NemotronImgEnd, a.ids.VisionEnd}, {NemotronImgContext, a.ids.ImagePad}} {
		if got := tok.Encode(s.text); len(got) != 1 || got[0] != s.id {
			return nil, fmt.Errorf("%w: tokenizer encodes %s as %v, contract says %d", ErrInvalidContract, s.text, got, s.id)
		}
	}
	if len(a.video) == 0 {
		return nil, fmt.Errorf("%w: tokenizer encodes %s as no tokens", ErrInvalidContract, NemotronVideoToken)
	}
	return a, nil
}

// Contract returns the adapter's contract.
func (a *NemotronOmni) Contract() *Contract { return a.c }

// VideoLayout computes a video's layout under the contract (LayoutNemotronVideoFor). Errors are
// *reason.Error with code layout_error wrapping the *StageError; the partial layout comes with them.
func (a *NemotronOmni) VideoLayout(in VideoInput) (*NemotronVideoLayout, error) {
	l, err := LayoutNemotronVideoFor(a.c, in)
	if err != nil {
		return l, reason.Wrap(reason.LayoutError, err, "computing video layout")
	}
	return l, nil
}

// Replacement returns the token ids of segments as vLLM builds them (get_video_repl): each text
// piece encoded on its own, <img> and </img> as their ids, a placeholder as Count <image> ids.
func (a *NemotronOmni) Replacement(segs []Segment) ([]uint32, error) {
	return a.appendSegments(nil, segs)
}

func (a *NemotronOmni) appendSegments(out []uint32, segs []Segment) ([]uint32, error) {
	for _, s := range segs {
		switch {
		case s.Placeholder != "":
			if s.Count < 0 || len(out)+s.Count > MaxExpandedTokens {
				return nil, reason.New(reason.LayoutError, "expansion exceeds %d tokens", MaxExpandedTokens)
			}
			out = appendN(out, a.ids.ImagePad, s.Count)
		case s.Special && s.Text == NemotronImgStart:
			out = append(out, a.ids.VisionStart)
		case s.Special && s.Text == NemotronImgEnd:
			out = append(out, a.ids.VisionEnd)
		case s.Special:
			return nil, reason.New(reason.LayoutError, "unknown special segment %q", s.Text)
		default:
			out = append(out, a.tok.Encode(s.Text)...)
		}
	}
	return out, nil
}

// Expand is ExpandEncoded with the prompt encoded here.
func (a *NemotronOmni) Expand(prompt string, media []Media) (*Expansion, error) {
	return a.ExpandEncoded(prompt, nil, media)
}

// ExpandEncoded replaces the one <video> placeholder of the prompt (the token run
// tok.Encode("<video>"), matched in the prompt's ids as vLLM's token match does) with the video's
// replacement; the item's span is the whole replacement, first separator token to last </img>
// (README §1 step 7). ids must be tok.Encode(prompt) or nil.
//
// Errors are *reason.Error: media_mix_unsupported unless media is exactly one video with a
// Nemotron layout; placeholder_mismatch when the prompt does not hold exactly one <video> run, or
// holds <image> ids (an image placeholder); layout_error for an expansion over MaxExpandedTokens.
func (a *NemotronOmni) ExpandEncoded(prompt string, ids []uint32, media []Media) (*Expansion, error) {
	if len(media) != 1 || media[0].Kind != blocks.Video {
		return nil, reason.New(reason.MediaMixUnsupported, "adapter %s routes exactly only a request with one video and no other media (got %d items)",
			AdapterNemotronOmni, len(media))
	}
	l := media[0].Nemotron
	if l == nil || len(l.Separators) == 0 || len(l.Separators) != len(l.PlaceholderCounts) {
		return nil, reason.New(reason.LayoutError, "media item 0: nemotron video layout is incomplete")
	}
	if ids == nil {
		ids = a.tok.Encode(prompt)
	}
	if i := slices.Index(ids, a.ids.ImagePad); i >= 0 {
		return nil, reason.New(reason.PlaceholderMismatch, "the prompt holds an %s token at %d but the request has no image", NemotronImgContext, i)
	}
	var at []int
	for i := 0; i+len(a.video) <= len(ids); {
		if slices.Equal(ids[i:i+len(a.video)], a.video) {
			at = append(at, i)
			i += len(a.video)
			continue
		}
		i++
	}
	if len(at) != 1 {
		return nil, reason.New(reason.PlaceholderMismatch, "the prompt holds %d %s placeholders, want 1", len(at), NemotronVideoToken)
	}
	size := len(ids) + l.TotalPlaceholderTokens() + 2*len(l.Separators)
	if size > MaxExpandedTokens {
		return nil, reason.New(reason.LayoutError, "expansion of about %d tokens exceeds %d", size, MaxExpandedTokens)
	}
	out := make([]uint32, 0, size+32*len(l.Separators))
	out = append(out, ids[:at[0]]...)
	start := len(out)
	out, err := a.appendSegments(out, l.Segments())
	if err != nil {
		return nil, err
	}
	end := len(out)
	out = append(out, ids[at[0]+len(a.video):]...)
	if len(out) > MaxExpandedTokens {
		return nil, reason.New(reason.LayoutError, "expansion of %d tokens exceeds %d", len(out), MaxExpandedTokens)
	}
	return &Expansion{Tokens: out, Spans: []blocks.Span{{Start: start, End: end, Identity: media[0].Identity, Kind: blocks.Video}}}, nil
}

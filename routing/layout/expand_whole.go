package layout

import (
	"strings"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/reason"
)

// findTextPlaceholders locates the media placeholders in the rendered prompt text (byte ranges).
func (a *Qwen3VL) findTextPlaceholders(prompt string) ([]placeholder, error) {
	wrapped := a.c.PlaceholderTarget == PlaceholderVisionWrappedVideoToken
	var places []placeholder
	for i := 0; i < len(prompt); {
		j := strings.Index(prompt[i:], "<|")
		if j < 0 {
			break
		}
		k := i + j
		rest := prompt[k:]
		switch {
		case strings.HasPrefix(rest, imagePadText):
			places = append(places, placeholder{blocks.Image, k, k + len(imagePadText)})
			i = k + len(imagePadText)
		case strings.HasPrefix(rest, videoPadText):
			end := k + len(videoPadText)
			if !wrapped {
				places = append(places, placeholder{blocks.Video, k, end})
				i = end
				continue
			}
			if !strings.HasSuffix(prompt[:k], visionStartText) || !strings.HasPrefix(prompt[end:], visionEndText) {
				return nil, reason.New(reason.PlaceholderMismatch,
					"video placeholder at byte %d is not wrapped in vision_start/vision_end", k)
			}
			places = append(places, placeholder{blocks.Video, k - len(visionStartText), end + len(visionEndText)})
			i = end + len(visionEndText)
		default:
			i = k + 2
		}
	}
	return places, nil
}

// expandWhole builds the expanded prompt text (timestamp texts, vision tokens and pads written as
// text), tokenizes it in one call, and finds each item's span in the result: an image's span is
// its run of pads; a video's span starts at the first token where the whole encoding departs from
// the encoding of the text before the video (the token holding the first timestamp character,
// merged with preceding punctuation when the pre-tokenizer joins them) and ends after its last
// group's vision_end.
func (a *Qwen3VL) expandWhole(prompt string, media []Media) (*Expansion, error) {
	places, err := a.findTextPlaceholders(prompt)
	if err != nil {
		return nil, err
	}
	if err := matchKinds(places, media); err != nil {
		return nil, err
	}
	size := len(prompt)
	for _, m := range media {
		if m.Kind == blocks.Video {
			size += m.Video.VideoPadTokens()*len(videoPadText) + 64*m.Video.GridTHW[0]
		} else {
			size += m.Image.Tokens * len(imagePadText)
		}
	}
	if size > MaxExpandedTokens*len(videoPadText) {
		return nil, reason.New(reason.LayoutError, "expanded prompt of about %d bytes is too large", size)
	}
	var b strings.Builder
	b.Grow(size)
	starts := make([]int, len(places))
	prev := 0
	for i, p := range places {
		b.WriteString(prompt[prev:p.start])
		prev = p.end
		starts[i] = b.Len()
		m := media[i]
		if m.Kind == blocks.Image {
			b.WriteString(strings.Repeat(imagePadText, m.Image.Tokens))
			continue
		}
		for _, text := range m.Video.TimestampTexts {
			b.WriteString(text)
			b.WriteString(visionStartText)
			b.WriteString(strings.Repeat(videoPadText, m.Video.TokensPerGroup))
			b.WriteString(visionEndText)
		}
	}
	b.WriteString(prompt[prev:])
	text := b.String()
	whole := a.tok.Encode(text)
	if len(whole) > MaxExpandedTokens {
		return nil, reason.New(reason.LayoutError, "expansion of %d tokens exceeds %d", len(whole), MaxExpandedTokens)
	}
	ex := &Expansion{Tokens: whole, Spans: make([]blocks.Span, 0, len(media))}
	floor := 0
	for i, m := range media {
		start := commonPrefix(a.tok.Encode(text[:starts[i]]), whole)
		if start < floor {
			return nil, reason.New(reason.LayoutError, "media item %d: its tokens merge with the previous item's", i)
		}
		end, ok := a.matchItem(whole, start, m)
		if !ok {
			return nil, reason.New(reason.LayoutError,
				"media item %d: whole-prompt tokenization does not reproduce its layout at token %d", i, start)
		}
		ex.Spans = append(ex.Spans, blocks.Span{Start: start, End: end, Identity: m.Identity, Kind: m.Kind})
		floor = end
	}
	return ex, nil
}

func commonPrefix(a, b []uint32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// matchItem checks that whole holds item m's layout from start on and returns its span end.
func (a *Qwen3VL) matchItem(whole []uint32, start int, m Media) (int, bool) {
	run := func(pos, n int, id uint32) bool {
		if pos+n > len(whole) {
			return false
		}
		for _, t := range whole[pos : pos+n] {
			if t != id {
				return false
			}
		}
		return true
	}
	if m.Kind == blocks.Image {
		return start + m.Image.Tokens, run(start, m.Image.Tokens, a.ids.ImagePad)
	}
	pos := start
	tpg := m.Video.TokensPerGroup
	for range m.Video.GridTHW[0] {
		q := pos
		for q < len(whole) && whole[q] != a.ids.VisionStart {
			if whole[q] == a.ids.VisionEnd || whole[q] == a.ids.VideoPad || whole[q] == a.ids.ImagePad {
				return 0, false
			}
			q++
		}
		if q == pos || !run(q+1, tpg, a.ids.VideoPad) || q+1+tpg >= len(whole) || whole[q+1+tpg] != a.ids.VisionEnd {
			return 0, false
		}
		pos = q + tpg + 2
	}
	return pos, true
}

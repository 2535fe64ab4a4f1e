package chat

import (
	"errors"
	"fmt"

	"github.com/kvroute/kvroute/kv/blocks"
)

// partKind is a content part's meaning after vLLM's part resolution.
type partKind uint8

const (
	partSkip partKind = iota // dropped (text or refusal part whose value is missing or null)
	partText
	partToolReference
	partImage
	partVideo
	partAudio
)

// part is one resolved content part.
type part struct {
	kind partKind
	// text is the text of a text part (textNull: the value was null or missing, which vLLM
	// passes on as None for input_text, output_text and thinking), or a tool_reference name.
	text     string
	textNull bool
	media    MediaPart // for image and video parts (Message and Index unset)
}

// typedParts maps a part "type" to its kind and the member holding its value
// (vLLM chat_utils MM_PARSER_MAP @001eadcf).
var typedParts = map[string]struct {
	kind   partKind
	member string
}{
	"text":           {partText, "text"},
	"input_text":     {partText, "text"},
	"output_text":    {partText, "text"},
	"refusal":        {partText, "refusal"},
	"thinking":       {partText, "thinking"},
	"tool_reference": {partToolReference, "name"},
	"image_url":      {partImage, "image_url"},
	"input_image":    {partImage, "image_url"},
	"image_pil":      {partImage, "image_pil"},
	"image_embeds":   {partImage, "image_embeds"},
	"audio_url":      {partAudio, "audio_url"},
	"input_audio":    {partAudio, "input_audio"},
	"audio_embeds":   {partAudio, "audio_embeds"},
	"video_url":      {partVideo, "video_url"},
}

// keyedParts is the order in which vLLM finds a part's kind from its keys when the part has no
// "type" or has a uuid (_parse_chat_message_content_mm_part).
var keyedParts = []struct {
	key  string
	kind partKind
}{
	{"image_url", partImage}, {"image_pil", partImage}, {"image_embeds", partImage},
	{"audio_embeds", partAudio}, {"prompt_embeds", partSkip}, {"audio_url", partAudio},
	{"input_audio", partAudio}, {"video_url", partVideo}, {"tool_reference", partToolReference},
}

// resolvePart resolves one content part the way vLLM's chat_utils does (@001eadcf): a bare
// string is text; a part with a string "type" and no uuid goes by its type; a part without a
// type, or with a uuid, goes by the first media key it has (image_url, image_pil,
// image_embeds, audio_embeds, prompt_embeds, audio_url, input_audio when not null, video_url,
// tool_reference). Text and refusal parts whose value is missing or null are dropped.
// prompt_embeds parts (a vLLM server option) and unknown types are errors.
func resolvePart(p *node) (part, error) {
	if p.kind == kindString {
		return part{kind: partText, text: p.str}, nil
	}
	if p.kind != kindObject {
		return part{}, fmt.Errorf("part is %s, not an object or string", p.kind)
	}
	t := p.get("type")
	uuid := p.get("uuid")
	if !t.isNull() && t.kind != kindString {
		return part{}, fmt.Errorf("part type is %s, not a string", t.kind)
	}
	if !t.isNull() && uuid.isNull() {
		tp, ok := typedParts[t.str]
		if !ok {
			return part{}, fmt.Errorf("unsupported part type %q", t.str)
		}
		pp, err := valuePart(p, tp.kind, tp.member, t.str)
		if err == nil && (pp.kind == partImage || pp.kind == partVideo) && keyedMember(p) != tp.member {
			pp.media.NoSplice = true
		}
		return pp, err
	}
	for _, k := range keyedParts {
		v := p.get(k.key)
		if v == nil || (k.key == "input_audio" && v.isNull()) {
			continue
		}
		if k.key == "prompt_embeds" {
			return part{}, errors.New("prompt_embeds parts are not supported")
		}
		return valuePart(p, k.kind, k.key, k.key)
	}
	if !t.isNull() {
		return part{}, fmt.Errorf("%s part with a uuid but no media key", t.str)
	}
	return part{}, errors.New("part has no type")
}

// keyedMember returns the member vLLM would resolve p by if it had a uuid ("" for none).
func keyedMember(p *node) string {
	for _, k := range keyedParts {
		if v := p.get(k.key); v != nil && !(k.key == "input_audio" && v.isNull()) {
			return k.key
		}
	}
	return ""
}

// valuePart reads the value member of a part of a known kind.
func valuePart(p *node, kind partKind, member, typ string) (part, error) {
	v := p.get(member)
	switch kind {
	case partText, partToolReference:
		if v.isNull() {
			if typ == "text" || typ == "refusal" {
				return part{kind: partSkip}, nil
			}
			return part{kind: kind, textNull: true}, nil
		}
		if v.kind != kindString {
			return part{}, fmt.Errorf("%s part: %s is %s, not a string", typ, member, v.kind)
		}
		return part{kind: kind, text: v.str}, nil
	case partAudio:
		return part{kind: kind}, nil
	}
	mp := MediaPart{Kind: blocks.Image, ObjStart: p.start, ObjEnd: p.end}
	if kind == partVideo {
		mp.Kind = blocks.Video
	}
	if member == "image_pil" || member == "image_embeds" {
		mp.Embedded = true
	} else {
		switch {
		case v.isNull():
		case v.kind == kindString:
			mp.URL = v.str
		case v.kind == kindObject:
			if url := v.get("url"); !url.isNull() {
				if url.kind != kindString {
					return part{}, fmt.Errorf("%s.url is %s, not a string", member, url.kind)
				}
				mp.URL = url.str
			}
		default:
			return part{}, fmt.Errorf("%s is %s, not an object or string", member, v.kind)
		}
	}
	if id := p.get("uuid"); !id.isNull() {
		mp.HasUUID = true
		if id.kind == kindString || id.kind == kindNumber {
			mp.UUID = id.str // vLLM applies str(); other types still count as a client uuid
		}
	}
	if !mp.HasUUID && !mp.Embedded && mp.URL == "" {
		return part{}, fmt.Errorf("%s part without a url", typ)
	}
	return part{kind: kind, media: mp}, nil
}

package sim

import (
	"fmt"
	"regexp"

	"github.com/kvroute/kvroute/kv/blocks"
)

// maxTimestampTokens bounds the tokens of one timestamp text ("<12345.5 seconds>" is under 12).
const maxTimestampTokens = 16

// timestampSuffix matches text that ends with a Qwen3-VL timestamp ("<0.3 seconds>"); with whole
// timestamp tokenization its first token may carry text before the '<'.
var timestampSuffix = regexp.MustCompile(`<[0-9]+\.[0-9]+ seconds>$`)

// timestampText matches one timestamp text alone.
var timestampText = regexp.MustCompile(`^<[0-9]+\.[0-9]+ seconds>$`)

// padRun is one maximal run of one placeholder id.
type padRun struct {
	video      bool
	start, end int
}

// oracleSpans reads the media spans of the oracle tokens (vLLM's placeholder ranges, DESIGN.md §5):
// an image is its run of image pads; a video runs from its first group's timestamp to its last
// group's vision_end, where consecutive groups are pad runs separated only by vision_end, a
// timestamp and vision_start. The spans must match the request's media items in number and kind;
// each span takes its item's identity.
func (f *Frontend) oracleSpans(items []item) ([]blocks.Span, error) {
	toks := f.oracle
	ids := f.contract.TokenIDs
	var runs []padRun
	for i := 0; i < len(toks); {
		t := toks[i]
		if t != ids.ImagePad && t != ids.VideoPad {
			i++
			continue
		}
		j := i
		for j < len(toks) && toks[j] == t {
			j++
		}
		runs = append(runs, padRun{video: t == ids.VideoPad, start: i, end: j})
		i = j
	}
	var spans []blocks.Span
	lastVideoEnd := -1 // end of the previous run when it was a video run
	for _, r := range runs {
		if !r.video {
			spans = append(spans, blocks.Span{Start: r.start, End: r.end, Kind: blocks.Image})
			lastVideoEnd = -1
			continue
		}
		if r.start == 0 || toks[r.start-1] != ids.VisionStart || r.end >= len(toks) || toks[r.end] != ids.VisionEnd {
			return nil, fmt.Errorf("oracle tokens: video pad run at %d is not wrapped in vision_start/vision_end", r.start)
		}
		if lastVideoEnd >= 0 && f.groupGap(toks[lastVideoEnd:r.start]) {
			spans[len(spans)-1].End = r.end + 1
		} else {
			start, err := f.timestampStart(r.start - 1)
			if err != nil {
				return nil, err
			}
			spans = append(spans, blocks.Span{Start: start, End: r.end + 1, Kind: blocks.Video})
		}
		lastVideoEnd = r.end
	}
	if len(spans) != len(items) {
		return nil, fmt.Errorf("oracle tokens hold %d media items, the request has %d", len(spans), len(items))
	}
	for i := range spans {
		if spans[i].Kind != items[i].media.Kind {
			return nil, fmt.Errorf("oracle tokens: media item %d is a %s, the request's is a %s", i, spans[i].Kind, items[i].media.Kind)
		}
		spans[i].Identity = items[i].identity
	}
	return spans, nil
}

// groupGap reports whether seg (the tokens between two video pad runs) is vision_end, one timestamp
// text, vision_start: the two runs are groups of one video.
func (f *Frontend) groupGap(seg []uint32) bool {
	ids := f.contract.TokenIDs
	n := len(seg)
	if n < 3 || n > maxTimestampTokens+2 || seg[0] != ids.VisionEnd || seg[n-1] != ids.VisionStart {
		return false
	}
	return timestampText.MatchString(f.model.Tokenizer.Decode(seg[1 : n-1]))
}

// timestampStart returns where the timestamp text before the vision_start at vs begins: the start
// of the shortest token suffix before vs that decodes to text ending in a timestamp.
func (f *Frontend) timestampStart(vs int) (int, error) {
	for l := 1; l <= maxTimestampTokens && vs-l >= 0; l++ {
		if timestampSuffix.MatchString(f.model.Tokenizer.Decode(f.oracle[vs-l : vs])) {
			return vs - l, nil
		}
	}
	return 0, fmt.Errorf("oracle tokens: no timestamp before the vision_start at %d", vs)
}

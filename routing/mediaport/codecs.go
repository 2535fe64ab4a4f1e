package mediaport

import (
	"fmt"
	"slices"
	"strings"
)

// The video codecs an allow-list may name (DESIGN.md §6, "The media library"): vp8 and vp9 by
// default (royalty-free); av1, h264 and hevc on the operator's request (H.264 and HEVC decoding
// may need a patent licence in some places).
var knownCodecs = []string{"av1", "h264", "hevc", "vp8", "vp9"}

// DefaultCodecs is the default allow-list: vp8 and vp9.
var DefaultCodecs = Codecs{"vp8", "vp9"}

// Codecs is a video codec allow-list (`media { codecs … }`, `kvroute identity --codecs`): sorted,
// without duplicates. A clip whose codec is not listed falls back with unsupported_codec. The
// nil list means DefaultCodecs.
type Codecs []string

// ParseCodecs checks names (each one of av1, h264, hevc, vp8, vp9, lower case) and returns them
// as an allow-list; an empty list is an error (a router that decodes nothing is
// `frontend_decoding off`).
func ParseCodecs(names []string) (Codecs, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("codecs: at least one of %s", strings.Join(knownCodecs, ", "))
	}
	out := make(Codecs, 0, len(names))
	for _, n := range names {
		if !slices.Contains(knownCodecs, n) {
			return nil, fmt.Errorf("codecs: unknown codec %q (known: %s)", n, strings.Join(knownCodecs, ", "))
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Allows reports whether codec (FFmpeg's codec name as VideoInfo.Codec reports it: "vp8",
// "vp9", "h264", "hevc", "av1") is in the list. The media decoder consults it before it opens
// a decoder for a stream.
func (c Codecs) Allows(codec string) bool {
	if c == nil {
		c = DefaultCodecs
	}
	return slices.Contains(c, codec)
}

// String is the list joined by commas ("vp8,vp9").
func (c Codecs) String() string {
	if c == nil {
		c = DefaultCodecs
	}
	return strings.Join(c, ",")
}

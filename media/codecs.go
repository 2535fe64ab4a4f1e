package media

import (
	"fmt"
	"slices"
	"strings"

	"github.com/asticode/go-astiav"
)

// videoCodec is one codec the decoder may open (DESIGN.md §6, "The media library"): its name in
// the allow-list (`media { codecs … }`, FFmpeg's codec name), its codec id and the one FFmpeg
// decoder used for it, chosen by name so that the linked FFmpeg's registration order never
// decides (FFmpeg's native av1 decoder needs a hardware accelerator; libdav1d decodes in software).
type videoCodec struct {
	name    string
	id      astiav.CodecID
	decoder string
}

// videoCodecs lists every codec an allow-list may name, sorted by name.
var videoCodecs = []videoCodec{
	{"av1", codecIDAV1, "libdav1d"},
	{"h264", astiav.CodecIDH264, "h264"},
	{"hevc", astiav.CodecIDHevc, "hevc"},
	{"vp8", astiav.CodecIDVp8, "vp8"},
	{"vp9", astiav.CodecIDVp9, "vp9"},
}

// DefaultCodecs is the default codec allow-list: the royalty-free vp8 and vp9.
var DefaultCodecs = []string{"vp8", "vp9"}

// codecByID returns the allow-list entry of a codec id, ok false for any other codec.
func codecByID(id astiav.CodecID) (videoCodec, bool) {
	for _, c := range videoCodecs {
		if c.id == id {
			return c, true
		}
	}
	return videoCodec{}, false
}

// allowedCodecs resolves an allow-list (nil: DefaultCodecs) to its entries; an unknown name is an
// error.
func allowedCodecs(names []string) ([]videoCodec, error) {
	if names == nil {
		names = DefaultCodecs
	}
	var out []videoCodec
	for _, n := range names {
		i := slices.IndexFunc(videoCodecs, func(c videoCodec) bool { return c.name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown video codec %q (known: av1, h264, hevc, vp8, vp9)", n)
		}
		if !slices.ContainsFunc(out, func(c videoCodec) bool { return c.name == n }) {
			out = append(out, videoCodecs[i])
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty video codec allow-list")
	}
	return out, nil
}

// codecNames joins the entries' names with commas ("vp8,vp9", as mediaport.Codecs prints a list).
func codecNames(cs []videoCodec) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.name
	}
	return strings.Join(names, ",")
}

// decoderNames is the FFmpeg codec_whitelist of the entries: their decoders, comma-separated.
func decoderNames(cs []videoCodec) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.decoder
	}
	return strings.Join(names, ",")
}

// codecIDs returns the entries' codec ids.
func codecIDs(cs []videoCodec) []astiav.CodecID {
	ids := make([]astiav.CodecID, len(cs))
	for i, c := range cs {
		ids[i] = c.id
	}
	return ids
}

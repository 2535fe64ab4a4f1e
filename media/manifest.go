package media

import (
	"bytes"
)

// manifestKind names the kind of a file that lists other media instead of holding it — a DASH
// manifest, an HLS playlist, an ffconcat list, an SDP session description, a SMIL or playlist
// file, or an FFmpeg protocol reference — or returns "" for anything else. kvroute never follows
// such a list (DESIGN.md §6 "The media library"); the name goes into the media_undecodable
// message so a client learns what it sent. Real containers (EBML, ISO BMFF, IVF) are never
// classified, whatever their metadata contains. The check looks at the first bytes only.
func manifestKind(data []byte) string {
	if len(data) >= 4 && (bytes.HasPrefix(data, []byte{0x1a, 0x45, 0xdf, 0xa3}) || bytes.HasPrefix(data, []byte("DKIF"))) {
		return ""
	}
	if len(data) >= 8 && isBMFFBox(data[4:8]) {
		return ""
	}
	head := data[:min(len(data), 4096)]
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")) // UTF-8 byte order mark
	head = bytes.TrimLeft(head, " \t\r\n")
	lower := bytes.ToLower(head)
	switch {
	case bytes.HasPrefix(lower, []byte("#extm3u")) || bytes.HasPrefix(lower, []byte("#extinf")):
		return "an HLS playlist (M3U)"
	case bytes.HasPrefix(lower, []byte("ffconcat version")):
		return "an ffconcat list"
	case bytes.HasPrefix(lower, []byte("v=0\n")) || bytes.HasPrefix(lower, []byte("v=0\r\n")):
		return "an SDP session description"
	case bytes.HasPrefix(lower, []byte("[playlist]")):
		return "a PLS playlist"
	case bytes.HasPrefix(lower, []byte("<")) && bytes.Contains(lower, []byte("<mpd")):
		return "a DASH manifest (MPD)"
	case bytes.HasPrefix(lower, []byte("<")) && bytes.Contains(lower, []byte("<smil")):
		return "a SMIL playlist"
	case bytes.HasPrefix(lower, []byte("<")) && (bytes.Contains(lower, []byte("<asx")) || bytes.Contains(lower, []byte("<playlist"))):
		return "an XML playlist"
	case bytes.HasPrefix(lower, []byte("<")) && bytes.Contains(lower, []byte("<smoothstreamingmedia")):
		return "a Smooth Streaming manifest"
	}
	for _, p := range []string{"subfile,", "concat:", "concatf:", "file:", "http:", "https:", "tcp:", "udp:", "rtp:", "rtsp:", "data:", "crypto:", "hls+", "cache:", "async:", "pipe:", "fd:"} {
		if bytes.HasPrefix(lower, []byte(p)) {
			return "an FFmpeg protocol reference (" + p + ")"
		}
	}
	return ""
}

// isBMFFBox reports whether b is the type of a box an ISO BMFF / QuickTime file can start with.
func isBMFFBox(b []byte) bool {
	switch string(b) {
	case "ftyp", "moov", "mdat", "free", "skip", "wide", "pnot", "styp", "sidx", "moof", "uuid":
		return true
	}
	return false
}

// externalDataRef reports whether an ISO BMFF / QuickTime file declares a data reference whose
// samples are not in the file itself (a 'dref' entry without the self-contained flag, e.g. a
// 'url ' with a location or a Mac alias): FFmpeg's mov demuxer would open that location with
// enable_drefs. Only the box tree is walked (moov/trak/mdia/minf/dinf/dref), bounded by the data.
func externalDataRef(data []byte) bool {
	if len(data) < 8 || !isBMFFBox(data[4:8]) {
		return false
	}
	var walk func(b []byte, depth int) bool
	walk = func(b []byte, depth int) bool {
		for len(b) >= 8 && depth < 8 {
			size := uint64(be32(b))
			hdr := uint64(8)
			switch {
			case size == 1 && len(b) >= 16:
				size, hdr = uint64(be32(b[8:]))<<32|uint64(be32(b[12:])), 16
			case size == 0:
				size = uint64(len(b))
			}
			if size < hdr || size > uint64(len(b)) {
				return false
			}
			body := b[hdr:size]
			switch string(b[4:8]) {
			case "moov", "trak", "mdia", "minf", "dinf":
				if walk(body, depth+1) {
					return true
				}
			case "dref":
				if len(body) < 8 {
					return false
				}
				e := body[8:] // version+flags, entry count
				for n := be32(body[4:]); n > 0 && len(e) >= 12; n-- {
					es := be32(e)
					if es < 12 || uint64(es) > uint64(len(e)) {
						return false
					}
					if be32(e[8:])&1 == 0 { // flags bit 0: data in this file
						return true
					}
					e = e[es:]
				}
			}
			b = b[size:]
		}
		return false
	}
	return walk(data, 0)
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

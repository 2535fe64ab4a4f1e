package media

import "bytes"

// otherContainer names a real media container kvroute does not open — MPEG transport or program
// stream, AVI, FLV, Ogg, ASF/WMV, RealMedia, YUV4MPEG, or a raw H.264/HEVC/MPEG video bitstream —
// from its signature, or returns "" for anything else. Such a clip holds media the worker may
// well decode, so it is not refused like bytes that are no container at all: it falls back with
// unsupported_codec, is forwarded unchanged and routed on its text prefix and the affinity of
// its bytes (DESIGN.md §6, as for an image format kvroute does not decode). The demuxer
// allow-list (Matroska/WebM, MP4/MOV, IVF) stays what FFmpeg may open. Only the first bytes are
// read; a container kvroute opens is never classified.
func otherContainer(data []byte) string {
	at := func(off int, sig ...byte) bool {
		return len(data) >= off+len(sig) && bytes.Equal(data[off:off+len(sig)], sig)
	}
	switch {
	case at(0, 0x47) && at(188, 0x47) && at(376, 0x47):
		return "an MPEG transport stream"
	case at(4, 0x47) && at(196, 0x47) && at(388, 0x47):
		return "an MPEG transport stream (M2TS, 192-byte packets)"
	case at(0, 0, 0, 1, 0xba):
		return "an MPEG program stream"
	case at(0, 'R', 'I', 'F', 'F') && at(8, 'A', 'V', 'I', ' '):
		return "an AVI file"
	case at(0, 'F', 'L', 'V', 1):
		return "an FLV file"
	case at(0, 'O', 'g', 'g', 'S'):
		return "an Ogg file"
	case at(0, 0x30, 0x26, 0xb2, 0x75, 0x8e, 0x66, 0xcf, 0x11):
		return "an ASF/WMV file"
	case at(0, '.', 'R', 'M', 'F'):
		return "a RealMedia file"
	case at(0, 'Y', 'U', 'V', '4', 'M', 'P', 'E', 'G', '2'):
		return "a YUV4MPEG2 file"
	case at(0, 0, 0, 1, 0xb3):
		return "a raw MPEG-1/2 video bitstream"
	}
	// Annex B start code, then the first NAL unit's header: HEVC VPS/SPS/AUD (checked first: an
	// HEVC AUD's first byte also reads as an H.264 SEI), H.264 SEI/SPS/PPS/AUD.
	nal := -1
	switch {
	case at(0, 0, 0, 0, 1):
		nal = 4
	case at(0, 0, 0, 1):
		nal = 3
	}
	if nal < 0 || len(data) < nal+2 {
		return ""
	}
	switch h := data[nal]; {
	case h&0x81 == 0 && ((h>>1) == 32 || (h>>1) == 33 || (h>>1) == 35) && data[nal+1] == 1:
		return "a raw HEVC bitstream (Annex B)"
	case h&0x80 == 0 && (h&0x1f == 6 || h&0x1f == 7 || h&0x1f == 8 || h&0x1f == 9):
		return "a raw H.264 bitstream (Annex B)"
	}
	return ""
}

package media_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/reason"
)

// TestOtherContainersFallBack: a clip in a real container kvroute does not open (MPEG-TS, AVI,
// FLV, a raw Annex B bitstream, ...) falls back with unsupported_codec naming the container,
// like an image format kvroute does not decode, instead of a 400 (operator test: `ffmpeg -c copy
// clip.ts` of an H.264 clip was refused although the worker serves it). The remuxes are made by
// the ffmpeg CLI (make deps installs it) from a fixture; each is checked to be what FFmpeg
// itself reads.
func TestOtherContainersFallBack(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: makes each remux (MPEG-TS, AVI, FLV, Annex B, ...) with the ffmpeg CLI and probes it, ~4 s")
	}
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Fatal("the ffmpeg CLI is missing: run make deps")
	}
	src := "../testdata/video-codecs/h264_nobf_480x270_24fps_2s.mkv"
	hevc := "../testdata/video-codecs/hevc_main10_320x240_24fps_2s.mkv"
	dir := t.TempDir()
	remux := func(in, name string, args ...string) []byte {
		out := filepath.Join(dir, name)
		cmd := exec.Command(ffmpeg, append(append([]string{"-v", "error", "-i", in, "-c", "copy"}, args...), out)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ffmpeg %s: %v\n%s", name, err, b)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name, want string
		data       []byte
	}{
		{"ts", "an MPEG transport stream", remux(src, "clip.ts", "-f", "mpegts")},
		{"avi", "an AVI file", remux(src, "clip.avi", "-bsf:v", "h264_mp4toannexb", "-f", "avi")},
		{"flv", "an FLV file", remux(src, "clip.flv", "-f", "flv")},
		{"h264 annexb", "a raw H.264 bitstream (Annex B)", remux(src, "clip.h264", "-bsf:v", "h264_mp4toannexb", "-f", "h264")},
		{"hevc annexb", "a raw HEVC bitstream (Annex B)", remux(hevc, "clip.hevc", "-bsf:v", "hevc_mp4toannexb", "-f", "hevc")},
		{"asf", "an ASF/WMV file", append([]byte{0x30, 0x26, 0xb2, 0x75, 0x8e, 0x66, 0xcf, 0x11, 0xa6, 0xd9}, make([]byte, 100)...)},
		{"ogg", "an Ogg file", append([]byte("OggS\x00\x02"), make([]byte, 100)...)},
	}
	dec, err := media.NewDecoder(&media.DecoderConfig{CacheEntries: -1, Codecs: []string{"h264", "hevc", "vp8", "vp9"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		_, err := dec.Decode(context.Background(), c.data, dynamoMaxFrames, media.DecodeOptions{})
		var re *reason.Error
		if !errors.As(err, &re) || re.Code != reason.UnsupportedCodec || !strings.HasPrefix(re.Message, "the video is "+c.want+", a container kvroute does not open") {
			t.Errorf("%s: %v, want unsupported_codec naming %q", c.name, err, c.want)
		}
	}
	// The containers kvroute opens are never classified: the source clip still decodes.
	if _, err := dec.Decode(context.Background(), remux(src, "clip.mp4", "-f", "mp4"), dynamoMaxFrames, media.DecodeOptions{}); err != nil {
		t.Errorf("the MP4 remux: %v", err)
	}
}

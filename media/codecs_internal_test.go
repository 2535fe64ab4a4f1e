package media

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/asticode/go-astiav"

	"github.com/kvroute/kvroute/reason"
)

func allCodecsConfig() *DecoderConfig {
	c := DefaultDecoderConfig()
	c.Codecs = []string{"av1", "h264", "hevc", "vp8", "vp9"}
	return c
}

// TestDecoderByCodecID: each codec opens the one decoder codecs.go names (libdav1d for AV1, FFmpeg's
// native h264 and hevc), whatever FFmpeg's registration order would pick.
func TestDecoderByCodecID(t *testing.T) {
	for path, want := range map[string]string{
		"../testdata/video-codecs/av1_svt_640x360_30fps_2s.mp4":         "libdav1d",
		"../testdata/video-codecs/h264_nobf_480x270_24fps_2s.mkv":       "h264",
		"../testdata/video-codecs/hevc_main10_320x240_24fps_2s.mkv":     "hevc",
		"../testdata/video-codecs/vp9_first1s_copy_640x360.webm":        "vp9",
		"../testdata/video-codecs/h264_lossless_vp9first1s_640x360.mp4": "h264",
	} {
		in, err := openInput(context.Background(), allCodecsConfig(), readFile(t, path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if got := in.codec; got != want {
			t.Errorf("%s: decoder %s, want %s", path, got, want)
		}
		in.close()
	}
	// KV_DECODERS, the ceiling of every allow-list, is exactly the decoders of codecs.go.
	var names []string
	for _, c := range videoCodecs {
		names = append(names, c.decoder)
	}
	slices.Sort(names)
	ceiling := strings.Split(decoderAllowList, ",")
	slices.Sort(ceiling)
	if !slices.Equal(names, ceiling) {
		t.Errorf("KV_DECODERS %q, codecs.go decoders %q", decoderAllowList, names)
	}
}

// TestSizeGuardBeforePicture: an H.264 or HEVC sequence parameter set over the cap is refused in
// get_format, before the decoder allocates a picture: no frame reaches the visitor and the pass
// ends with frame_too_large naming the bitstream size. The container's declared size is checked
// before that (openInput), so the guard is narrowed after the open to reach it.
func TestSizeGuardBeforePicture(t *testing.T) {
	for _, path := range []string{
		"../testdata/video-codecs/h264_bf3_640x360_30fps_3s.mp4",
		"../testdata/video-codecs/hevc_hvc1_640x360_30fps_2s.mp4",
		"../testdata/video-codecs/h264_yuv444_333x197_24fps_2s.mkv",
	} {
		in, err := openInput(context.Background(), allCodecsConfig(), readFile(t, path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		in.guard.free()
		if in.guard, err = installSizeGuard(in.cc, 320, 4096); err != nil {
			t.Fatal(err)
		}
		visited := 0
		n, err := in.decode(context.Background(), func(int, *astiav.Frame) error { visited++; return nil })
		w, h := in.stats.Width, in.stats.Height
		in.close()
		if reason.CodeOf(err) != reason.FrameTooLarge || visited != 0 || n != 0 {
			t.Errorf("%s: err %v, %d frames decoded, %d visited; want frame_too_large before any frame", path, err, n, visited)
			continue
		}
		if want := fmt.Sprintf("bitstream frame size %dx%d", w, h); !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
}

// TestAV1SequenceHeaderSize: the max frame size of the AV1 sequence header, read from av1C and from
// the first packet, is the clip's size (320×240 libaom WebM, 333×197 odd size, 640×360 SVT-AV1 MP4);
// a cap below it is frame_too_large before the decoder is opened.
func TestAV1SequenceHeaderSize(t *testing.T) {
	for path, want := range map[string]frameSize{
		"../testdata/video-codecs/av1_aom_320x240_24fps_2s.webm": {320, 240},
		"../testdata/video-codecs/av1_aom_333x197_24fps_1s.webm": {333, 197},
		"../testdata/video-codecs/av1_svt_640x360_30fps_2s.mp4":  {640, 360},
	} {
		in, err := openInput(context.Background(), allCodecsConfig(), readFile(t, path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got := av1ConfigSizes(in.stream.CodecParameters().ExtraData())
		in.close()
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: av1C sequence header sizes %v, want [%v]", path, got, want)
		}
		c := allCodecsConfig()
		c.Codecs = c.Codecs[:1]
		c.MaxWidth = want.w - 1
		if _, err := openInput(context.Background(), c, readFile(t, path)); reason.CodeOf(err) != reason.FrameTooLarge {
			t.Errorf("%s: cap %d wide: %v, want frame_too_large", path, c.MaxWidth, err)
		}
	}
	// The first temporal unit of a libaom stream repeats the sequence header in band.
	c := allCodecsConfig()
	in, err := openInput(context.Background(), c, readFile(t, "../testdata/video-codecs/av1_aom_333x197_24fps_1s.webm"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.close()
	pkt := astiav.AllocPacket()
	defer pkt.Free()
	for pkt.StreamIndex() != in.stats.StreamIndex || pkt.Size() == 0 {
		pkt.Unref()
		if err := in.fc.ReadFrame(pkt); err != nil {
			t.Fatal(err)
		}
	}
	if got := packetFrameSizes("av1", pkt.Data()); len(got) != 1 || got[0] != (frameSize{333, 197}) {
		t.Errorf("first packet sequence header sizes %v, want [{333 197}]", got)
	}
}

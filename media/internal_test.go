package media

import (
	"context"
	"os"
	"testing"

	"github.com/asticode/go-astiav"

	"github.com/kvroute/kvroute/reason"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFormatContextPointer checks the go-astiav layout formatContextPtr relies on.
func TestFormatContextPointer(t *testing.T) {
	in, err := openInput(context.Background(), DefaultDecoderConfig(), readFile(t, "../testdata/video/vp9_opus_320x240_3s.webm"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.close()
	if got, want := nbStreams(in.fc), in.fc.NbStreams(); got != want || want != 2 {
		t.Fatalf("nb_streams through the raw pointer %d, go-astiav %d, want 2", got, want)
	}
	if in.stats.StreamIndex != 0 || in.stats.Codec != "vp9" {
		t.Fatalf("stream %d codec %s", in.stats.StreamIndex, in.stats.Codec)
	}
}

// firstPacketSizes returns the frame sizes declared by the first video packet of a clip.
func firstPacketSizes(t *testing.T, path string) []frameSize {
	t.Helper()
	in, err := openInput(context.Background(), DefaultDecoderConfig(), readFile(t, path))
	if err != nil {
		t.Fatal(err)
	}
	defer in.close()
	pkt := astiav.AllocPacket()
	defer pkt.Free()
	for {
		if err := in.fc.ReadFrame(pkt); err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		if pkt.StreamIndex() == in.stats.StreamIndex {
			return packetFrameSizes(in.stats.Codec, pkt.Data())
		}
		pkt.Unref()
	}
}

func TestBitstreamFrameSize(t *testing.T) {
	cases := []struct {
		path string
		want frameSize
	}{
		{"../testdata/video/field/bomb_vp8.webm", frameSize{16000, 16000}},
		{"../testdata/video/vp8_320x240_25fps_4s.webm", frameSize{320, 240}},
		{"../testdata/video/vp9_640x360_30fps_10s.webm", frameSize{640, 360}},
		{"../testdata/video/vp9_640x360_30fps_10s.mp4", frameSize{640, 360}},
		{"../testdata/video/field/odd.webm", frameSize{321, 241}},
		{"../testdata/video/field/p2_10bit.webm", frameSize{320, 240}},
		{"../testdata/video/field/altref_vp9.webm", frameSize{320, 240}},
	}
	for _, c := range cases {
		got := firstPacketSizes(t, c.path)
		if len(got) == 0 || got[0] != c.want {
			t.Errorf("%s: sizes %v, want first %v", c.path, got, c.want)
		}
	}
}

func TestVP9Superframe(t *testing.T) {
	// Two frames of 3 and 2 bytes, then the index: marker 0b11000_001 (1-byte sizes, 2 frames).
	p := []byte{1, 2, 3, 4, 5, 0xc1, 3, 2, 0xc1}
	fr := vp9Frames(p)
	if len(fr) != 2 || len(fr[0]) != 3 || len(fr[1]) != 2 || fr[1][0] != 4 {
		t.Fatalf("frames %v", fr)
	}
	// A corrupt index (sizes past the data) never panics.
	_ = vp9Frames([]byte{0xc1, 200, 200, 0xc1})
	if _, ok := vp9FrameSize(nil); ok {
		t.Fatal("empty frame parsed")
	}
}

// TestSlotWait fills every decode slot and checks that the next decode gives up with decode_timeout.
func TestSlotWait(t *testing.T) {
	d, err := NewDecoder(&DecoderConfig{Slots: 1, SlotWait: 1, CacheEntries: -1})
	if err != nil {
		t.Fatal(err)
	}
	d.slots <- struct{}{}
	_, err = d.Decode(context.Background(), readFile(t, "../testdata/video/field/qB_320x240_4fps_10f.webm"), IndexSampler([]int{0}), DecodeOptions{})
	if reason.CodeOf(err) != reason.DecodeTimeout {
		t.Fatalf("err %v, want decode_timeout", err)
	}
	<-d.slots
	if _, err := d.Decode(context.Background(), readFile(t, "../testdata/video/field/qB_320x240_4fps_10f.webm"), IndexSampler([]int{0}), DecodeOptions{}); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// TestNoLeaks decodes good and bad clips and checks that every demuxer/decoder and every scaler was
// freed (field report 30: no AVFrame or AVPacket leaks).
func TestNoLeaks(t *testing.T) {
	d, err := NewDecoder(&DecoderConfig{CacheEntries: -1, MaxDecodedFrames: 50})
	if err != nil {
		t.Fatal(err)
	}
	all := func(total int, _ Stats) ([]int, error) {
		idx := make([]int, total)
		for i := range idx {
			idx[i] = i
		}
		return idx, nil
	}
	for _, p := range []string{
		"../testdata/video/field/altref_vp9.webm", // frame_limit mid-decode (60 > 50)
		"../testdata/video/field/qB_320x240_4fps_10f.webm",
		"../testdata/video/field/vfr.webm",            // two passes
		"../testdata/video/field/bomb_vp8.webm",       // frame_too_large
		"../testdata/video/h264_640x360_30fps_3s.mp4", // unsupported_codec
		"testdata/resolution_change.webm",             // resolution_change after conversions
	} {
		_, _ = d.Decode(context.Background(), readFile(t, p), all, DecodeOptions{})
	}
	if n, m := liveInputs.Load(), liveScalers.Load(); n != 0 || m != 0 {
		t.Fatalf("%d inputs and %d scalers not freed", n, m)
	}
}

// TestAVLevelName names FFmpeg's levels by the values of libavutil/log.h (FFmpeg 5.1): AV_LOG_QUIET
// -8, PANIC 0, FATAL 8, ERROR 16, WARNING 24, INFO 32, VERBOSE 40, DEBUG 48, TRACE 56; a level
// between two takes the more severe name.
func TestAVLevelName(t *testing.T) {
	for level, want := range map[int]string{-8: "panic", 0: "panic", 8: "fatal", 12: "error", 16: "error", 24: "warning",
		32: "info", 40: "verbose", 48: "debug", 49: "trace", 56: "trace"} {
		if got := avLevelName(level); got != want {
			t.Errorf("avLevelName(%d) = %q, want %q", level, got, want)
		}
	}
}

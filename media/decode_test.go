package media_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/reason"
)

func newDecoder(t testing.TB, cfg *media.DecoderConfig) *media.Decoder {
	t.Helper()
	if cfg == nil {
		cfg = &media.DecoderConfig{}
	}
	if cfg.CacheEntries == 0 {
		cfg.CacheEntries = -1
	}
	d, err := media.NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func decodeFile(t testing.TB, d *media.Decoder, path string, s media.Sampler) (*media.Result, error) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return d.Decode(context.Background(), b, s, media.DecodeOptions{KeepFrames: true})
}

// everyThird selects frames 0, 3, 6, … (a third of the clip, to bound memory under -race).
func everyThird(total int, _ media.Stats) ([]int, error) {
	var idx []int
	for i := 0; i < total; i += 3 {
		idx = append(idx, i)
	}
	return idx, nil
}

// TestContainersSameRGB: the same VP9 stream in WebM, MKV and MP4 gives the same rgb24 bytes of every
// third frame (100 frames spread over the whole clip), the same metadata and the same identity.
func TestContainersSameRGB(t *testing.T) {
	d := newDecoder(t, nil)
	var first *media.Result
	for _, ext := range []string{"webm", "mkv", "mp4"} {
		r, err := decodeFile(t, d, "../testdata/video/vp9_640x360_30fps_10s."+ext, everyThird)
		if err != nil {
			t.Fatalf("%s: %v", ext, err)
		}
		if r.Stats.DecodedFrames != 300 || len(r.Frames) != 100 || r.RGBBytes != 100*640*360*3 {
			t.Fatalf("%s: %d frames, %d rgb bytes", ext, r.Stats.DecodedFrames, r.RGBBytes)
		}
		if first == nil {
			first = r
			continue
		}
		for i := range r.Frames {
			if !bytes.Equal(r.Frames[i], first.Frames[i]) {
				t.Fatalf("%s: frame %d differs from webm", ext, i)
			}
		}
		if !bytes.Equal(r.Metadata, first.Metadata) || r.Identity != first.Identity {
			t.Fatalf("%s: metadata %s identity %s, webm %s %s", ext, r.Metadata, r.IdentityHex(), first.Metadata, first.IdentityHex())
		}
	}
}

// TestEditedFrame: qBi_f4 changes sampled frame 4 → new identity; qBi_f3 changes frame 3, which hf_fps
// does not sample → same identity (identity is defined on the sampled RGB and the metadata).
func TestEditedFrame(t *testing.T) {
	d := newDecoder(t, nil)
	id := func(name string, s media.Sampler) string {
		r, err := decodeFile(t, d, "../testdata/video/field/"+name, s)
		if err != nil {
			t.Fatal(err)
		}
		return r.IdentityHex()
	}
	base, f4, f3 := id("qBi_base.webm", hfFPS), id("qBi_f4.webm", hfFPS), id("qBi_f3.webm", hfFPS)
	if base != "ae0e4354cda0a3fa" || f4 != "09862e2dcc504cce" || f3 != base {
		t.Fatalf("hf_fps identities base %s f4 %s f3 %s", base, f4, f3)
	}
	if a, b := id("qBi_base.webm", dynamoMaxFrames), id("qBi_f3.webm", dynamoMaxFrames); a == b {
		t.Fatalf("dynamo_max_frames samples frame 3: base and f3 share %s", a)
	}
}

func TestPasses(t *testing.T) {
	d := newDecoder(t, nil)
	cases := []struct {
		path          string
		passes, total int
	}{
		{"../testdata/video/vp9_640x360_30fps_10s.webm", 1, 300}, // duration × fps = 300 is right
		{"../testdata/video/vp9_640x360_30fps_10s.mp4", 1, 300},  // nb_frames = 300
		{"../testdata/video/truncated_vp9.webm", 2, 30},          // container says 300
		{"../testdata/video/field/vfr.webm", 2, 20},              // 1.266 s × 30 = 38
		{"../testdata/video/field/live1.webm", 2, 90},            // no duration, no count
	}
	for _, c := range cases {
		r, err := decodeFile(t, d, c.path, dynamoMaxFrames)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if r.Passes != c.passes || r.Stats.DecodedFrames != c.total {
			t.Errorf("%s: %d passes, %d frames; want %d, %d", c.path, r.Passes, r.Stats.DecodedFrames, c.passes, c.total)
		}
	}
}

func pngBytes(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for i := 0; i < 16; i++ {
		img.Set(i, i, color.RGBA{255, 0, 0, 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestTypedErrors: each bad or unsupported input gives its reason code, never a crash.
func TestTypedErrors(t *testing.T) {
	d := newDecoder(t, nil)
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rnd := make([]byte, 64<<10)
	rand.New(rand.NewSource(1)).Read(rnd)
	cases := []struct {
		name string
		data []byte
		want reason.Code
	}{
		{"empty", nil, reason.MediaUndecodable},
		{"random", rnd, reason.MediaUndecodable},
		{"text", []byte("this is not a video"), reason.MediaUndecodable},
		{"h264", read("../testdata/video/h264_640x360_30fps_3s.mp4"), reason.UnsupportedCodec},
		{"av1", read("testdata/av1.webm"), reason.UnsupportedCodec},
		{"png", pngBytes(t), reason.MediaUndecodable}, // no image demuxer: not a container of DESIGN.md §1 step 3 (issue 24)
		{"bomb", read("../testdata/video/field/bomb_vp8.webm"), reason.FrameTooLarge},
		{"two streams", read("testdata/two_video_streams.mkv"), reason.MultiStream},
		{"rotated", read("testdata/rotated.mp4"), reason.Rotation},
		{"resolution change", read("testdata/resolution_change.webm"), reason.ResolutionChange},
		{"header only", read("../testdata/video/vp9_640x360_30fps_10s.webm")[:400], reason.MediaUndecodable},
	}
	for _, c := range cases {
		_, err := d.Decode(context.Background(), c.data, dynamoMaxFrames, media.DecodeOptions{})
		if got := reason.CodeOf(err); got != c.want {
			t.Errorf("%s: err %v (code %q), want %q", c.name, err, got, c.want)
		}
	}
	// The client's 400 says what was found, in FFmpeg's words (the message is what the JSON error
	// body carries; it was "opening container").
	_, err := d.Decode(context.Background(), []byte("<html><body>not a video</body></html>"), dynamoMaxFrames, media.DecodeOptions{})
	var re *reason.Error
	if !errors.As(err, &re) || re.Message != "the video is not a media container FFmpeg can read (Invalid data found when processing input; the bytes sniff as text/html; charset=utf-8)" {
		t.Errorf("html page: %v", err)
	}
}

// TestDefinedResults: damaged and unusual inputs that still decode give a defined, repeatable result.
func TestDefinedResults(t *testing.T) {
	d := newDecoder(t, nil)
	altref := readClip(t, "field/altref_vp9.webm")
	corrupt := append([]byte(nil), altref...)
	rand.New(rand.NewSource(2)).Read(corrupt[30000:30200])
	cover, err := os.ReadFile("testdata/with_cover.mkv")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		data []byte
	}{
		{"truncated", altref[:len(altref)-3000]},
		{"corrupt", corrupt},
		{"attached picture ignored", cover},
	}
	for _, c := range cases {
		r1, err1 := d.Decode(context.Background(), c.data, dynamoMaxFrames, media.DecodeOptions{})
		r2, err2 := d.Decode(context.Background(), c.data, dynamoMaxFrames, media.DecodeOptions{})
		if (err1 == nil) != (err2 == nil) || (err1 != nil && reason.CodeOf(err1) == "") {
			t.Errorf("%s: errors %v / %v", c.name, err1, err2)
			continue
		}
		if err1 == nil && (r1.Identity != r2.Identity || r1.Identity == 0) {
			t.Errorf("%s: identities %s / %s", c.name, r1.IdentityHex(), r2.IdentityHex())
		}
		if c.name == "attached picture ignored" && (err1 != nil || r1.IdentityHex() != "8d4f847dbeed8fb6") {
			t.Errorf("%s: %v, identity %v; want qB's 8d4f847dbeed8fb6", c.name, err1, r1)
		}
	}
}

// TestFrameBombCaps: framebomb.webm (30000 frames) under lowered caps falls back instead of decoding on.
func TestFrameBombCaps(t *testing.T) {
	data := readClip(t, "field/framebomb.webm")
	d := newDecoder(t, &media.DecoderConfig{MaxDecodedFrames: 1000})
	if _, err := d.Decode(context.Background(), data, dynamoMaxFrames, media.DecodeOptions{}); reason.CodeOf(err) != reason.FrameLimit {
		t.Fatalf("frame cap: err %v, want frame_limit", err)
	}
	d = newDecoder(t, &media.DecoderConfig{DecodeTimeout: 100 * time.Millisecond})
	if _, err := d.Decode(context.Background(), data, dynamoMaxFrames, media.DecodeOptions{}); reason.CodeOf(err) != reason.DecodeTimeout {
		t.Fatalf("time cap: err %v, want decode_timeout", err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	d = newDecoder(t, nil)
	if _, err := d.Decode(ctx, data, dynamoMaxFrames, media.DecodeOptions{}); reason.CodeOf(err) != reason.DecodeTimeout {
		t.Fatalf("expired caller deadline: err %v, want decode_timeout", err)
	}
}

func TestRGBCap(t *testing.T) {
	d := newDecoder(t, &media.DecoderConfig{MaxRGBBytes: 320 * 240 * 3 * 4})
	_, err := decodeFile(t, d, "../testdata/video/field/qB_320x240_4fps_10f.webm", hfFPS) // 5 frames
	if reason.CodeOf(err) != reason.FrameLimit {
		t.Fatalf("err %v, want frame_limit", err)
	}
	if _, err := decodeFile(t, d, "../testdata/video/field/qC_320x240_2fps_8f.webm", media.IndexSampler([]int{0, 2, 4, 6})); err != nil {
		t.Fatalf("4 frames within the cap: %v", err)
	}
}

func TestSamplerErrors(t *testing.T) {
	d := newDecoder(t, nil)
	for _, idx := range [][]int{nil, {-1}, {10}} {
		_, err := decodeFile(t, d, "../testdata/video/field/qB_320x240_4fps_10f.webm", media.IndexSampler(idx))
		if reason.CodeOf(err) != reason.LayoutError {
			t.Errorf("indices %v: err %v, want layout_error", idx, err)
		}
	}
	r, err := decodeFile(t, d, "../testdata/video/field/qB_320x240_4fps_10f.webm", media.IndexSampler([]int{9, 0, 0}))
	if err != nil || len(r.Frames) != 3 || !bytes.Equal(r.Frames[1], r.Frames[2]) || bytes.Equal(r.Frames[0], r.Frames[1]) {
		t.Fatalf("unordered indices with a repeat: %v", err)
	}
}

// TestCanceled: a cancelled caller context stops the decode with the context's error (no reason
// code: the client went away), a passed deadline with decode_timeout.
func TestCanceled(t *testing.T) {
	d := newDecoder(t, nil)
	b := readClip(t, "field/qB_320x240_4fps_10f.webm")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := d.Decode(ctx, b, dynamoMaxFrames, media.DecodeOptions{})
	if !errors.Is(err, context.Canceled) || reason.CodeOf(err) != "" {
		t.Fatalf("cancelled: err %v", err)
	}
}

// TestDifferentClipsAlternating (field report 6): two different clips sent alternately 8 times get
// two stable, different identities.
func TestDifferentClipsAlternating(t *testing.T) {
	d, err := media.NewDecoder(nil) // with the cache, as the router runs
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]map[string]bool{}
	for i := 0; i < 8; i++ {
		for _, c := range []string{"red", "blue"} {
			b, err := os.ReadFile("testdata/" + c + ".webm")
			if err != nil {
				t.Fatal(err)
			}
			r, err := d.Identify(context.Background(), b, dynamoMaxFrames, "dynamo:32")
			if err != nil {
				t.Fatal(err)
			}
			if ids[c] == nil {
				ids[c] = map[string]bool{}
			}
			ids[c][r.IdentityHex()] = true
		}
	}
	if len(ids["red"]) != 1 || len(ids["blue"]) != 1 {
		t.Fatalf("identities not stable: %v", ids)
	}
	for id := range ids["red"] {
		if ids["blue"][id] {
			t.Fatalf("red and blue share identity %s", id)
		}
	}
}

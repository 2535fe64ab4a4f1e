package media_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/reason"
)

// allCodecs is the widest allow-list.
var allCodecs = []string{"av1", "h264", "hevc", "vp8", "vp9"}

// loadCodecsGolden reads testdata/golden/video_identity_codecs.json (H.264, HEVC, AV1 and one
// VP9 clip; testdata/golden/README.md section "video_identity_codecs.json").
func loadCodecsGolden(t testing.TB) goldenFile {
	t.Helper()
	b, err := os.ReadFile("../testdata/golden/video_identity_codecs.json")
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Videos) == 0 {
		t.Fatal("no videos in video_identity_codecs.json")
	}
	return g
}

func readCodecClip(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "video-codecs", strings.TrimPrefix(file, "fixtures/video-codecs/")))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGoldenVideoIdentityCodecs checks every vector of video_identity_codecs.json with every codec
// enabled, at 1 and 4 decoder threads: identity, J, frame count, sampled indices, P's md5.
func TestGoldenVideoIdentityCodecs(t *testing.T) {
	g := loadCodecsGolden(t)
	for _, threads := range []int{1, 4} {
		dec, err := media.NewDecoder(&media.DecoderConfig{CacheEntries: -1, Threads: threads, Codecs: allCodecs})
		if err != nil {
			t.Fatal(err)
		}
		matched, total := 0, 0
		for _, v := range g.Videos {
			for _, vec := range v.Vectors {
				total++
				name := filepath.Base(v.File) + "/" + vec.Sampler
				res, err := dec.Decode(context.Background(), readCodecClip(t, v.File), samplerFor(vec.Sampler), media.DecodeOptions{KeepFrames: true})
				if err != nil {
					t.Errorf("threads %d %s: decode: %v", threads, name, err)
					continue
				}
				ok := true
				check := func(cond bool, format string, args ...any) {
					if !cond {
						ok = false
						t.Errorf("threads %d %s: "+format, append([]any{threads, name}, args...)...)
					}
				}
				check(res.Stats.Codec == v.Stream.Codec, "codec %s, want %s", res.Stats.Codec, v.Stream.Codec)
				check(res.Stats.DecodedFrames == v.Stream.DecodedFrames, "decoded frames %d, want %d", res.Stats.DecodedFrames, v.Stream.DecodedFrames)
				check(res.Stats.PixelFormat == v.Stream.DecodedPixFmt, "pix_fmt %s, want %s", res.Stats.PixelFormat, v.Stream.DecodedPixFmt)
				check(equalInts(res.Indices, vec.FramesIndices), "indices %v, want %v", res.Indices, vec.FramesIndices)
				check(res.Stats.Width == vec.W && res.Stats.Height == vec.H && len(res.Indices) == vec.T,
					"shape %dx%dx%d, want %dx%dx%d", len(res.Indices), res.Stats.Height, res.Stats.Width, vec.T, vec.H, vec.W)
				check(string(res.Metadata) == vec.J, "J\n got %s\nwant %s", res.Metadata, vec.J)
				check(res.RGBBytes == vec.PLen, "P_len %d, want %d", res.RGBBytes, vec.PLen)
				check(md5hex(res.Frames) == vec.PMD5, "P md5 %s, want %s", md5hex(res.Frames), vec.PMD5)
				check(res.IdentityHex() == vec.Identity, "identity %s, want %s", res.IdentityHex(), vec.Identity)
				if ok {
					matched++
				}
			}
		}
		t.Logf("threads %d: codec identity vectors matched %d/%d", threads, matched, total)
		if matched != total || total != 24 {
			t.Errorf("threads %d: matched %d/%d, want 24/24", threads, matched, total)
		}
	}
}

// TestCodecAllowList: a clip whose codec is not listed is unsupported_codec before any decoder
// runs (the default list is vp8, vp9); listing it decodes it.
func TestCodecAllowList(t *testing.T) {
	g := loadCodecsGolden(t)
	for _, v := range g.Videos {
		codec := v.Stream.Codec
		data := readCodecClip(t, v.File)
		var others []string
		for _, c := range allCodecs {
			if c != codec {
				others = append(others, c)
			}
		}
		for _, list := range [][]string{nil, others} {
			dec, err := media.NewDecoder(&media.DecoderConfig{CacheEntries: -1, Codecs: list})
			if err != nil {
				t.Fatal(err)
			}
			_, err = dec.Decode(context.Background(), data, media.IndexSampler([]int{0}), media.DecodeOptions{})
			if codec == "vp9" && list == nil {
				if err != nil {
					t.Errorf("%s with the default list: %v", v.File, err)
				}
				continue
			}
			if got := reason.CodeOf(err); got != reason.UnsupportedCodec {
				t.Errorf("%s (%s) with codecs %v: err %v (code %q), want unsupported_codec", v.File, codec, list, err, got)
			}
			if want := "codec " + codec + " is not in the codec allow-list (vp8,vp9)"; list == nil && !strings.Contains(err.Error(), want) {
				t.Errorf("%s with the default list: %v, want %q", v.File, err, want)
			}
		}
		dec, err := media.NewDecoder(&media.DecoderConfig{CacheEntries: -1, Codecs: []string{codec}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dec.Decode(context.Background(), data, media.IndexSampler([]int{0}), media.DecodeOptions{}); err != nil {
			t.Errorf("%s with codecs [%s]: %v", v.File, codec, err)
		}
	}
	if _, err := media.NewDecoder(&media.DecoderConfig{Codecs: []string{"mpeg2"}}); err == nil {
		t.Error("NewDecoder accepted codec mpeg2")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCodecLimits: the DESIGN.md §6 limits apply to H.264, HEVC and AV1 as to VP9: the decoded
// frame cap and the sampled rgb24 cap are frame_limit, a frame size over the cap is
// frame_too_large, a spent decode deadline is decode_timeout.
func TestCodecLimits(t *testing.T) {
	clips := map[string]string{
		"h264": "fixtures/video-codecs/h264_bf3_640x360_30fps_3s.mp4",
		"hevc": "fixtures/video-codecs/hevc_main10_320x240_24fps_2s.mkv",
		"av1":  "fixtures/video-codecs/av1_aom_333x197_24fps_1s.webm",
	}
	for codec, file := range clips {
		data := readCodecClip(t, file)
		cases := []struct {
			name string
			cfg  media.DecoderConfig
			want reason.Code
		}{
			{"10 frames", media.DecoderConfig{MaxDecodedFrames: 10}, reason.FrameLimit},
			{"rgb bytes", media.DecoderConfig{MaxRGBBytes: 100 * 100 * 3}, reason.FrameLimit},
			{"width 300", media.DecoderConfig{MaxWidth: 300}, reason.FrameTooLarge},
			{"height 190", media.DecoderConfig{MaxHeight: 190}, reason.FrameTooLarge},
			{"deadline", media.DecoderConfig{DecodeTimeout: time.Nanosecond}, reason.DecodeTimeout},
		}
		for _, c := range cases {
			cfg := c.cfg
			cfg.CacheEntries, cfg.Codecs = -1, []string{codec}
			dec, err := media.NewDecoder(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = dec.Decode(context.Background(), data, hfFPS, media.DecodeOptions{})
			if got := reason.CodeOf(err); got != c.want {
				t.Errorf("%s %s: err %v (code %q), want %s", codec, c.name, err, got, c.want)
			}
		}
	}
}

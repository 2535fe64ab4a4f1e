package media_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/reason"
)

// goldenFile is testdata/golden/video_identity.json (see testdata/golden/README.md).
type goldenFile struct {
	Videos []goldenVideo `json:"videos"`
}

type goldenVideo struct {
	File    string         `json:"file"`
	Skipped string         `json:"skipped"`
	Stream  goldenStream   `json:"stream"`
	Vectors []goldenVector `json:"vectors"`
}

type goldenStream struct {
	Codec         string `json:"codec"`
	Width         int    `json:"width"`
	Height        int    `json:"height"`
	DecodedFrames int    `json:"decoded_frames"`
	DecodedWidth  int    `json:"decoded_width"`
	DecodedHeight int    `json:"decoded_height"`
	DecodedPixFmt string `json:"decoded_pix_fmt"`
}

type goldenVector struct {
	Sampler       string `json:"sampler"`
	FramesIndices []int  `json:"frames_indices"`
	T, H, W       int
	J             string `json:"J"`
	PLen          int64  `json:"P_len"`
	PMD5          string `json:"P_md5"`
	Identity      string `json:"identity"`
	Rejected      string `json:"rejected"`
}

func loadGolden(t testing.TB) goldenFile {
	t.Helper()
	b, err := os.ReadFile("../testdata/golden/video_identity.json")
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// clipPath maps a golden file name (relative to shared/) to the copy under testdata/video.
func clipPath(file string) string {
	return filepath.Join("..", "testdata", "video", strings.TrimPrefix(file, "fixtures/video/"))
}

func readClip(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(clipPath(file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dynamoMaxFrames is golden/README.md's dynamo_max_frames sampler with max_frames 32:
// requested = min(total, 32); idx = round_half_away(i*(total-1)/(requested-1)); dedup.
func dynamoMaxFrames(total int, _ media.Stats) ([]int, error) {
	n := min(total, 32)
	if n == 1 {
		return []int{0}, nil
	}
	var out []int
	for i := 0; i < n; i++ {
		v := int(math.Round(float64(i) * float64(total-1) / float64(n-1)))
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out, nil
}

// hfFPS is golden/README.md's hf_fps sampler with fps 2, min 4, max 768:
// n = int(total/src_fps*2) clamped to [4, 768] and ≤ total; np.round(np.linspace(0, total-1, n)).
func hfFPS(total int, s media.Stats) ([]int, error) {
	n := int(float64(total) / s.FPS * 2)
	n = max(4, min(n, 768))
	n = min(n, total)
	if n == 1 {
		return []int{0}, nil
	}
	stop := float64(total - 1)
	step := stop / float64(n-1)
	out := make([]int, n)
	for i := 0; i < n; i++ {
		v := float64(i)*step + 0
		if i == n-1 {
			v = stop
		}
		out[i] = int(math.RoundToEven(v))
	}
	return out, nil
}

func samplerFor(name string) media.Sampler {
	if name == "hf_fps" {
		return hfFPS
	}
	return dynamoMaxFrames
}

func md5hex(frames [][]byte) string {
	h := md5.New()
	for _, f := range frames {
		h.Write(f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestGoldenVideoIdentity(t *testing.T) {
	g := loadGolden(t)
	dec, err := media.NewDecoder(&media.DecoderConfig{CacheEntries: -1})
	if err != nil {
		t.Fatal(err)
	}
	matched, total := 0, 0
	for _, v := range g.Videos {
		for _, vec := range v.Vectors {
			total++
			t.Run(filepath.Base(v.File)+"/"+vec.Sampler, func(t *testing.T) {
				data := readClip(t, v.File)
				res, err := dec.Decode(context.Background(), data, samplerFor(vec.Sampler), media.DecodeOptions{KeepFrames: true})
				if vec.Rejected != "" {
					if got := reason.CodeOf(err); got != reason.FrameTooLarge {
						t.Fatalf("rejected vector: err %v (code %q), want frame_too_large", err, got)
					}
					matched++
					return
				}
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if res.Stats.DecodedFrames != v.Stream.DecodedFrames {
					t.Errorf("decoded frames %d, want %d", res.Stats.DecodedFrames, v.Stream.DecodedFrames)
				}
				if res.Stats.Codec != v.Stream.Codec {
					t.Errorf("codec %s, want %s", res.Stats.Codec, v.Stream.Codec)
				}
				if res.Stats.Width != vec.W || res.Stats.Height != vec.H || len(res.Indices) != vec.T {
					t.Errorf("shape %dx%dx%d, want %dx%dx%d", len(res.Indices), res.Stats.Height, res.Stats.Width, vec.T, vec.H, vec.W)
				}
				if string(res.Metadata) != vec.J {
					t.Errorf("J\n got %s\nwant %s", res.Metadata, vec.J)
				}
				if res.RGBBytes != vec.PLen {
					t.Errorf("P_len %d, want %d", res.RGBBytes, vec.PLen)
				}
				if got := md5hex(res.Frames); got != vec.PMD5 {
					t.Errorf("P md5 %s, want %s", got, vec.PMD5)
				}
				if res.IdentityHex() != vec.Identity {
					t.Errorf("identity %s, want %s", res.IdentityHex(), vec.Identity)
				}
				if !t.Failed() {
					matched++
				}
			})
		}
	}
	t.Logf("golden video identity vectors matched: %d/%d", matched, total)
	if matched != total {
		t.Errorf("matched %d/%d", matched, total)
	}
}

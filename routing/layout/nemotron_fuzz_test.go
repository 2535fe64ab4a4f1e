package layout_test

import (
	"testing"

	"github.com/kvroute/kvroute/routing/layout"
)

// FuzzNemotronVideo checks that any clip and contract geometry either lays out with consistent
// fields or fails with a *StageError: never a panic, and the counts agree with the frames.
func FuzzNemotronVideo(f *testing.F) {
	f.Add(300, 30.0, 640, 360, 32, -1.0, 0.0, 1024, true, 2, false)
	f.Add(3, 30.0, 512, 512, 32, -1.0, 0.5, 1024, true, 2, false)
	f.Add(1, 1e-300, 65536, 1, -1, 1e308, 0.99, 1<<24, true, 64, true)
	f.Add(18000, 23.976023976023978, 1, 65536, 128, 2.0, 0.9, 4, false, 1, true)
	f.Fuzz(func(t *testing.T, total int, srcFPS float64, w, h, numFrames int, fps, rate float64, target int, aspect bool, tp int, dynamic bool) {
		total, numFrames = total%(1<<16), numFrames%(1<<12)
		g := layout.NemotronGeometry{PatchSize: 16, DownsampleRatio: 0.5, ForceImageSize: 512, TemporalPatchSize: tp,
			TargetNumPatches: &target, MaintainAspectRatio: aspect}
		s := layout.NemotronSampler{Kind: layout.SamplerVLLMUniform, NumFrames: numFrames, FPS: fps}
		if dynamic {
			s = layout.NemotronSampler{Kind: layout.SamplerVLLMOpenCVDynamic, FPS: fps, MaxDuration: 300}
		}
		l, err := layout.LayoutNemotronVideo(g, s, rate, layout.VideoInput{TotalFrames: total, SourceFPS: srcFPS, Width: w, Height: h})
		if err != nil {
			if layout.StageOf(err) == "" {
				t.Fatalf("error %v is not a *StageError", err)
			}
			return
		}
		if len(l.Indices) == 0 || len(l.Separators) != l.NumTubelets || len(l.PlaceholderCounts) != l.NumTubelets ||
			l.NumTubelets != (len(l.Indices)+tp-1)/tp || len(l.TimestampTexts) != len(l.Indices) || l.TokensPerTubelet <= 0 {
			t.Fatalf("inconsistent layout %+v", l)
		}
		for i := 1; i < len(l.Indices); i++ {
			if l.Indices[i] <= l.Indices[i-1] || l.Indices[i] >= total {
				t.Fatalf("indices %v not increasing within [0, %d)", l.Indices, total)
			}
		}
		if rate == 0 && l.TotalPlaceholderTokens() != l.NumTubelets*l.TokensPerTubelet {
			t.Fatalf("EVS off: %d tokens for %d tubelets of %d", l.TotalPlaceholderTokens(), l.NumTubelets, l.TokensPerTubelet)
		}
	})
}

// FuzzNemotronImages checks the shared image budget on any sizes: a layout within the total, or a
// *StageError.
func FuzzNemotronImages(f *testing.F) {
	f.Add(1920, 1080, 3, 4096, 10, 13312)
	f.Add(1, 300000, 1, 262144, 0, 13312)
	f.Add(16, 16, 8, 200, 500, 0)
	f.Fuzz(func(t *testing.T, w, h, n, maxLen, textLen, maxPatches int) {
		n = 1 + abs(n)%8
		imgs := make([]layout.ImageSize, n)
		for i := range imgs {
			imgs[i] = layout.ImageSize{Width: w + i, Height: h + 2*i}
		}
		b := layout.NemotronImageBudget{PatchSize: 16, DownsampleRatio: 0.5, MinNumPatches: 1024, MaxNumPatches: abs(maxPatches) % (1 << 20)}
		l, err := layout.LayoutNemotronImages(b, imgs, maxLen, textLen)
		if err != nil {
			if layout.StageOf(err) == "" {
				t.Fatalf("error %v is not a *StageError", err)
			}
			return
		}
		if len(l.Images) != n || len(l.Iterations) == 0 || len(l.Iterations) > 10 {
			t.Fatalf("layout %+v", l)
		}
		for _, im := range l.Images {
			if im.PatchGridWH[0]%2 != 0 || im.PatchGridWH[1]%2 != 0 || im.NumTokens*4 != im.NumPatches {
				t.Fatalf("image %+v: odd grid", im)
			}
		}
	})
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

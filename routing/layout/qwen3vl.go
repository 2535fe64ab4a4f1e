package layout

import (
	"fmt"
)

// VideoInput describes a decoded clip: its frame count (per the contract's frame_count_source),
// the stream's source frame rate and the frame size in pixels.
type VideoInput struct {
	TotalFrames int
	SourceFPS   float64
	Width       int
	Height      int
}

// VideoLayout is the Qwen3-VL layout of one video (DESIGN.md §4).
type VideoLayout struct {
	// Indices are the sampled source frame indices, in order.
	Indices []int
	// NumFrames is len(Indices), before temporal padding.
	NumFrames int
	// SGLangNFrames and the pre-resized size are set for the sglang sampler only.
	SGLangNFrames          int
	SGLangPreResizedHeight int
	SGLangPreResizedWidth  int
	// ResizedHeight and ResizedWidth are smart_resize's output in pixels.
	ResizedHeight int
	ResizedWidth  int
	// GridTHW is [ceil(T/temporal), h/patch, w/patch].
	GridTHW [3]int
	// TokensPerGroup is the number of video pad tokens per temporal group (grid_h·grid_w/merge²).
	TokensPerGroup int
	// GroupTimestamps are the per-group timestamps in seconds; TimestampTexts their "<t seconds>".
	GroupTimestamps []float64
	TimestampTexts  []string
}

// VideoPadTokens is the number of video pad tokens of the whole video.
func (l *VideoLayout) VideoPadTokens() int { return l.GridTHW[0] * l.TokensPerGroup }

// ImageLayout is the Qwen3-VL layout of one image (DESIGN.md §4).
type ImageLayout struct {
	ResizedHeight int
	ResizedWidth  int
	// GridTHW is [1, h/patch, w/patch].
	GridTHW [3]int
	// Tokens is the number of image pad tokens (h·w/(patch·merge)²).
	Tokens int
}

// LayoutVideo computes the layout of one video under a (validated) contract: frame selection per
// sampler.kind, SGLang's pre-resize for the sglang sampler, smart_resize, grid and group
// timestamps. On error it returns a *StageError and the layout computed so far (Indices and
// NumFrames are set when sampling succeeded), as the golden vectors record.
func LayoutVideo(c *Contract, in VideoInput) (*VideoLayout, error) {
	l := &VideoLayout{}
	if c == nil {
		return l, stageErr(StageSampling, "no contract")
	}
	s := c.Sampler
	var (
		idx []int
		err error
	)
	switch s.Kind {
	case SamplerHFFPS:
		if s.FPS == nil || s.MinFrames == nil || s.MaxFrames == nil {
			return l, stageErr(StageSampling, "hf_fps sampler needs fps, min_frames and max_frames")
		}
		idx, err = SampleHFFPS(in.TotalFrames, in.SourceFPS, *s.FPS, *s.MinFrames, *s.MaxFrames)
	case SamplerUniformNumFrames:
		if s.NumFrames == nil {
			return l, stageErr(StageSampling, "uniform_num_frames sampler needs num_frames")
		}
		idx, err = SampleUniform(in.TotalFrames, *s.NumFrames)
	case SamplerDynamoMaxFrames:
		if s.MaxFrames == nil {
			return l, stageErr(StageSampling, "dynamo_max_frames sampler needs max_frames")
		}
		idx, err = SampleDynamo(in.TotalFrames, *s.MaxFrames)
	case SamplerSGLang:
		if c.SGLangPreprocess == nil {
			return l, stageErr(StageSampling, "sglang sampler needs sglang_preprocess")
		}
		idx, err = SampleSGLang(in.TotalFrames, in.SourceFPS, *c.SGLangPreprocess)
	default:
		return l, stageErr(StageSampling, fmt.Sprintf("unknown sampler kind %q", s.Kind))
	}
	if err != nil {
		return l, err
	}
	l.Indices, l.NumFrames = idx, len(idx)
	h, w := in.Height, in.Width
	if s.Kind == SamplerSGLang {
		l.SGLangNFrames = len(idx)
		h, w, err = SGLangPreResize(h, w, len(idx), *c.SGLangPreprocess)
		if err != nil {
			return l, err
		}
		l.SGLangPreResizedHeight, l.SGLangPreResizedWidth = h, w
	}
	rh, rw, err := SmartResizeVideo(len(idx), h, w, c.Resize)
	if err != nil {
		return l, err
	}
	r := c.Resize
	l.ResizedHeight, l.ResizedWidth = rh, rw
	tp := r.TemporalPatchSize
	l.GridTHW = [3]int{(len(idx) + tp - 1) / tp, rh / r.PatchSize, rw / r.PatchSize}
	m2 := r.MergeSize * r.MergeSize
	if (l.GridTHW[1]*l.GridTHW[2])%m2 != 0 {
		return l, stageErr(StageSmartResize, fmt.Sprintf("grid %dx%d is not divisible by merge_size²", l.GridTHW[1], l.GridTHW[2]))
	}
	l.TokensPerGroup = l.GridTHW[1] * l.GridTHW[2] / m2
	l.GroupTimestamps = GroupTimestamps(idx, in.SourceFPS, tp)
	l.TimestampTexts = make([]string, len(l.GroupTimestamps))
	for i, t := range l.GroupTimestamps {
		l.TimestampTexts[i] = TimestampText(t)
	}
	return l, nil
}

// LayoutImage computes the layout of one image of width×height pixels: the image smart_resize with
// factor = patch·merge of r and the per-image budget b.
func LayoutImage(r Resize, b ImageResize, width, height int) (*ImageLayout, error) {
	if r.PatchSize <= 0 || r.MergeSize <= 0 {
		return nil, stageErr(StageSmartResize, "patch and merge sizes must be positive")
	}
	factor := r.PatchSize * r.MergeSize
	h, w, err := SmartResizeImage(height, width, factor, b.MinPixels, b.MaxPixels)
	if err != nil {
		return nil, err
	}
	gh, gw := h/r.PatchSize, w/r.PatchSize
	return &ImageLayout{
		ResizedHeight: h, ResizedWidth: w,
		GridTHW: [3]int{1, gh, gw},
		Tokens:  gh * gw / (r.MergeSize * r.MergeSize),
	}, nil
}

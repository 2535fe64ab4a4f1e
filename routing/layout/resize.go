package layout

import (
	"fmt"
	"math"
)

// Temporal rounding modes of the video smart_resize (contract resize.mode).
const (
	// ResizeLegacyCeil is transformers 4.57: sides under the factor raise, t_bar = ceil(T/t)*t.
	ResizeLegacyCeil = "legacy_ceil"
	// ResizeRoundTiesEven is transformers >= 5.15: T < t raises, sides under the factor are
	// upscaled first, t_bar = round_half_even(T/t)*t.
	ResizeRoundTiesEven = "round_ties_even"
)

// maxAspect is the largest max(h,w)/min(h,w) every smart_resize accepts.
const maxAspect = 200

func checkSides(stage Stage, height, width int) error {
	if height <= 0 || width <= 0 || height > MaxSide || width > MaxSide {
		return stageErr(stage, fmt.Sprintf("frame size %dx%d out of range [1, %d]", width, height, MaxSide))
	}
	return nil
}

func aspectErr(stage Stage, height, width int) error {
	r := float64(max(height, width)) / float64(min(height, width))
	if r > maxAspect {
		return stageErr(stage, "absolute aspect ratio must be smaller than 200, got "+PyFloatRepr(r))
	}
	return nil
}

// SmartResizeVideo is Hugging Face's video smart_resize(num_frames, height, width) of
// transformers models/qwen3_vl/video_processing_qwen3_vl.py with factor = patch*merge, the
// contract's whole-clip pixel budget [MinPixels, MaxPixels] and temporal rounding mode, Python
// rounding (round = ties to even, floor/ceil), float64 in upstream operation order; beta uses the
// unpadded frame count. It returns (resized height, resized width) or a *StageError (stage
// smart_resize) carrying the upstream message.
func SmartResizeVideo(numFrames, height, width int, r Resize) (int, int, error) {
	if err := checkSides(StageSmartResize, height, width); err != nil {
		return 0, 0, err
	}
	if numFrames <= 0 || numFrames > MaxSampledFrames {
		return 0, 0, stageErr(StageSmartResize, fmt.Sprintf("frame count %d out of range [1, %d]", numFrames, MaxSampledFrames))
	}
	factor := r.PatchSize * r.MergeSize
	tf := r.TemporalPatchSize
	if factor <= 0 || tf <= 0 {
		return 0, 0, stageErr(StageSmartResize, "patch, merge and temporal patch sizes must be positive")
	}
	var tBar int
	switch r.Mode {
	case ResizeLegacyCeil:
		if height < factor || width < factor {
			return 0, 0, stageErr(StageSmartResize,
				fmt.Sprintf("height:%d or width:%d must be larger than factor:%d", height, width, factor))
		}
		tBar = int(math.Ceil(float64(numFrames)/float64(tf))) * tf
	case ResizeRoundTiesEven:
		if numFrames < tf {
			return 0, 0, stageErr(StageSmartResize,
				fmt.Sprintf("t:%d must be larger than temporal_factor:%d", numFrames, tf))
		}
		if height < factor || width < factor {
			s := max(float64(factor)/float64(height), float64(factor)/float64(width))
			height = int(float64(height) * s)
			width = int(float64(width) * s)
		}
		tBar = int(math.RoundToEven(float64(numFrames)/float64(tf))) * tf
	default:
		return 0, 0, stageErr(StageSmartResize, fmt.Sprintf("unknown resize mode %q", r.Mode))
	}
	if err := aspectErr(StageSmartResize, height, width); err != nil {
		return 0, 0, err
	}
	f := float64(factor)
	hBar := int(math.RoundToEven(float64(height)/f)) * factor
	wBar := int(math.RoundToEven(float64(width)/f)) * factor
	vol := int64(tBar) * int64(hBar) * int64(wBar)
	thw := float64(int64(numFrames) * int64(height) * int64(width))
	switch {
	case vol > r.MaxPixels:
		beta := math.Sqrt(thw / float64(r.MaxPixels))
		hBar = max(factor, int(math.Floor(float64(height)/beta/f))*factor)
		wBar = max(factor, int(math.Floor(float64(width)/beta/f))*factor)
	case vol < r.MinPixels:
		beta := math.Sqrt(float64(r.MinPixels) / thw)
		hBar = int(math.Ceil(float64(height)*beta/f)) * factor
		wBar = int(math.Ceil(float64(width)*beta/f)) * factor
	}
	if hBar <= 0 || wBar <= 0 || hBar > MaxSide || wBar > MaxSide {
		return 0, 0, stageErr(StageSmartResize, fmt.Sprintf("resized size %dx%d out of range", wBar, hBar))
	}
	return hBar, wBar, nil
}

// SmartResizeImage is Hugging Face's image smart_resize (transformers
// models/qwen2_vl/image_processing_qwen2_vl.py, the version with the max(factor, …) guards):
// h_bar = max(factor, round(h/factor)*factor), likewise w_bar, then the floor branch (with
// guards) above maxPixels or the ceil branch below minPixels. Aspect ratios over 200 are an error.
func SmartResizeImage(height, width, factor int, minPixels, maxPixels int64) (int, int, error) {
	if err := checkSides(StageSmartResize, height, width); err != nil {
		return 0, 0, err
	}
	if factor <= 0 {
		return 0, 0, stageErr(StageSmartResize, "factor must be positive")
	}
	if float64(max(height, width))/float64(min(height, width)) > maxAspect {
		return 0, 0, stageErr(StageSmartResize, "absolute aspect ratio must be smaller than 200")
	}
	f := float64(factor)
	hBar := max(factor, int(math.RoundToEven(float64(height)/f))*factor)
	wBar := max(factor, int(math.RoundToEven(float64(width)/f))*factor)
	hw := float64(int64(height) * int64(width))
	switch {
	case int64(hBar)*int64(wBar) > maxPixels:
		beta := math.Sqrt(hw / float64(maxPixels))
		hBar = max(factor, int(math.Floor(float64(height)/beta/f))*factor)
		wBar = max(factor, int(math.Floor(float64(width)/beta/f))*factor)
	case int64(hBar)*int64(wBar) < minPixels:
		beta := math.Sqrt(float64(minPixels) / hw)
		hBar = int(math.Ceil(float64(height)*beta/f)) * factor
		wBar = int(math.Ceil(float64(width)*beta/f)) * factor
	}
	if hBar <= 0 || wBar <= 0 || hBar > MaxSide || wBar > MaxSide {
		return 0, 0, stageErr(StageSmartResize, fmt.Sprintf("resized size %dx%d out of range", wBar, hBar))
	}
	return hBar, wBar, nil
}

// SGLangPreResize is SGLang's factor-28 per-frame pre-resize for n sampled frames (qwen_vl.py
// preprocess_video with qwen-vl-utils' smart_resize): max_pixels = max(min(video_max_pixels,
// video_total_pixels/n*frame_factor), int(video_min_pixels*1.05)), then h_bar = max(f, round(h/f)*f),
// the floor branch (no max(f, …) guard) or the ceil branch. An aspect ratio over 200 or a zero side
// is an error (stage sglang_pre_resize).
func SGLangPreResize(height, width, n int, p SGLangPreprocess) (int, int, error) {
	if err := checkSides(StageSGLangPreResize, height, width); err != nil {
		return 0, 0, err
	}
	if n <= 0 || p.ImageFactor <= 0 {
		return 0, 0, stageErr(StageSGLangPreResize, "frame count and image factor must be positive")
	}
	maxPixels := max(min(float64(p.VideoMaxPixels), float64(p.VideoTotalPixels)/float64(n)*float64(p.FrameFactor)),
		math.Trunc(float64(p.VideoMinPixels)*1.05))
	minPixels := float64(p.VideoMinPixels)
	if err := aspectErr(StageSGLangPreResize, height, width); err != nil {
		return 0, 0, err
	}
	factor := p.ImageFactor
	f := float64(factor)
	hBar := max(factor, int(math.RoundToEven(float64(height)/f))*factor)
	wBar := max(factor, int(math.RoundToEven(float64(width)/f))*factor)
	hw := float64(int64(height) * int64(width))
	switch {
	case float64(int64(hBar)*int64(wBar)) > maxPixels:
		beta := math.Sqrt(hw / maxPixels)
		hBar = int(math.Floor(float64(height)/beta/f)) * factor
		wBar = int(math.Floor(float64(width)/beta/f)) * factor
	case float64(int64(hBar)*int64(wBar)) < minPixels:
		beta := math.Sqrt(minPixels / hw)
		hBar = int(math.Ceil(float64(height)*beta/f)) * factor
		wBar = int(math.Ceil(float64(width)*beta/f)) * factor
	}
	if hBar <= 0 || wBar <= 0 || hBar > MaxSide || wBar > MaxSide {
		return 0, 0, stageErr(StageSGLangPreResize, fmt.Sprintf("pre-resized size %dx%d out of range", wBar, hBar))
	}
	return hBar, wBar, nil
}

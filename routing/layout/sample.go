package layout

import (
	"fmt"
	"math"
)

// Linspace returns numpy.linspace(start, stop, num) (endpoint=True) with numpy 1.24's float64
// arithmetic: step = (stop-start)/(num-1), y_i = i*step + start, the last value pinned to stop
// (numpy/core/function_base.py). A zero step computes i/(num-1)*delta as numpy does. num <= 0
// gives an empty slice; num == 1 gives [start].
func Linspace(start, stop float64, num int) []float64 {
	if num <= 0 {
		return nil
	}
	y := make([]float64, num)
	div := num - 1
	delta := stop - start
	if div == 0 {
		y[0] = start
		return y
	}
	step := delta / float64(div)
	for i := range y {
		if step == 0 {
			y[i] = float64(i)/float64(div)*delta + start
		} else {
			y[i] = float64(i)*step + start
		}
	}
	y[num-1] = stop
	return y
}

func checkClip(total int, srcFPS float64) error {
	if total <= 0 || total > MaxTotalFrames {
		return stageErr(StageSampling, fmt.Sprintf("total frames %d out of range [1, %d]", total, MaxTotalFrames))
	}
	if !(srcFPS > 0) || math.IsInf(srcFPS, 0) {
		return stageErr(StageSampling, fmt.Sprintf("source fps %v must be finite and positive", srcFPS))
	}
	return nil
}

func checkCount(n int) error {
	if n > MaxSampledFrames {
		return stageErr(StageSampling, fmt.Sprintf("sampled frame count %d exceeds %d", n, MaxSampledFrames))
	}
	return nil
}

// SampleHFFPS selects frames as Hugging Face Qwen3VLVideoProcessor.sample_frames and vLLM's
// qwen3_vl video loader do (transformers video_processing_qwen3_vl.py):
// n = int(total/srcFPS*fps) (float64, left to right, truncated), n = min(max(n, minFrames),
// maxFrames, total), indices = round_half_even(linspace(0, total-1, n)).
func SampleHFFPS(total int, srcFPS, fps float64, minFrames, maxFrames int) ([]int, error) {
	if err := checkClip(total, srcFPS); err != nil {
		return nil, err
	}
	if !(fps > 0) || math.IsInf(fps, 0) {
		return nil, stageErr(StageSampling, fmt.Sprintf("fps %v must be finite and positive", fps))
	}
	x := float64(total) / srcFPS * fps
	if x > MaxTotalFrames {
		x = MaxTotalFrames // clamped to total below anyway
	}
	n := int(x)
	n = min(max(n, minFrames), maxFrames, total)
	if n <= 0 {
		return nil, stageErr(StageSampling, fmt.Sprintf("sampled frame count %d must be positive", n))
	}
	if err := checkCount(n); err != nil {
		return nil, err
	}
	ys := Linspace(0, float64(total-1), n)
	idx := make([]int, n)
	for i, y := range ys {
		idx[i] = int(math.RoundToEven(y))
	}
	return idx, nil
}

// SampleUniform selects frames as vLLM's older generic video loader does with fps unset
// (vllm/multimodal/video.py): n = min(numFrames, total) if numFrames > 0 else total, n = max(1, n);
// all frames when n == total, else np.linspace(0, total-1, n, dtype=int) (truncation).
func SampleUniform(total, numFrames int) ([]int, error) {
	if total <= 0 || total > MaxTotalFrames {
		return nil, stageErr(StageSampling, fmt.Sprintf("total frames %d out of range [1, %d]", total, MaxTotalFrames))
	}
	n := total
	if numFrames > 0 {
		n = min(numFrames, total)
	}
	n = max(1, n)
	if err := checkCount(n); err != nil {
		return nil, err
	}
	idx := make([]int, n)
	if n == total {
		for i := range idx {
			idx[i] = i
		}
		return idx, nil
	}
	for i, y := range Linspace(0, float64(total-1), n) {
		idx[i] = int(y) // numpy astype(int): truncation toward zero
	}
	return idx, nil
}

// SampleDynamo selects frames as Dynamo's frontend VideoDecoder with {"max_frames": N} does
// (ai-dynamo lib/llm/src/preprocessor/media/decoders/video.rs): requested = max(min(total, N), 1);
// [0] when requested == 1, else idx_i = round_half_away(i*(total-1) / (requested-1)) in float64
// (one division of the exact product), adjacent duplicates removed.
func SampleDynamo(total, maxFrames int) ([]int, error) {
	if total <= 0 || total > MaxTotalFrames {
		return nil, stageErr(StageSampling, fmt.Sprintf("total frames %d out of range [1, %d]", total, MaxTotalFrames))
	}
	n := max(min(total, maxFrames), 1)
	if err := checkCount(n); err != nil {
		return nil, err
	}
	if n == 1 {
		return []int{0}, nil
	}
	idx := make([]int, 0, n)
	for i := 0; i < n; i++ {
		v := int(math.Round(float64(i) * float64(total-1) / float64(n-1)))
		if len(idx) > 0 && idx[len(idx)-1] == v {
			continue
		}
		idx = append(idx, v)
	}
	return idx, nil
}

// SGLangNFrames is qwen-vl-utils' smart_nframes as SGLang's qwen_vl.py runs it for a clip it
// decodes itself: min = ceil_to(minFrames, ff), max = floor_to(min(maxFrames, total), ff),
// n = floor_to(min(max(total/srcFPS*fps, min), max, total), ff); an error (stage sglang_nframes)
// unless ff <= n <= total.
func SGLangNFrames(total int, srcFPS float64, p SGLangPreprocess) (int, error) {
	if err := checkClip(total, srcFPS); err != nil {
		return 0, err
	}
	ff := float64(p.FrameFactor)
	minF := math.Ceil(float64(p.MinFrames)/ff) * ff
	maxF := math.Floor(float64(min(p.MaxFrames, total))/ff) * ff
	x := float64(total) / srcFPS * p.FPS
	x = min(min(max(x, minF), maxF), float64(total))
	n := int(math.Floor(x/ff) * ff)
	if !(p.FrameFactor <= n && n <= total) {
		return n, stageErr(StageSGLangNFrames,
			fmt.Sprintf("nframes should in interval [%d, %d], but got %d.", p.FrameFactor, total, n))
	}
	if err := checkCount(n); err != nil {
		return n, err
	}
	return n, nil
}

// SampleSGLang selects frames as SGLang's qwen_vl.py preprocess_video does:
// np.unique(np.linspace(0, total-1, SGLangNFrames(...), dtype=int64)) (truncation).
func SampleSGLang(total int, srcFPS float64, p SGLangPreprocess) ([]int, error) {
	n, err := SGLangNFrames(total, srcFPS, p)
	if err != nil {
		return nil, err
	}
	idx := make([]int, 0, n)
	for _, y := range Linspace(0, float64(total-1), n) {
		v := int(y)
		if len(idx) > 0 && idx[len(idx)-1] == v {
			continue // np.unique of a non-decreasing list
		}
		idx = append(idx, v)
	}
	return idx, nil
}

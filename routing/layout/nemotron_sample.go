package layout

import (
	"fmt"
	"math"
)

// Frame samplers of vLLM's OpenCV video loaders, as the Nemotron 3 Nano Omni worker runs them
// (golden/nemotron/README.md §1 video step 1).
const (
	// SamplerVLLMUniform is VLLM_VIDEO_LOADER_BACKEND=opencv (and nemotron_vl, which only adds the
	// raw bytes for audio-in-video): VideoBackend.compute_frames_index_to_sample.
	SamplerVLLMUniform = "vllm_uniform"
	// SamplerVLLMOpenCVDynamic is VLLM_VIDEO_LOADER_BACKEND=opencv_dynamic.
	SamplerVLLMOpenCVDynamic = "vllm_opencv_dynamic"
)

// Stages of a Nemotron layout that the reference refuses, as the golden vectors name them.
const (
	StageFrameDuration Stage = "frame_duration"
	StageProcessMedia  Stage = "process_media"
	StageApplyParams   Stage = "apply_params"
	StageComputeParams Stage = "compute_params"
)

// pyZeroDivision is Python 3's message for a float division by zero.
const pyZeroDivision = "float division by zero"

// clipDuration is vLLM's duration = total/source_fps, 0 when the fps is not positive (OpenCV
// reports 0 for an unknown rate).
func clipDuration(total int, srcFPS float64) float64 {
	if srcFPS > 0 {
		return float64(total) / srcFPS
	}
	return 0
}

func checkNemotronClip(total int, srcFPS float64) error {
	if total <= 0 || total > MaxTotalFrames {
		return stageErr(StageSampling, fmt.Sprintf("total frames %d out of range [1, %d]", total, MaxTotalFrames))
	}
	// 0 is OpenCV's "unknown" (vLLM then fails later, at frame_duration); a rate below 1/1000 fps
	// would overflow int(1000/fps).
	if math.IsNaN(srcFPS) || math.IsInf(srcFPS, 0) || srcFPS < 0 || srcFPS > 0 && srcFPS < 1e-3 {
		return stageErr(StageSampling, fmt.Sprintf("source fps %v must be 0 or in [0.001, +inf)", srcFPS))
	}
	return nil
}

// SampleVLLMUniform selects frames as vLLM's OpenCV loader does
// (vllm/multimodal/video.py VideoBackend.compute_frames_index_to_sample, the version of
// golden/nemotron/README.md §6): duration = total/srcFPS (0 for srcFPS 0); n = total;
// numFrames > 0: n = min(numFrames, total); fps > 0: n = min(n, floor(duration·fps)) in float64;
// n = max(1, n); all frames when n == total, else numpy.linspace(0, total-1, n, dtype=int)
// (truncation). numFrames -1 and fps <= 0 mean unset. It also returns the duration and n.
func SampleVLLMUniform(total int, srcFPS float64, numFrames int, fps float64) (idx []int, duration float64, n int, err error) {
	if err := checkNemotronClip(total, srcFPS); err != nil {
		return nil, 0, 0, err
	}
	if math.IsNaN(fps) || math.IsInf(fps, 0) {
		return nil, 0, 0, stageErr(StageSampling, fmt.Sprintf("fps %v must be finite", fps))
	}
	duration = clipDuration(total, srcFPS)
	n = total
	if numFrames > 0 {
		n = min(numFrames, total)
	}
	if x := math.Floor(duration * fps); fps > 0 && x < float64(n) {
		n = int(x) // compared as floats first: a huge product must not overflow int
	}
	n = max(1, n)
	if err := checkCount(n); err != nil {
		return nil, duration, n, err
	}
	idx = make([]int, n)
	if n == total {
		for i := range idx {
			idx[i] = i
		}
		return idx, duration, n, nil
	}
	for i, y := range Linspace(0, float64(total-1), n) {
		idx[i] = int(y) // numpy astype(int): truncation
	}
	return idx, duration, n, nil
}

// SampleVLLMOpenCVDynamic selects frames as vLLM's opencv_dynamic loader does
// (vllm/multimodal/video.py OpenCVDynamicVideoBackend.load_bytes): duration = total/srcFPS;
// duration <= maxDuration: n = floor(duration·fps), indices = sorted set of
// min(total-1, ceil(i·srcFPS/fps)) for i < n; else n = int(maxDuration·fps), all frames when
// n >= total, else the sorted set of min(total-1, ceil(t·srcFPS)) over
// numpy.linspace(0, duration, n). No index (n = 0) is the loader's failure
// "max() arg is an empty sequence". It also returns the duration and n.
func SampleVLLMOpenCVDynamic(total int, srcFPS, fps, maxDuration float64) (idx []int, duration float64, n int, err error) {
	if err := checkNemotronClip(total, srcFPS); err != nil {
		return nil, 0, 0, err
	}
	if !finitePositive(fps) || !finitePositive(maxDuration) {
		return nil, 0, 0, stageErr(StageSampling, fmt.Sprintf("fps %v and max_duration %v must be finite and positive", fps, maxDuration))
	}
	if srcFPS == 0 {
		// duration = 0 or round(max_frame_idx / original_fps) + 1 divides by zero.
		return nil, 0, 0, stageErr(StageSampling, pyZeroDivision)
	}
	duration = float64(total) / srcFPS
	last := total - 1
	addSorted := func(v int) {
		v = min(last, v)
		if len(idx) == 0 || idx[len(idx)-1] < v {
			idx = append(idx, v) // the candidates are non-decreasing: the set is a dedupe
		}
	}
	if duration <= maxDuration {
		x := math.Floor(duration * fps)
		if x > MaxSampledFrames {
			return nil, duration, 0, stageErr(StageSampling, fmt.Sprintf("sampled frame count %v exceeds %d", x, MaxSampledFrames))
		}
		n = int(x)
		for i := range n {
			addSorted(int(math.Ceil(float64(i) * srcFPS / fps)))
		}
	} else {
		x := maxDuration * fps
		if x > MaxSampledFrames {
			return nil, duration, 0, stageErr(StageSampling, fmt.Sprintf("sampled frame count %v exceeds %d", x, MaxSampledFrames))
		}
		n = int(x)
		if n >= total {
			idx = make([]int, total)
			for i := range idx {
				idx[i] = i
			}
			return idx, duration, n, nil
		}
		for _, t := range Linspace(0, duration, n) {
			addSorted(int(math.Ceil(t * srcFPS)))
		}
	}
	if len(idx) == 0 {
		return nil, duration, n, stageErr(StageSampling, "max() arg is an empty sequence")
	}
	return idx, duration, n, nil
}

package layout

import (
	"fmt"

	"github.com/kvroute/kvroute/kv"
)

// NemotronContract is the `nemotron` object of an adapter nemotron_omni contract: the checkpoint
// geometry the worker's processor applies (config.json and vision_config values after any
// hf_overrides; golden/nemotron/README.md §3). docs/contracts.md §7 documents each field.
type NemotronContract struct {
	PatchSize                int     `json:"patch_size"`
	DownsampleRatio          float64 `json:"downsample_ratio"`
	ForceImageSize           int     `json:"force_image_size"`
	VideoTemporalPatchSize   int     `json:"video_temporal_patch_size"`
	VideoTargetNumPatches    *int    `json:"video_target_num_patches"`
	VideoTargetImgSize       *int    `json:"video_target_img_size"`
	VideoMaintainAspectRatio bool    `json:"video_maintain_aspect_ratio"`
	MinNumPatches            int     `json:"min_num_patches"`
	MaxNumPatches            int     `json:"max_num_patches"`
}

// Geometry returns the video geometry of the contract.
func (n *NemotronContract) Geometry() NemotronGeometry {
	return NemotronGeometry{PatchSize: n.PatchSize, DownsampleRatio: n.DownsampleRatio, ForceImageSize: n.ForceImageSize,
		TemporalPatchSize: n.VideoTemporalPatchSize, TargetNumPatches: n.VideoTargetNumPatches,
		TargetImgSize: n.VideoTargetImgSize, MaintainAspectRatio: n.VideoMaintainAspectRatio}
}

// ImageBudget returns the dynamic-resolution image setup of the contract.
func (n *NemotronContract) ImageBudget() NemotronImageBudget {
	return NemotronImageBudget{PatchSize: n.PatchSize, DownsampleRatio: n.DownsampleRatio,
		MinNumPatches: n.MinNumPatches, MaxNumPatches: n.MaxNumPatches}
}

type rawNemotron struct {
	PatchSize                num   `json:"patch_size"`
	DownsampleRatio          num   `json:"downsample_ratio"`
	ForceImageSize           num   `json:"force_image_size"`
	VideoTemporalPatchSize   num   `json:"video_temporal_patch_size"`
	VideoTargetNumPatches    num   `json:"video_target_num_patches"`
	VideoTargetImgSize       num   `json:"video_target_img_size"`
	VideoMaintainAspectRatio *bool `json:"video_maintain_aspect_ratio"`
	MinNumPatches            num   `json:"min_num_patches"`
	MaxNumPatches            num   `json:"max_num_patches"`
}

func (cv *conv) nemotron(r *rawNemotron) *NemotronContract {
	if r == nil {
		cv.fail("nemotron is missing (adapter %s)", AdapterNemotronOmni)
		return nil
	}
	n := &NemotronContract{
		PatchSize:              cv.int("nemotron.patch_size", r.PatchSize),
		DownsampleRatio:        cv.f64("nemotron.downsample_ratio", r.DownsampleRatio),
		ForceImageSize:         cv.int("nemotron.force_image_size", r.ForceImageSize),
		VideoTemporalPatchSize: cv.int("nemotron.video_temporal_patch_size", r.VideoTemporalPatchSize),
		VideoTargetNumPatches:  cv.optInt("nemotron.video_target_num_patches", r.VideoTargetNumPatches),
		VideoTargetImgSize:     cv.optInt("nemotron.video_target_img_size", r.VideoTargetImgSize),
		MinNumPatches:          cv.int("nemotron.min_num_patches", r.MinNumPatches),
		MaxNumPatches:          cv.int("nemotron.max_num_patches", r.MaxNumPatches),
	}
	if r.VideoMaintainAspectRatio == nil {
		cv.fail("nemotron.video_maintain_aspect_ratio is missing")
	} else {
		n.VideoMaintainAspectRatio = *r.VideoMaintainAspectRatio
	}
	return n
}

// validateNemotron checks an adapter nemotron_omni contract: engine vllm (vLLM is the only engine
// serving the architecture); sampler vllm_uniform (num_frames set, -1 or positive; fps null or
// positive; others null) or vllm_opencv_dynamic (fps and max_duration set and positive, others
// null); the Qwen-only fields null; token_ids with image_pad == video_pad (the <image> id, which
// image and video features share), vision_start/vision_end the <img>/</img> ids, all non-zero and
// the three distinct; 0 <= video_pruning_rate < 1 (EVS, null is 0); the nemotron geometry and image
// budget valid (NemotronGeometry.Validate, NemotronImageBudget.Validate).
func (c *Contract) validateNemotron() error {
	if c.Engine != kv.EngineVLLM {
		return fmt.Errorf("engine %q is not %q for adapter %s", c.Engine, kv.EngineVLLM, c.Adapter)
	}
	if c.Resize != (Resize{}) || c.ImageResize != nil || c.PlaceholderTarget != "" || c.TimestampTokenization != "" || c.SGLangPreprocess != nil {
		return fmt.Errorf("resize, image_resize, placeholder_target, timestamp_tokenization and sglang_preprocess must be null for adapter %s", c.Adapter)
	}
	s := c.Sampler
	if s.MinFrames != nil || s.MaxFrames != nil {
		return fmt.Errorf("sampler.min_frames and sampler.max_frames must be null for sampler.kind %q", s.Kind)
	}
	switch s.Kind {
	case SamplerVLLMUniform:
		if s.NumFrames == nil || *s.NumFrames == 0 || *s.NumFrames < -1 || *s.NumFrames > MaxSampledFrames {
			return fmt.Errorf("sampler.num_frames must be -1 (all frames) or in [1, %d] for sampler.kind %q", MaxSampledFrames, s.Kind)
		}
		if s.FPS != nil && !finitePositive(*s.FPS) {
			return fmt.Errorf("sampler.fps %v must be null or finite and positive", *s.FPS)
		}
		if s.MaxDuration != nil {
			return fmt.Errorf("sampler.max_duration must be null for sampler.kind %q", s.Kind)
		}
	case SamplerVLLMOpenCVDynamic:
		if s.NumFrames != nil {
			return fmt.Errorf("sampler.num_frames must be null for sampler.kind %q (the loader ignores it)", s.Kind)
		}
		if s.FPS == nil || !finitePositive(*s.FPS) || s.MaxDuration == nil || !finitePositive(*s.MaxDuration) {
			return fmt.Errorf("sampler.fps and sampler.max_duration must be set, finite and positive for sampler.kind %q", s.Kind)
		}
	default:
		return fmt.Errorf("sampler.kind %q is not %q or %q for adapter %s", s.Kind, SamplerVLLMUniform, SamplerVLLMOpenCVDynamic, c.Adapter)
	}
	if c.FrameCountSource != FrameCountDecoded && c.FrameCountSource != FrameCountContainer {
		return fmt.Errorf("frame_count_source %q is not %q or %q", c.FrameCountSource, FrameCountDecoded, FrameCountContainer)
	}
	ids := c.TokenIDs
	if ids.ImagePad == 0 || ids.VisionStart == 0 || ids.VisionEnd == 0 || ids.ImagePad != ids.VideoPad ||
		ids.VisionStart == ids.VisionEnd || ids.VisionStart == ids.ImagePad || ids.VisionEnd == ids.ImagePad {
		return fmt.Errorf("token_ids must hold the <img> (vision_start), </img> (vision_end) and <image> (image_pad = video_pad) ids, non-zero and distinct, got %+v", ids)
	}
	if r := c.VideoPruningRate; r != nil && !(*r >= 0 && *r < 1) { // NaN fails too
		return fmt.Errorf("video_pruning_rate %v out of range [0, 1)", *r)
	}
	if c.Nemotron == nil {
		return fmt.Errorf("nemotron is missing")
	}
	if err := c.Nemotron.Geometry().Validate(); err != nil {
		return fmt.Errorf("nemotron: %w", err)
	}
	if err := c.Nemotron.ImageBudget().Validate(); err != nil {
		return fmt.Errorf("nemotron: %w", err)
	}
	return nil
}

// PruningRate is the contract's video_pruning_rate (null is 0: EVS off).
func (c *Contract) PruningRate() float64 {
	if c.VideoPruningRate == nil {
		return 0
	}
	return *c.VideoPruningRate
}

// NemotronSampler returns the loader setup of an adapter nemotron_omni contract.
func (c *Contract) NemotronSampler() NemotronSampler {
	s := NemotronSampler{Kind: c.Sampler.Kind, NumFrames: -1, FPS: -1}
	if c.Sampler.NumFrames != nil {
		s.NumFrames = *c.Sampler.NumFrames
	}
	if c.Sampler.FPS != nil {
		s.FPS = *c.Sampler.FPS
	}
	if c.Sampler.MaxDuration != nil {
		s.MaxDuration = *c.Sampler.MaxDuration
	}
	return s
}

// LayoutNemotronVideoFor computes a video's layout under an adapter nemotron_omni contract
// (LayoutNemotronVideo with the contract's sampler, geometry and pruning rate).
func LayoutNemotronVideoFor(c *Contract, in VideoInput) (*NemotronVideoLayout, error) {
	if c == nil || c.Nemotron == nil {
		return &NemotronVideoLayout{EVSRetained: -1}, stageErr(StageSampling, "no nemotron_omni contract")
	}
	return LayoutNemotronVideo(c.Nemotron.Geometry(), c.NemotronSampler(), c.PruningRate(), in)
}

// NemotronContractJSON is the contract of a vLLM worker serving Nemotron 3 Nano Omni with the
// checkpoint's values (golden/nemotron/README.md §3), the default opencv loader (32 frames, no
// fps cap) and EVS off, with the token ids of the test model folder (testdata/nemotron-test-model:
// <img> 19, </img> 20, <image> 18). kvroute-sim publishes it for a Nemotron model folder when no
// -contract is given; an operator's real tokenizer may give other ids (docs/contracts.md §7).
const NemotronContractJSON = `{"schema": "kvroute.video_contract/v1", "adapter": "nemotron_omni", "engine": "vllm",
 "sampler": {"kind": "vllm_uniform", "fps": null, "min_frames": null, "max_frames": null, "num_frames": 32},
 "frame_count_source": "decoded",
 "token_ids": {"vision_start": 19, "vision_end": 20, "image_pad": 18, "video_pad": 18},
 "video_pruning_rate": 0.0,
 "nemotron": {"patch_size": 16, "downsample_ratio": 0.5, "force_image_size": 512, "video_temporal_patch_size": 2,
  "video_target_num_patches": 1024, "video_target_img_size": null, "video_maintain_aspect_ratio": true,
  "min_num_patches": 1024, "max_num_patches": 13312}}`

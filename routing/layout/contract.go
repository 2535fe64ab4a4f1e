package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/reason"
)

// Schema is the schema string of a version 1 video contract (DESIGN.md §2.3).
const Schema = "kvroute.video_contract/v1"

// Contract field values (DESIGN.md §2.3).
const (
	AdapterQwen3VL      = "qwen3_vl"
	AdapterNemotronOmni = "nemotron_omni"

	SamplerHFFPS            = "hf_fps"
	SamplerUniformNumFrames = "uniform_num_frames"
	SamplerDynamoMaxFrames  = "dynamo_max_frames"
	SamplerSGLang           = "sglang"

	FrameCountDecoded   = "decoded"
	FrameCountContainer = "container"

	PlaceholderBareVideoToken          = "bare_video_token"
	PlaceholderVisionWrappedVideoToken = "vision_wrapped_video_token"

	TimestampsSpliced = "spliced"
	TimestampsWhole   = "whole"
)

// ErrInvalidContract is wrapped by every error of ParseContract and Validate. Callers map it to
// reason.ContractUnsupported.
var ErrInvalidContract = errors.New("invalid video contract")

// Contract is a worker's video contract, version 1 (DESIGN.md §2.3): everything kvroute needs to
// rebuild that worker's video and image token layout. Pointer fields are optional (JSON null).
type Contract struct {
	Schema                string            `json:"schema"`
	Adapter               string            `json:"adapter"`
	Engine                string            `json:"engine"`
	Sampler               Sampler           `json:"sampler"`
	FrameCountSource      string            `json:"frame_count_source"`
	Resize                Resize            `json:"resize"`
	ImageResize           *ImageResize      `json:"image_resize"`
	PlaceholderTarget     string            `json:"placeholder_target"`
	TimestampTokenization string            `json:"timestamp_tokenization"`
	TokenIDs              TokenIDs          `json:"token_ids"`
	VideoPruningRate      *float64          `json:"video_pruning_rate"`
	SGLangPreprocess      *SGLangPreprocess `json:"sglang_preprocess"`
	// Nemotron is the checkpoint geometry of adapter nemotron_omni (null for qwen3_vl; left out of
	// a qwen3_vl contract's canonical form so its digest is unchanged).
	Nemotron *NemotronContract `json:"nemotron,omitempty"`
}

// Sampler selects the frames of a clip. Which fields are set depends on Kind (see Validate).
type Sampler struct {
	Kind      string   `json:"kind"`
	FPS       *float64 `json:"fps"`
	MinFrames *int     `json:"min_frames"`
	MaxFrames *int     `json:"max_frames"`
	NumFrames *int     `json:"num_frames"`
	// MaxDuration (seconds) is set for sampler.kind vllm_opencv_dynamic only (left out of the
	// canonical form when null, so qwen3_vl digests are unchanged).
	MaxDuration *float64 `json:"max_duration,omitempty"`
}

// Resize is the video smart_resize setup: Mode is ResizeLegacyCeil or ResizeRoundTiesEven;
// MinPixels/MaxPixels bound the whole clip (t·h·w pixels); factor = PatchSize·MergeSize.
type Resize struct {
	Mode              string `json:"mode"`
	MinPixels         int64  `json:"min_pixels"`
	MaxPixels         int64  `json:"max_pixels"`
	PatchSize         int    `json:"patch_size"`
	MergeSize         int    `json:"merge_size"`
	TemporalPatchSize int    `json:"temporal_patch_size"`
}

// ImageResize is the per-image pixel budget of the image smart_resize.
type ImageResize struct {
	MinPixels int64 `json:"min_pixels"`
	MaxPixels int64 `json:"max_pixels"`
}

// SGLangPreprocess is SGLang's own frame sampling and factor-28 pre-resize setup (the constants of
// sglang/srt/multimodal/processors/qwen_vl.py).
type SGLangPreprocess struct {
	ImageFactor      int     `json:"image_factor"`
	VideoMinPixels   int64   `json:"video_min_pixels"`
	VideoMaxPixels   int64   `json:"video_max_pixels"`
	VideoTotalPixels int64   `json:"video_total_pixels"`
	FrameFactor      int     `json:"frame_factor"`
	FPS              float64 `json:"fps"`
	MinFrames        int     `json:"min_frames"`
	MaxFrames        int     `json:"max_frames"`
}

// TokenIDs are the vision token ids of a Qwen3-VL model (config.json: vision_start_token_id,
// vision_end_token_id, image_token_id, video_token_id).
type TokenIDs struct {
	VisionStart uint32 `json:"vision_start"`
	VisionEnd   uint32 `json:"vision_end"`
	ImagePad    uint32 `json:"image_pad"`
	VideoPad    uint32 `json:"video_pad"`
}

// maxContractBytes bounds the size of a contract document.
const maxContractBytes = 1 << 16

// ParseContract decodes a contract document. Numbers are read as JSON numbers (2 and 2.0 are the
// same value; integer fields must hold integral values); unknown fields, a wrong JSON type or a
// document over 64 KiB are errors wrapping ErrInvalidContract. It does not Validate.
func ParseContract(data []byte) (*Contract, error) {
	if len(data) > maxContractBytes {
		return nil, fmt.Errorf("%w: document of %d bytes exceeds %d", ErrInvalidContract, len(data), maxContractBytes)
	}
	var raw rawContract
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: decoding: %w", ErrInvalidContract, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the contract object", ErrInvalidContract)
	}
	return raw.contract()
}

// Validate checks c against the validity table of DESIGN.md §2.3 and kvroute's support (adapter
// qwen3_vl with video_pruning_rate 0, or nemotron_omni: see validateNemotron). The error wraps
// ErrInvalidContract and names the field.
func (c *Contract) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidContract, fmt.Sprintf(format, args...))
	}
	if c == nil {
		return bad("no contract")
	}
	if c.Schema != Schema {
		return bad("schema %q is not %q", c.Schema, Schema)
	}
	switch c.Adapter {
	case AdapterQwen3VL:
		if c.Nemotron != nil {
			return bad("nemotron must be null for adapter %s", c.Adapter)
		}
		if c.Sampler.MaxDuration != nil {
			return bad("sampler.max_duration must be null for adapter %s", c.Adapter)
		}
	case AdapterNemotronOmni:
		if err := c.validateNemotron(); err != nil {
			return bad("%v", err)
		}
		return nil
	default:
		return bad("adapter %q is not supported (have %q, %q)", c.Adapter, AdapterQwen3VL, AdapterNemotronOmni)
	}
	if c.Engine != kv.EngineVLLM && c.Engine != kv.EngineSGLang {
		return bad("engine %q is not %q or %q", c.Engine, kv.EngineVLLM, kv.EngineSGLang)
	}
	if err := c.validateSampler(); err != nil {
		return bad("%v", err)
	}
	if c.FrameCountSource != FrameCountDecoded && c.FrameCountSource != FrameCountContainer {
		return bad("frame_count_source %q is not %q or %q", c.FrameCountSource, FrameCountDecoded, FrameCountContainer)
	}
	r := c.Resize
	if r.Mode != ResizeLegacyCeil && r.Mode != ResizeRoundTiesEven {
		return bad("resize.mode %q is not %q or %q", r.Mode, ResizeLegacyCeil, ResizeRoundTiesEven)
	}
	if err := checkBudget("resize", r.MinPixels, r.MaxPixels); err != nil {
		return bad("%v", err)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"resize.patch_size", r.PatchSize}, {"resize.merge_size", r.MergeSize}, {"resize.temporal_patch_size", r.TemporalPatchSize}} {
		if f.v <= 0 || f.v > 64 {
			return bad("%s %d out of range [1, 64]", f.name, f.v)
		}
	}
	if c.ImageResize != nil {
		if err := checkBudget("image_resize", c.ImageResize.MinPixels, c.ImageResize.MaxPixels); err != nil {
			return bad("%v", err)
		}
	}
	if c.PlaceholderTarget != PlaceholderBareVideoToken && c.PlaceholderTarget != PlaceholderVisionWrappedVideoToken {
		return bad("placeholder_target %q is not %q or %q", c.PlaceholderTarget,
			PlaceholderBareVideoToken, PlaceholderVisionWrappedVideoToken)
	}
	if c.TimestampTokenization != TimestampsSpliced && c.TimestampTokenization != TimestampsWhole {
		return bad("timestamp_tokenization %q is not %q or %q", c.TimestampTokenization, TimestampsSpliced, TimestampsWhole)
	}
	ids := c.TokenIDs
	seen := map[uint32]bool{}
	for _, id := range []uint32{ids.VisionStart, ids.VisionEnd, ids.ImagePad, ids.VideoPad} {
		if id == 0 || seen[id] {
			return bad("token_ids must be four distinct non-zero ids, got %+v", ids)
		}
		seen[id] = true
	}
	if c.VideoPruningRate != nil && *c.VideoPruningRate != 0 {
		return bad("video_pruning_rate %v must be 0 for adapter %s (EVS changes token counts)", *c.VideoPruningRate, c.Adapter)
	}
	return nil
}

func checkBudget(name string, minP, maxP int64) error {
	if minP <= 0 || maxP < minP || maxP > MaxPixelBudget {
		return fmt.Errorf("%s pixel budget [%d, %d] must satisfy 0 < min_pixels <= max_pixels <= %d",
			name, minP, maxP, int64(MaxPixelBudget))
	}
	return nil
}

func finitePositive(x float64) bool { return x > 0 && !math.IsInf(x, 0) }

func (c *Contract) validateSampler() error {
	s := c.Sampler
	set := func(p bool, name string, want bool) error {
		if p != want {
			if want {
				return fmt.Errorf("sampler.%s must be set for sampler.kind %q", name, s.Kind)
			}
			return fmt.Errorf("sampler.%s must be null for sampler.kind %q", name, s.Kind)
		}
		return nil
	}
	want := map[string][5]bool{ // fps, min_frames, max_frames, num_frames, max_duration
		SamplerHFFPS:            {true, true, true, false, false},
		SamplerUniformNumFrames: {false, false, false, true, false},
		SamplerDynamoMaxFrames:  {false, false, true, false, false},
		SamplerSGLang:           {false, false, false, false, false},
	}
	w, ok := want[s.Kind]
	if !ok {
		return fmt.Errorf("sampler.kind %q is not one of hf_fps, uniform_num_frames, dynamo_max_frames, sglang", s.Kind)
	}
	for i, f := range []struct {
		name string
		set  bool
	}{{"fps", s.FPS != nil}, {"min_frames", s.MinFrames != nil}, {"max_frames", s.MaxFrames != nil},
		{"num_frames", s.NumFrames != nil}, {"max_duration", s.MaxDuration != nil}} {
		if err := set(f.set, f.name, w[i]); err != nil {
			return err
		}
	}
	if (c.SGLangPreprocess != nil) != (s.Kind == SamplerSGLang) {
		if s.Kind == SamplerSGLang {
			return fmt.Errorf("sglang_preprocess must be set for sampler.kind %q", s.Kind)
		}
		return fmt.Errorf("sglang_preprocess must be null for sampler.kind %q", s.Kind)
	}
	switch s.Kind {
	case SamplerHFFPS:
		if !finitePositive(*s.FPS) {
			return fmt.Errorf("sampler.fps %v must be finite and positive", *s.FPS)
		}
		if *s.MinFrames < 1 || *s.MaxFrames < *s.MinFrames || *s.MaxFrames > MaxSampledFrames {
			return fmt.Errorf("sampler frames [%d, %d] must satisfy 1 <= min_frames <= max_frames <= %d",
				*s.MinFrames, *s.MaxFrames, MaxSampledFrames)
		}
	case SamplerUniformNumFrames:
		if *s.NumFrames < -1 || *s.NumFrames > MaxSampledFrames {
			return fmt.Errorf("sampler.num_frames %d out of range [-1, %d]", *s.NumFrames, MaxSampledFrames)
		}
	case SamplerDynamoMaxFrames:
		if *s.MaxFrames < 1 || *s.MaxFrames > MaxSampledFrames {
			return fmt.Errorf("sampler.max_frames %d out of range [1, %d]", *s.MaxFrames, MaxSampledFrames)
		}
	case SamplerSGLang:
		p := c.SGLangPreprocess
		switch {
		case p.ImageFactor <= 0 || p.ImageFactor > 1024:
			return fmt.Errorf("sglang_preprocess.image_factor %d out of range [1, 1024]", p.ImageFactor)
		case p.FrameFactor <= 0 || p.FrameFactor > 64:
			return fmt.Errorf("sglang_preprocess.frame_factor %d out of range [1, 64]", p.FrameFactor)
		case !finitePositive(p.FPS):
			return fmt.Errorf("sglang_preprocess.fps %v must be finite and positive", p.FPS)
		case p.MinFrames < 1 || p.MaxFrames < p.MinFrames || p.MaxFrames > MaxSampledFrames:
			return fmt.Errorf("sglang_preprocess frames [%d, %d] must satisfy 1 <= min_frames <= max_frames <= %d",
				p.MinFrames, p.MaxFrames, MaxSampledFrames)
		case p.VideoTotalPixels <= 0 || p.VideoTotalPixels > MaxPixelBudget:
			return fmt.Errorf("sglang_preprocess.video_total_pixels %d out of range [1, %d]", p.VideoTotalPixels, int64(MaxPixelBudget))
		}
		if err := checkBudget("sglang_preprocess video", p.VideoMinPixels, p.VideoMaxPixels); err != nil {
			return err
		}
	}
	return nil
}

// FrameCount returns the source frame count the worker's loader sees for a clip, per
// frame_count_source: the decoded (presentable) count for decoded; for container, the container's
// count (nb_frames, else round(duration × fps); 0 when unknown), which must equal the decoded
// count, since otherwise the router cannot know which frames the worker takes (DESIGN.md §2.3):
// that is a *reason.Error with code frame_count_mismatch.
func (c *Contract) FrameCount(decoded, container int) (int, error) {
	if c.FrameCountSource == FrameCountContainer && container != decoded {
		return 0, reason.New(reason.FrameCountMismatch, "container frame count %d differs from the decoded count %d",
			container, decoded)
	}
	return decoded, nil
}

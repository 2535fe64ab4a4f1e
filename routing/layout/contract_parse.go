package layout

import (
	"fmt"
	"math"
	"strconv"
)

// num is a JSON number field of a contract document; null and absent leave set false.
type num struct {
	set bool
	v   float64
}

func (n *num) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		*n = num{}
		return nil
	}
	if len(s) == 0 || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return fmt.Errorf("%s is not a JSON number", s)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("parsing number %s: %w", s, err)
	}
	*n = num{set: true, v: v}
	return nil
}

type rawSampler struct {
	Kind        *string `json:"kind"`
	FPS         num     `json:"fps"`
	MinFrames   num     `json:"min_frames"`
	MaxFrames   num     `json:"max_frames"`
	NumFrames   num     `json:"num_frames"`
	MaxDuration num     `json:"max_duration"`
}

type rawResize struct {
	Mode              *string `json:"mode"`
	MinPixels         num     `json:"min_pixels"`
	MaxPixels         num     `json:"max_pixels"`
	PatchSize         num     `json:"patch_size"`
	MergeSize         num     `json:"merge_size"`
	TemporalPatchSize num     `json:"temporal_patch_size"`
}

type rawImageResize struct {
	MinPixels num `json:"min_pixels"`
	MaxPixels num `json:"max_pixels"`
}

type rawTokenIDs struct {
	VisionStart num `json:"vision_start"`
	VisionEnd   num `json:"vision_end"`
	ImagePad    num `json:"image_pad"`
	VideoPad    num `json:"video_pad"`
}

type rawSGLang struct {
	ImageFactor      num `json:"image_factor"`
	VideoMinPixels   num `json:"video_min_pixels"`
	VideoMaxPixels   num `json:"video_max_pixels"`
	VideoTotalPixels num `json:"video_total_pixels"`
	FrameFactor      num `json:"frame_factor"`
	FPS              num `json:"fps"`
	MinFrames        num `json:"min_frames"`
	MaxFrames        num `json:"max_frames"`
}

type rawContract struct {
	Schema                *string         `json:"schema"`
	Adapter               *string         `json:"adapter"`
	Engine                *string         `json:"engine"`
	Sampler               *rawSampler     `json:"sampler"`
	FrameCountSource      *string         `json:"frame_count_source"`
	Resize                *rawResize      `json:"resize"`
	ImageResize           *rawImageResize `json:"image_resize"`
	PlaceholderTarget     *string         `json:"placeholder_target"`
	TimestampTokenization *string         `json:"timestamp_tokenization"`
	TokenIDs              *rawTokenIDs    `json:"token_ids"`
	VideoPruningRate      num             `json:"video_pruning_rate"`
	SGLangPreprocess      *rawSGLang      `json:"sglang_preprocess"`
	Nemotron              *rawNemotron    `json:"nemotron"`
}

// conv turns the raw numbers into typed fields, collecting the first error.
type conv struct{ err error }

func (cv *conv) fail(format string, args ...any) {
	if cv.err == nil {
		cv.err = fmt.Errorf("%w: %s", ErrInvalidContract, fmt.Sprintf(format, args...))
	}
}

func (cv *conv) str(name string, p *string) string {
	if p == nil {
		cv.fail("%s is missing", name)
		return ""
	}
	return *p
}

func (cv *conv) i64(name string, n num) int64 {
	if !n.set {
		cv.fail("%s is missing", name)
		return 0
	}
	if n.v != math.Trunc(n.v) || math.Abs(n.v) > 1<<53 {
		cv.fail("%s %v is not an integer", name, n.v)
		return 0
	}
	return int64(n.v)
}

func (cv *conv) int(name string, n num) int {
	v := cv.i64(name, n)
	if v > math.MaxInt32 || v < math.MinInt32 {
		cv.fail("%s %d out of range", name, v)
		return 0
	}
	return int(v)
}

func (cv *conv) optInt(name string, n num) *int {
	if !n.set {
		return nil
	}
	v := cv.int(name, n)
	return &v
}

func (cv *conv) f64(name string, n num) float64 {
	if !n.set {
		cv.fail("%s is missing", name)
	}
	return n.v
}

func (cv *conv) optF64(n num) *float64 {
	if !n.set {
		return nil
	}
	v := n.v
	return &v
}

func (cv *conv) u32(name string, n num) uint32 {
	v := cv.i64(name, n)
	if v < 0 || v > math.MaxUint32 {
		cv.fail("%s %d out of range", name, v)
		return 0
	}
	return uint32(v)
}

func (r *rawContract) contract() (*Contract, error) {
	var cv conv
	c := &Contract{
		Schema:           cv.str("schema", r.Schema),
		Adapter:          cv.str("adapter", r.Adapter),
		Engine:           cv.str("engine", r.Engine),
		FrameCountSource: cv.str("frame_count_source", r.FrameCountSource),
		VideoPruningRate: cv.optF64(r.VideoPruningRate),
	}
	nemotron := c.Adapter == AdapterNemotronOmni
	if nemotron {
		// The Qwen-only fields must be null; the geometry is in the nemotron object.
		for _, f := range []struct {
			name string
			set  bool
		}{{"resize", r.Resize != nil}, {"image_resize", r.ImageResize != nil}, {"placeholder_target", r.PlaceholderTarget != nil},
			{"timestamp_tokenization", r.TimestampTokenization != nil}, {"sglang_preprocess", r.SGLangPreprocess != nil}} {
			if f.set {
				cv.fail("%s must be null for adapter %s", f.name, AdapterNemotronOmni)
			}
		}
		c.Nemotron = cv.nemotron(r.Nemotron)
	} else {
		c.PlaceholderTarget = cv.str("placeholder_target", r.PlaceholderTarget)
		c.TimestampTokenization = cv.str("timestamp_tokenization", r.TimestampTokenization)
		if r.Nemotron != nil {
			cv.fail("nemotron must be null for adapter %s", c.Adapter)
		}
	}
	if s := r.Sampler; s == nil {
		cv.fail("sampler is missing")
	} else {
		c.Sampler = Sampler{
			Kind:        cv.str("sampler.kind", s.Kind),
			FPS:         cv.optF64(s.FPS),
			MinFrames:   cv.optInt("sampler.min_frames", s.MinFrames),
			MaxFrames:   cv.optInt("sampler.max_frames", s.MaxFrames),
			NumFrames:   cv.optInt("sampler.num_frames", s.NumFrames),
			MaxDuration: cv.optF64(s.MaxDuration),
		}
	}
	if z := r.Resize; z == nil {
		if !nemotron {
			cv.fail("resize is missing")
		}
	} else {
		c.Resize = Resize{
			Mode:              cv.str("resize.mode", z.Mode),
			MinPixels:         cv.i64("resize.min_pixels", z.MinPixels),
			MaxPixels:         cv.i64("resize.max_pixels", z.MaxPixels),
			PatchSize:         cv.int("resize.patch_size", z.PatchSize),
			MergeSize:         cv.int("resize.merge_size", z.MergeSize),
			TemporalPatchSize: cv.int("resize.temporal_patch_size", z.TemporalPatchSize),
		}
	}
	if z := r.ImageResize; z != nil {
		c.ImageResize = &ImageResize{
			MinPixels: cv.i64("image_resize.min_pixels", z.MinPixels),
			MaxPixels: cv.i64("image_resize.max_pixels", z.MaxPixels),
		}
	}
	if t := r.TokenIDs; t == nil {
		cv.fail("token_ids is missing")
	} else {
		c.TokenIDs = TokenIDs{
			VisionStart: cv.u32("token_ids.vision_start", t.VisionStart),
			VisionEnd:   cv.u32("token_ids.vision_end", t.VisionEnd),
			ImagePad:    cv.u32("token_ids.image_pad", t.ImagePad),
			VideoPad:    cv.u32("token_ids.video_pad", t.VideoPad),
		}
	}
	if p := r.SGLangPreprocess; p != nil {
		c.SGLangPreprocess = &SGLangPreprocess{
			ImageFactor:      cv.int("sglang_preprocess.image_factor", p.ImageFactor),
			VideoMinPixels:   cv.i64("sglang_preprocess.video_min_pixels", p.VideoMinPixels),
			VideoMaxPixels:   cv.i64("sglang_preprocess.video_max_pixels", p.VideoMaxPixels),
			VideoTotalPixels: cv.i64("sglang_preprocess.video_total_pixels", p.VideoTotalPixels),
			FrameFactor:      cv.int("sglang_preprocess.frame_factor", p.FrameFactor),
			FPS:              cv.f64("sglang_preprocess.fps", p.FPS),
			MinFrames:        cv.int("sglang_preprocess.min_frames", p.MinFrames),
			MaxFrames:        cv.int("sglang_preprocess.max_frames", p.MaxFrames),
		}
	}
	if cv.err != nil {
		return nil, cv.err
	}
	return c, nil
}

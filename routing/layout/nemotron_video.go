package layout

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// NemotronGeometry is the vision geometry of a Nemotron 3 Nano Omni checkpoint (config.json:
// patch_size, downsample_ratio, force_image_size and vision_config's video_* fields; values of the
// checkpoint in golden/nemotron/README.md §3).
type NemotronGeometry struct {
	PatchSize       int
	DownsampleRatio float64
	// ForceImageSize sizes video frames (force_image_size², num_image_token tokens) when neither
	// video target is set.
	ForceImageSize int
	// TemporalPatchSize is vision_config.video_temporal_patch_size: frames per tubelet.
	TemporalPatchSize int
	// TargetNumPatches (vision_config.video_target_num_patches) and TargetImgSize
	// (video_target_img_size, giving ceil(size/patch)² patches) are exclusive; nil is unset.
	TargetNumPatches *int
	TargetImgSize    *int
	// MaintainAspectRatio is vision_config.video_maintain_aspect_ratio.
	MaintainAspectRatio bool
}

// NemotronSampler is the worker's video loader setup: Kind SamplerVLLMUniform with NumFrames
// (--media-io-kwargs video num_frames, -1 unset) and FPS (<= 0 unset), or
// SamplerVLLMOpenCVDynamic with FPS and MaxDuration (seconds).
type NemotronSampler struct {
	Kind        string
	NumFrames   int
	FPS         float64
	MaxDuration float64
}

// NemotronVideoLayout is the layout of one <video> item of a Nemotron 3 Nano Omni prompt, with the
// field names of golden/nemotron/layout.jsonl's outputs.
type NemotronVideoLayout struct {
	Duration          float64
	NumFramesToSample int
	// Indices are the sampled source frame indices (frames_indices).
	Indices []int
	// TargetWidth and TargetHeight are the frame size the worker resizes to, in pixels.
	TargetWidth, TargetHeight int
	// PatchGridWH is [pw, ph] in patches.
	PatchGridWH [2]int
	// TokensPerTubelet is the <image> count of one tubelet without EVS.
	TokensPerTubelet int
	// TargetNumPatches is the resolved patch target; 0 when frames use force_image_size.
	TargetNumPatches int
	FrameDurationMS  int
	Timestamps       []float64
	TimestampTexts   []string
	NumTubelets      int
	// EVSRetained is the EVS retained token count; -1 when EVS is off.
	EVSRetained int
	// PlaceholderCounts is the <image> count of each tubelet; Separators its text.
	PlaceholderCounts []int
	Separators        []string
}

// TotalPlaceholderTokens is the number of <image> tokens of the item.
func (l *NemotronVideoLayout) TotalPlaceholderTokens() int {
	n := 0
	for _, c := range l.PlaceholderCounts {
		n += c
	}
	return n
}

// Segment is one piece of a Nemotron replacement (golden/nemotron/README.md §2): a text to
// tokenize on its own, a special marker (<img>, </img>) that is one token, or Count copies of the
// placeholder (<image>) id.
type Segment struct {
	Text        string `json:"text"`
	Special     bool   `json:"special"`
	Placeholder string `json:"placeholder"`
	Count       int    `json:"count"`
}

// MarshalJSON writes the golden form: {"text"}, {"text", "special": true} or
// {"placeholder", "count"}.
func (s Segment) MarshalJSON() ([]byte, error) {
	switch {
	case s.Placeholder != "":
		return []byte(`{"placeholder":` + strconv.Quote(s.Placeholder) + `,"count":` + strconv.Itoa(s.Count) + `}`), nil
	case s.Special:
		return []byte(`{"text":` + jsonString(s.Text) + `,"special":true}`), nil
	default:
		return []byte(`{"text":` + jsonString(s.Text) + `}`), nil
	}
}

func jsonString(s string) string {
	var b bytes.Buffer
	writeJCSString(&b, s)
	return b.String()
}

// The Nemotron marker and placeholder strings (vLLM nano_nemotron_vl.py IMG_START, IMG_END,
// IMG_CONTEXT, and the prompt placeholder of a video item).
const (
	NemotronImgStart   = "<img>"
	NemotronImgEnd     = "</img>"
	NemotronImgContext = "<image>"
	NemotronVideoToken = "<video>"
)

// Segments is the replacement of the <video> item: per tubelet its separator, <img>, its <image>
// run (possibly empty under EVS) and </img>.
func (l *NemotronVideoLayout) Segments() []Segment {
	out := make([]Segment, 0, 4*len(l.Separators))
	for g, sep := range l.Separators {
		out = append(out, Segment{Text: sep}, Segment{Text: NemotronImgStart, Special: true},
			Segment{Placeholder: NemotronImgContext, Count: l.PlaceholderCounts[g]},
			Segment{Text: NemotronImgEnd, Special: true})
	}
	return out
}

// Validate checks the geometry kvroute supports: positive patch size and temporal patch size, a
// 2×2 pixel shuffle (downsample_ratio 0.5, which vLLM asserts for dynamic resolution), at most
// one video target, positive targets and a positive force_image_size.
func (g NemotronGeometry) Validate() error {
	switch {
	case g.PatchSize <= 0 || g.PatchSize > 1024:
		return fmt.Errorf("patch_size %d out of range [1, 1024]", g.PatchSize)
	case g.DownsampleRatio != 0.5:
		return fmt.Errorf("downsample_ratio %v is not 0.5", g.DownsampleRatio)
	case g.TemporalPatchSize <= 0 || g.TemporalPatchSize > 64:
		return fmt.Errorf("video_temporal_patch_size %d out of range [1, 64]", g.TemporalPatchSize)
	case g.TargetNumPatches != nil && g.TargetImgSize != nil:
		return fmt.Errorf("video_target_num_patches and video_target_img_size are both set (vLLM refuses)")
	case g.TargetNumPatches != nil && (*g.TargetNumPatches <= 0 || *g.TargetNumPatches > 1<<24):
		return fmt.Errorf("video_target_num_patches %d out of range [1, %d]", *g.TargetNumPatches, 1<<24)
	case g.TargetImgSize != nil && (*g.TargetImgSize <= 0 || *g.TargetImgSize > MaxSide):
		return fmt.Errorf("video_target_img_size %d out of range [1, %d]", *g.TargetImgSize, MaxSide)
	case g.ForceImageSize <= 0 || g.ForceImageSize > MaxSide:
		return fmt.Errorf("force_image_size %d out of range [1, %d]", g.ForceImageSize, MaxSide)
	}
	return nil
}

// targetPatches resolves the video patch target: video_target_num_patches, else
// ceil(video_target_img_size/patch_size)², else 0 (frames use force_image_size).
func (g NemotronGeometry) targetPatches() int {
	switch {
	case g.TargetNumPatches != nil:
		return *g.TargetNumPatches
	case g.TargetImgSize != nil:
		side := (*g.TargetImgSize + g.PatchSize - 1) / g.PatchSize
		return side * side
	}
	return 0
}

// NemotronPatchGrid returns the video frame patch grid [pw, ph] for a width×height frame and a
// patch target, as vLLM's _compute_aspect_preserving_size (maintainAspect) or its square branch
// computes it (golden/nemotron/README.md §1 video step 2): aspect = W/max(H,1),
// ph = round(sqrt(target/aspect)), pw = round(sqrt(target·aspect)) (ties to even; this exact
// expression), both at least 1, then both rounded up to even when the product stays within the
// target, else both rounded down to even (at least 2; not re-checked, so extreme aspects exceed
// the target). Square: side = max(2, floor(sqrt(target)) rounded down to even).
func NemotronPatchGrid(width, height, target int, maintainAspect bool) [2]int {
	if !maintainAspect {
		side := int(math.Sqrt(float64(target)))
		side = max(2, side/2*2)
		return [2]int{side, side}
	}
	aspect := float64(width) / float64(max(height, 1))
	ph := max(int(math.RoundToEven(math.Sqrt(float64(target)/aspect))), 1)
	pw := max(int(math.RoundToEven(math.Sqrt(float64(target)*aspect))), 1)
	up := func(x int) int { return x + x%2 }
	down := func(x int) int { return x - x%2 }
	if up(ph)*up(pw) <= target {
		return [2]int{up(pw), up(ph)}
	}
	return [2]int{max(2, down(pw)), max(2, down(ph))}
}

// EVSRetainedTokens is vLLM's compute_retained_tokens_count (vllm/multimodal/evs.py) for a video
// of tubelets × perTubelet tokens: max(perTubelet, int(tubelets·perTubelet·(1-rate))), the float64
// product truncated.
func EVSRetainedTokens(perTubelet, tubelets int, rate float64) int {
	return max(perTubelet, int(float64(perTubelet*tubelets)*(1-rate)))
}

// NemotronSeparator is the text before tubelet g (0-based), whose frames have 1-based positions
// first.. in the sampled list and the given timestamp texts: "Frame 1 sampled at 0.00 seconds and
// frame 2 sampled at 0.03 seconds: ", prefixed by "\n" for g > 0.
func NemotronSeparator(g, first int, texts []string) string {
	var b strings.Builder
	if g > 0 {
		b.WriteByte('\n')
	}
	for k, ts := range texts {
		if k == 0 {
			b.WriteString("Frame ")
		} else {
			b.WriteString(" and frame ")
		}
		b.WriteString(strconv.Itoa(first + k))
		b.WriteString(" sampled at ")
		b.WriteString(ts)
		b.WriteString(" seconds")
	}
	b.WriteString(": ")
	return b.String()
}

// LayoutNemotronVideo computes the layout of one video item for a Nemotron 3 Nano Omni worker
// (vLLM nano_nemotron_vl.py and multimodal/evs.py at the versions of golden/nemotron/README.md §6):
// frames per sampler, the frame patch grid, tubelets of TemporalPatchSize frames, per-tubelet
// <image> counts (EVS when pruningRate > 0 moves every retained token into the first tubelet),
// timestamps idx·int(1000/srcFPS)/1000 written with two decimals (ties to even on the binary
// value, as Python's f"{ts:.2f}") and the separators. g must Validate and 0 <= pruningRate < 1.
// On error it returns a *StageError (stage sampling or frame_duration) and the layout computed so
// far, as the golden vectors record.
func LayoutNemotronVideo(g NemotronGeometry, s NemotronSampler, pruningRate float64, in VideoInput) (*NemotronVideoLayout, error) {
	l := &NemotronVideoLayout{EVSRetained: -1}
	if err := g.Validate(); err != nil {
		return l, stageErr(StageSampling, err.Error())
	}
	if !(pruningRate >= 0 && pruningRate < 1) {
		return l, stageErr(StageSampling, fmt.Sprintf("video_pruning_rate %v out of range [0, 1)", pruningRate))
	}
	if in.Width <= 0 || in.Height <= 0 || in.Width > MaxSide || in.Height > MaxSide {
		return l, stageErr(StageSampling, fmt.Sprintf("frame size %dx%d out of range [1, %d]", in.Width, in.Height, MaxSide))
	}
	var err error
	switch s.Kind {
	case SamplerVLLMUniform:
		l.Indices, l.Duration, l.NumFramesToSample, err = SampleVLLMUniform(in.TotalFrames, in.SourceFPS, s.NumFrames, s.FPS)
	case SamplerVLLMOpenCVDynamic:
		l.Indices, l.Duration, l.NumFramesToSample, err = SampleVLLMOpenCVDynamic(in.TotalFrames, in.SourceFPS, s.FPS, s.MaxDuration)
	default:
		err = stageErr(StageSampling, fmt.Sprintf("unknown sampler kind %q", s.Kind))
	}
	if err != nil {
		return l, err
	}
	if in.SourceFPS == 0 {
		return l, stageErr(StageFrameDuration, pyZeroDivision)
	}
	l.TargetNumPatches = g.targetPatches()
	if l.TargetNumPatches > 0 {
		l.PatchGridWH = NemotronPatchGrid(in.Width, in.Height, l.TargetNumPatches, g.MaintainAspectRatio)
		l.TargetWidth, l.TargetHeight = l.PatchGridWH[0]*g.PatchSize, l.PatchGridWH[1]*g.PatchSize
		l.TokensPerTubelet = (l.PatchGridWH[0] / 2) * (l.PatchGridWH[1] / 2)
	} else {
		side := g.ForceImageSize / g.PatchSize
		l.PatchGridWH = [2]int{side, side}
		l.TargetWidth, l.TargetHeight = g.ForceImageSize, g.ForceImageSize
		l.TokensPerTubelet = int(float64(side*side) * g.DownsampleRatio * g.DownsampleRatio) // num_image_token
	}
	l.FrameDurationMS = int(1000 / in.SourceFPS)
	n := len(l.Indices)
	l.Timestamps = make([]float64, n)
	l.TimestampTexts = make([]string, n)
	for i, idx := range l.Indices {
		l.Timestamps[i] = float64(idx*l.FrameDurationMS) / 1000.0
		l.TimestampTexts[i] = strconv.FormatFloat(l.Timestamps[i], 'f', 2, 64)
	}
	t := g.TemporalPatchSize
	l.NumTubelets = (n + t - 1) / t
	l.PlaceholderCounts = make([]int, l.NumTubelets)
	if pruningRate > 0 {
		l.EVSRetained = EVSRetainedTokens(l.TokensPerTubelet, l.NumTubelets, pruningRate)
		l.PlaceholderCounts[0] = l.EVSRetained
	} else {
		for i := range l.PlaceholderCounts {
			l.PlaceholderCounts[i] = l.TokensPerTubelet
		}
	}
	l.Separators = make([]string, l.NumTubelets)
	for gi := range l.Separators {
		lo, hi := gi*t, min(gi*t+t, n)
		l.Separators[gi] = NemotronSeparator(gi, lo+1, l.TimestampTexts[lo:hi])
	}
	return l, nil
}

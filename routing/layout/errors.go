package layout

import "errors"

// Stage names the step of the video layout that failed, as the golden vectors (layout.jsonl
// `error_stage`) name them.
type Stage string

// The stages of a video layout, in the order they run.
const (
	StageSampling        Stage = "sampling"
	StageSGLangNFrames   Stage = "sglang_nframes"
	StageSGLangPreResize Stage = "sglang_pre_resize"
	StageSmartResize     Stage = "smart_resize"
)

// StageError is a layout step that the reference implementation refuses (it raises there). Message
// is the upstream Python message where one exists (e.g. "t:1 must be larger than temporal_factor:2").
type StageError struct {
	Stage   Stage
	Message string
}

func (e *StageError) Error() string { return "layout " + string(e.Stage) + ": " + e.Message }

func stageErr(s Stage, msg string) error { return &StageError{Stage: s, Message: msg} }

// StageOf returns the stage of the first *StageError in err's chain, or "" when there is none.
func StageOf(err error) Stage {
	var se *StageError
	if errors.As(err, &se) {
		return se.Stage
	}
	return ""
}

// Input bounds. They keep every integer product of smart_resize (frames·height·width) below 2^53,
// where float64 and Python's exact integers agree, and bound the memory of a layout.
const (
	// MaxTotalFrames bounds a clip's source frame count.
	MaxTotalFrames = 1 << 24
	// MaxSampledFrames bounds the number of frames a sampler may select.
	MaxSampledFrames = 1 << 20
	// MaxSide bounds a frame's or image's width and height in pixels.
	MaxSide = 1 << 16
	// MaxPixelBudget bounds the pixel budgets of a contract.
	MaxPixelBudget = 1 << 48
)

package layout_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/kvroute/kvroute/routing/layout"
)

// nemotronVideoCase is one record of golden/nemotron/layout.jsonl.
type nemotronVideoCase struct {
	goldenID
	Tags    []string          `json:"tags"`
	Inputs  NemotronVideoIn   `json:"inputs"`
	Outputs nemotronVideoWant `json:"outputs"`
}

// NemotronVideoIn is the inputs object of a layout.jsonl record.
type NemotronVideoIn = layout.NemotronVideoInputs

type nemotronVideoWant struct {
	Duration               *float64         `json:"duration"`
	NumFramesToSample      *int             `json:"num_frames_to_sample"`
	FramesIndices          []int            `json:"frames_indices"`
	TargetWidth            int              `json:"target_width"`
	TargetHeight           int              `json:"target_height"`
	PatchGridWH            [2]int           `json:"patch_grid_wh"`
	TokensPerTubelet       int              `json:"tokens_per_tubelet"`
	TargetNumPatches       *int             `json:"target_num_patches"`
	FrameDurationMS        int              `json:"frame_duration_ms"`
	Timestamps             []float64        `json:"timestamps"`
	TimestampTexts         []string         `json:"timestamp_texts"`
	NumFrames              int              `json:"num_frames"`
	NumTubelets            int              `json:"num_tubelets"`
	EVSRetainedTokens      *int             `json:"evs_retained_tokens"`
	PlaceholderCounts      []int            `json:"placeholder_counts"`
	Separators             []string         `json:"separators"`
	TotalPlaceholderTokens int              `json:"total_placeholder_tokens"`
	SpecialTokens          int              `json:"special_tokens"`
	Replacement            []layout.Segment `json:"replacement"`
	Error                  string           `json:"error"`
	ErrorStage             string           `json:"error_stage"`
}

const nemotronDir = goldenDir + "nemotron/"

func TestNemotronGoldenVideoLayout(t *testing.T) {
	errCases := 0
	checkGolden(t, "nemotron/layout.jsonl", 260, func(c *nemotronVideoCase, fail func(string, ...any)) {
		o := c.Outputs
		l, err := c.Inputs.Layout()
		if o.NumFramesToSample != nil && o.FramesIndices != nil {
			if !reflect.DeepEqual(l.Indices, o.FramesIndices) || l.NumFramesToSample != *o.NumFramesToSample || l.Duration != *o.Duration {
				fail("sampling %v n=%d duration %v, want %v n=%d duration %v", l.Indices, l.NumFramesToSample, l.Duration,
					o.FramesIndices, *o.NumFramesToSample, *o.Duration)
			}
		}
		if o.Error != "" {
			errCases++
			var se *layout.StageError
			if !errors.As(err, &se) || se.Message != o.Error || string(se.Stage) != o.ErrorStage {
				fail("error %v, want %s: %q", err, o.ErrorStage, o.Error)
			}
			return
		}
		if err != nil {
			fail("error %v", err)
			return
		}
		tnp := 0
		if o.TargetNumPatches != nil {
			tnp = *o.TargetNumPatches
		}
		if l.TargetWidth != o.TargetWidth || l.TargetHeight != o.TargetHeight || l.PatchGridWH != o.PatchGridWH ||
			l.TokensPerTubelet != o.TokensPerTubelet || l.TargetNumPatches != tnp {
			fail("target %dx%d grid %v f=%d target %d, want %dx%d grid %v f=%d target %d", l.TargetWidth, l.TargetHeight,
				l.PatchGridWH, l.TokensPerTubelet, l.TargetNumPatches, o.TargetWidth, o.TargetHeight, o.PatchGridWH, o.TokensPerTubelet, tnp)
		}
		if l.FrameDurationMS != o.FrameDurationMS || !reflect.DeepEqual(l.Timestamps, o.Timestamps) ||
			!reflect.DeepEqual(l.TimestampTexts, o.TimestampTexts) {
			fail("frame %d ms timestamps %v %q, want %d %v %q", l.FrameDurationMS, l.Timestamps, l.TimestampTexts,
				o.FrameDurationMS, o.Timestamps, o.TimestampTexts)
		}
		evs := -1
		if o.EVSRetainedTokens != nil {
			evs = *o.EVSRetainedTokens
		}
		if len(l.Indices) != o.NumFrames || l.NumTubelets != o.NumTubelets || l.EVSRetained != evs ||
			!reflect.DeepEqual(l.PlaceholderCounts, o.PlaceholderCounts) || l.TotalPlaceholderTokens() != o.TotalPlaceholderTokens {
			fail("frames %d tubelets %d evs %d counts %v, want %d %d %d %v", len(l.Indices), l.NumTubelets, l.EVSRetained,
				l.PlaceholderCounts, o.NumFrames, o.NumTubelets, evs, o.PlaceholderCounts)
		}
		if !reflect.DeepEqual(l.Separators, o.Separators) {
			fail("separators %q, want %q", l.Separators, o.Separators)
		}
		if got := l.Segments(); !reflect.DeepEqual(got, o.Replacement) {
			fail("replacement %+v, want %+v", got, o.Replacement)
		}
		if 2*l.NumTubelets != o.SpecialTokens {
			fail("special tokens %d, want %d", 2*l.NumTubelets, o.SpecialTokens)
		}
	})
	if errCases != 2 {
		t.Errorf("%d error cases, want 2", errCases)
	}
}

type nemotronImageCase struct {
	goldenID
	Tags    []string                   `json:"tags"`
	Inputs  layout.NemotronImageInputs `json:"inputs"`
	Outputs struct {
		NumTokensAvailable *int `json:"num_tokens_available"`
		TotalPatchBudget   int  `json:"total_patch_budget"`
		Iterations         []struct {
			Budgets      []int `json:"budgets"`
			Patches      []int `json:"patches"`
			TotalPatches int   `json:"total_patches"`
		} `json:"iterations"`
		Images []struct {
			ClosestPatchGridWH [2]int           `json:"closest_patch_grid_wh"`
			PatchBudget        int              `json:"patch_budget"`
			UpscaledToMin      bool             `json:"upscaled_to_min"`
			PatchGridWH        [2]int           `json:"patch_grid_wh"`
			ResizedWidth       int              `json:"resized_width"`
			ResizedHeight      int              `json:"resized_height"`
			NumPatches         int              `json:"num_patches"`
			NumTokens          int              `json:"num_tokens"`
			Replacement        []layout.Segment `json:"replacement"`
		} `json:"images"`
		TotalPlaceholderTokens int    `json:"total_placeholder_tokens"`
		Error                  string `json:"error"`
		ErrorStage             string `json:"error_stage"`
	} `json:"outputs"`
}

func TestNemotronGoldenImageLayout(t *testing.T) {
	errCases := 0
	checkGolden(t, "nemotron/image_layout.jsonl", 166, func(c *nemotronImageCase, fail func(string, ...any)) {
		o := c.Outputs
		l, err := c.Inputs.Layout()
		if o.NumTokensAvailable != nil && l.NumTokensAvailable != *o.NumTokensAvailable {
			fail("tokens available %d, want %d", l.NumTokensAvailable, *o.NumTokensAvailable)
		}
		if len(l.Iterations) != len(o.Iterations) {
			fail("%d rounds, want %d", len(l.Iterations), len(o.Iterations))
		} else {
			for r, w := range o.Iterations {
				g := l.Iterations[r]
				if !reflect.DeepEqual(g.Budgets, w.Budgets) || !reflect.DeepEqual(g.Patches, w.Patches) || g.TotalPatches != w.TotalPatches {
					fail("round %d: %+v, want %+v", r, g, w)
				}
			}
		}
		if o.Error != "" {
			errCases++
			var se *layout.StageError
			if !errors.As(err, &se) || string(se.Stage) != o.ErrorStage || se.Message != o.Error {
				fail("error %v, want %s: %q", err, o.ErrorStage, o.Error)
			}
		} else if err != nil {
			fail("error %v", err)
		} else {
			if l.TotalPatchBudget != o.TotalPatchBudget || l.TotalPlaceholderTokens() != o.TotalPlaceholderTokens ||
				len(l.Images) != len(o.Images) {
				fail("budget %d total %d images %d, want %d %d %d", l.TotalPatchBudget, l.TotalPlaceholderTokens(),
					len(l.Images), o.TotalPatchBudget, o.TotalPlaceholderTokens, len(o.Images))
			} else {
				for k, w := range o.Images {
					g := l.Images[k]
					if g.ClosestPatchGridWH != w.ClosestPatchGridWH || g.PatchBudget != w.PatchBudget ||
						g.UpscaledToMin != w.UpscaledToMin || g.PatchGridWH != w.PatchGridWH || g.ResizedWidth != w.ResizedWidth ||
						g.ResizedHeight != w.ResizedHeight || g.NumPatches != w.NumPatches || g.NumTokens != w.NumTokens {
						fail("image %d: %+v, want %+v", k, g, w)
					}
					if got := g.Segments(); !reflect.DeepEqual(got, w.Replacement) {
						fail("image %d replacement %+v, want %+v", k, got, w.Replacement)
					}
				}
			}
		}
	})
	if errCases == 0 {
		t.Error("no error cases read")
	}
}

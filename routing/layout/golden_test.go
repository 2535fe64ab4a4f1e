package layout_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/routing/layout"
)

const goldenDir = "../../testdata/golden/"

// readJSONL decodes every line of a golden JSONL file into a new T.
func readJSONL[T any](t *testing.T, name string) []T {
	return goldens.Records[T](t, goldenDir+name)
}

// goldenID is the id of a golden JSONL record.
type goldenID struct {
	ID string `json:"id"`
}

func (g *goldenID) caseID() string { return g.ID }

// checkGolden reads the want records of the golden file name and calls check on each; a failure
// check reports through fail (prefixed with the record's id) makes the record count as a mismatch.
// It logs how many records match and fails the test unless all do.
func checkGolden[T any, P interface {
	*T
	caseID() string
}](t *testing.T, name string, want int, check func(c P, fail func(format string, args ...any))) {
	t.Helper()
	cases := readJSONL[T](t, name)
	if len(cases) != want {
		t.Fatalf("%s has %d cases, want %d", name, len(cases), want)
	}
	matched := 0
	for i := range cases {
		c := P(&cases[i])
		ok := true
		check(c, func(format string, args ...any) {
			ok = false
			t.Errorf(c.caseID()+": "+format, args...)
		})
		if ok {
			matched++
		}
	}
	t.Logf("%s: %d/%d cases match", name, matched, len(cases))
	if matched != len(cases) {
		t.Errorf("%s: %d/%d golden cases match", name, matched, len(cases))
	}
}

type layoutCase struct {
	goldenID
	Tags   []string `json:"tags"`
	Inputs struct {
		TotalFrames       int                      `json:"total_frames"`
		SourceFPS         float64                  `json:"source_fps"`
		Width             int                      `json:"width"`
		Height            int                      `json:"height"`
		Sampler           string                   `json:"sampler"`
		FPS               *float64                 `json:"fps"`
		MinFrames         *int                     `json:"min_frames"`
		MaxFrames         *int                     `json:"max_frames"`
		NumFrames         *int                     `json:"num_frames"`
		MinPixels         int64                    `json:"min_pixels"`
		MaxPixels         int64                    `json:"max_pixels"`
		PatchSize         int                      `json:"patch_size"`
		MergeSize         int                      `json:"merge_size"`
		TemporalPatchSize int                      `json:"temporal_patch_size"`
		ResizeMode        string                   `json:"resize_mode"`
		SGLangPreprocess  *layout.SGLangPreprocess `json:"sglang_preprocess"`
	} `json:"inputs"`
	Outputs struct {
		Indices                []int     `json:"indices"`
		NumFrames              int       `json:"num_frames"`
		SGLangNFrames          int       `json:"sglang_nframes"`
		SGLangPreResizedHeight int       `json:"sglang_pre_resized_height"`
		SGLangPreResizedWidth  int       `json:"sglang_pre_resized_width"`
		ResizedHeight          int       `json:"resized_height"`
		ResizedWidth           int       `json:"resized_width"`
		GridTHW                [3]int    `json:"grid_thw"`
		TokensPerGroup         int       `json:"tokens_per_group"`
		VideoPadTokens         int       `json:"video_pad_tokens"`
		GroupTimestamps        []float64 `json:"group_timestamps"`
		TimestampTexts         []string  `json:"timestamp_texts"`
		Error                  string    `json:"error"`
		ErrorStage             string    `json:"error_stage"`
	} `json:"outputs"`
}

// contractFor builds the valid contract that describes a layout.jsonl case's inputs.
func contractFor(c *layoutCase) *layout.Contract {
	in := c.Inputs
	ct := &layout.Contract{
		Schema: layout.Schema, Adapter: layout.AdapterQwen3VL, Engine: kv.EngineVLLM,
		FrameCountSource: layout.FrameCountDecoded,
		Resize: layout.Resize{Mode: in.ResizeMode, MinPixels: in.MinPixels, MaxPixels: in.MaxPixels,
			PatchSize: in.PatchSize, MergeSize: in.MergeSize, TemporalPatchSize: in.TemporalPatchSize},
		ImageResize:           &layout.ImageResize{MinPixels: 65536, MaxPixels: 16777216},
		PlaceholderTarget:     layout.PlaceholderBareVideoToken,
		TimestampTokenization: layout.TimestampsSpliced,
		TokenIDs:              testIDs,
	}
	ct.Sampler.Kind = in.Sampler
	switch in.Sampler {
	case layout.SamplerHFFPS:
		ct.Sampler.FPS, ct.Sampler.MinFrames, ct.Sampler.MaxFrames = in.FPS, in.MinFrames, in.MaxFrames
	case layout.SamplerUniformNumFrames:
		ct.Sampler.NumFrames = in.NumFrames
	case layout.SamplerDynamoMaxFrames:
		ct.Sampler.MaxFrames = in.MaxFrames
	case layout.SamplerSGLang:
		ct.Engine = kv.EngineSGLang
		ct.SGLangPreprocess = in.SGLangPreprocess
	}
	return ct
}

var testIDs = layout.TokenIDs{VisionStart: 151652, VisionEnd: 151653, ImagePad: 151655, VideoPad: 151656}

func TestGoldenVideoLayout(t *testing.T) {
	checkGolden(t, "layout.jsonl", 752, func(c *layoutCase, fail func(string, ...any)) {
		ct := contractFor(c)
		if err := ct.Validate(); err != nil {
			fail("contract: %v", err)
			return
		}
		in := layout.VideoInput{TotalFrames: c.Inputs.TotalFrames, SourceFPS: c.Inputs.SourceFPS,
			Width: c.Inputs.Width, Height: c.Inputs.Height}
		l, err := layout.LayoutVideo(ct, in)
		o := c.Outputs
		if o.Error != "" {
			var se *layout.StageError
			switch {
			case err == nil:
				fail("no error, want %q", o.Error)
			case !asStage(err, &se):
				fail("error %v is not a *StageError", err)
			case se.Message != o.Error || string(se.Stage) != o.ErrorStage:
				fail("error %s/%q, want %s/%q", se.Stage, se.Message, o.ErrorStage, o.Error)
			}
			if o.Indices != nil && (!reflect.DeepEqual(l.Indices, o.Indices) || l.NumFrames != o.NumFrames) {
				fail("indices %v, want %v", l.Indices, o.Indices)
			}
		} else {
			if err != nil {
				fail("error %v", err)
				return
			}
			if !reflect.DeepEqual(l.Indices, o.Indices) || l.NumFrames != o.NumFrames {
				fail("indices %v, want %v", l.Indices, o.Indices)
			}
			if l.SGLangNFrames != o.SGLangNFrames || l.SGLangPreResizedHeight != o.SGLangPreResizedHeight ||
				l.SGLangPreResizedWidth != o.SGLangPreResizedWidth {
				fail("sglang n %d pre-resize %dx%d, want %d %dx%d", l.SGLangNFrames, l.SGLangPreResizedHeight,
					l.SGLangPreResizedWidth, o.SGLangNFrames, o.SGLangPreResizedHeight, o.SGLangPreResizedWidth)
			}
			if l.ResizedHeight != o.ResizedHeight || l.ResizedWidth != o.ResizedWidth || l.GridTHW != o.GridTHW ||
				l.TokensPerGroup != o.TokensPerGroup || l.VideoPadTokens() != o.VideoPadTokens {
				fail("resized %dx%d grid %v tpg %d, want %dx%d grid %v tpg %d", l.ResizedHeight, l.ResizedWidth,
					l.GridTHW, l.TokensPerGroup, o.ResizedHeight, o.ResizedWidth, o.GridTHW, o.TokensPerGroup)
			}
			if !reflect.DeepEqual(l.GroupTimestamps, o.GroupTimestamps) {
				fail("group timestamps %v, want %v", l.GroupTimestamps, o.GroupTimestamps)
			}
			if !reflect.DeepEqual(l.TimestampTexts, o.TimestampTexts) {
				fail("timestamp texts %v, want %v", l.TimestampTexts, o.TimestampTexts)
			}
		}
	})
}

func asStage(err error, se **layout.StageError) bool { return errors.As(err, se) }

type imageCase struct {
	goldenID
	Inputs struct {
		Height    int   `json:"height"`
		Width     int   `json:"width"`
		MinPixels int64 `json:"min_pixels"`
		MaxPixels int64 `json:"max_pixels"`
		PatchSize int   `json:"patch_size"`
		MergeSize int   `json:"merge_size"`
	} `json:"inputs"`
	Outputs struct {
		ResizedHeight int    `json:"resized_height"`
		ResizedWidth  int    `json:"resized_width"`
		GridTHW       [3]int `json:"grid_thw"`
		Tokens        int    `json:"tokens"`
		Error         string `json:"error"`
	} `json:"outputs"`
}

func TestGoldenImageLayout(t *testing.T) {
	checkGolden(t, "image_layout.jsonl", 392, func(c *imageCase, fail func(string, ...any)) {
		in, o := c.Inputs, c.Outputs
		r := layout.Resize{PatchSize: in.PatchSize, MergeSize: in.MergeSize, TemporalPatchSize: 2}
		l, err := layout.LayoutImage(r, layout.ImageResize{MinPixels: in.MinPixels, MaxPixels: in.MaxPixels}, in.Width, in.Height)
		if o.Error != "" {
			var se *layout.StageError
			if err == nil || !asStage(err, &se) || se.Message != o.Error {
				fail("error %v, want %q", err, o.Error)
			}
			return
		}
		if err != nil {
			fail("error %v", err)
			return
		}
		want := layout.ImageLayout{ResizedHeight: o.ResizedHeight, ResizedWidth: o.ResizedWidth, GridTHW: o.GridTHW, Tokens: o.Tokens}
		if *l != want {
			fail("%+v, want %+v", *l, want)
		}
	})
}

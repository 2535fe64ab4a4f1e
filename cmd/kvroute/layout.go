package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// maxContractFile bounds the contract file read by `kvroute layout` and `kvroute identity`.
const maxContractFile = 1 << 16

func init() {
	register("layout", "layout --model DIR --contract FILE (--total-frames N --source-fps F | --image) --width W --height H"+
		" | layout --adapter nemotron_omni --input FILE [--image]", runLayout)
}

// videoLayoutOutput is the output of `kvroute layout` for a video, keys in DESIGN.md §10a order.
type videoLayoutOutput struct {
	Indices             []int    `json:"indices"`
	ResizedHeight       int      `json:"resized_height"`
	ResizedWidth        int      `json:"resized_width"`
	GridTHW             [3]int   `json:"grid_thw"`
	TokensPerGroup      int      `json:"tokens_per_group"`
	TimestampTexts      []string `json:"timestamp_texts"`
	ReplacementTokenIDs []uint32 `json:"replacement_token_ids"`
}

// imageLayoutOutput is the output of `kvroute layout --image`.
type imageLayoutOutput struct {
	ResizedHeight int    `json:"resized_height"`
	ResizedWidth  int    `json:"resized_width"`
	GridTHW       [3]int `json:"grid_thw"`
	Tokens        int    `json:"tokens"`
}

// runLayout implements `kvroute layout` (DESIGN.md §10a): the layout a worker with the given
// contract produces for a video of N frames at F fps and W×H pixels (sampled indices, resized
// size, grid, timestamp texts and the replacement token ids, each timestamp tokenized alone), or
// with --image for an image (the contract's image_resize, else the model's preprocessor_config.json
// budget). The model folder is checked as at startup (layout.LoadModel) and must fit the contract.
// A nemotron_omni contract prints the Nemotron fields and replacement_token_ids instead
// (nemotronContractLayout); --adapter nemotron_omni --input FILE lays out a golden record's inputs
// without a model folder (runNemotronLayout).
func runLayout(args []string) (any, error) {
	fs := newFlags("layout")
	dir := fs.String("model", "", "model directory (config.json, processor configs, tokenizer.json)")
	contractPath := fs.String("contract", "", "video contract JSON file (DESIGN.md §2.3)")
	image := fs.Bool("image", false, "lay out an image instead of a video")
	total := fs.Int("total-frames", 0, "source frame count of the video")
	fps := fs.Float64("source-fps", 0, "source frame rate of the video")
	width := fs.Int("width", 0, "frame or image width in pixels")
	height := fs.Int("height", 0, "frame or image height in pixels")
	adapter := fs.String("adapter", layout.AdapterQwen3VL, "model adapter: qwen3_vl or nemotron_omni")
	input := fs.String("input", "", "nemotron_omni: a golden layout record (or its inputs object) as JSON")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	set := flagsSet(fs)
	switch *adapter {
	case layout.AdapterNemotronOmni:
		return runNemotronLayout(set, *input, *image)
	case layout.AdapterQwen3VL:
		if set["input"] {
			return nil, errors.New("layout: --input is for --adapter nemotron_omni")
		}
	default:
		return nil, fmt.Errorf("layout: --adapter %q is not qwen3_vl or nemotron_omni", *adapter)
	}
	need := []string{"model", "contract", "width", "height"}
	if !*image {
		need = append(need, "total-frames", "source-fps")
	} else if set["total-frames"] || set["source-fps"] {
		return nil, errors.New("layout: --image takes no --total-frames or --source-fps")
	}
	for _, n := range need {
		if !set[n] {
			return nil, fmt.Errorf("layout: --%s is required", n)
		}
	}
	c, m, tok, err := loadContractModel(*dir, *contractPath)
	if err != nil {
		return nil, err
	}
	if c.Adapter == layout.AdapterNemotronOmni {
		if *image {
			return nil, errors.New("layout: a nemotron_omni image layout depends on the request (max_model_len, text_prompt_len): use --adapter nemotron_omni --input FILE --image")
		}
		return nemotronContractLayout(c, m, tok, layout.VideoInput{TotalFrames: *total, SourceFPS: *fps, Width: *width, Height: *height})
	}
	a, err := layout.NewQwen3VL(c, m, tok)
	if err != nil {
		return nil, err
	}
	if *image {
		return imageLayout(a, *width, *height)
	}
	return videoLayout(a, layout.VideoInput{TotalFrames: *total, SourceFPS: *fps, Width: *width, Height: *height})
}

// loadContractModel reads and validates the contract, loads and checks the model folder as at
// startup, and loads the model's tokenizer.
func loadContractModel(dir, contractPath string) (*layout.Contract, *layout.Model, *tokenizer.Tokenizer, error) {
	c, err := readContract(contractPath)
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := layout.LoadModel(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("loading tokenizer: %w", err)
	}
	return c, m, tok, nil
}

func videoLayout(a *layout.Qwen3VL, in layout.VideoInput) (*videoLayoutOutput, error) {
	l, err := a.VideoLayout(in)
	if err != nil {
		return nil, err
	}
	repl, err := a.VideoReplacement(l)
	if err != nil {
		return nil, err
	}
	return &videoLayoutOutput{
		Indices:       l.Indices,
		ResizedHeight: l.ResizedHeight, ResizedWidth: l.ResizedWidth,
		GridTHW:             l.GridTHW,
		TokensPerGroup:      l.TokensPerGroup,
		TimestampTexts:      l.TimestampTexts,
		ReplacementTokenIDs: repl,
	}, nil
}

func imageLayout(a *layout.Qwen3VL, width, height int) (*imageLayoutOutput, error) {
	l, err := a.ImageLayout(width, height)
	if err != nil {
		return nil, err
	}
	return &imageLayoutOutput{ResizedHeight: l.ResizedHeight, ResizedWidth: l.ResizedWidth, GridTHW: l.GridTHW, Tokens: l.Tokens}, nil
}

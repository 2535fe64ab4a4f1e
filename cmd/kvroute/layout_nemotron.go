package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kvroute/kvroute/routing/layout"
)

// maxLayoutInput bounds the --input file of `kvroute layout --adapter nemotron_omni`.
const maxLayoutInput = 1 << 20

// nemotronVideoOutput is the output of `kvroute layout --adapter nemotron_omni`: the fields of a
// golden/nemotron/layout.jsonl record's outputs object.
type nemotronVideoOutput struct {
	FramesIndices          []int            `json:"frames_indices"`
	TimestampTexts         []string         `json:"timestamp_texts"`
	PlaceholderCounts      []int            `json:"placeholder_counts"`
	Separators             []string         `json:"separators"`
	TotalPlaceholderTokens int              `json:"total_placeholder_tokens"`
	Replacement            []layout.Segment `json:"replacement"`
}

// nemotronImageOutput is the output with --image: the fields of a
// golden/nemotron/image_layout.jsonl record's outputs object.
type nemotronImageOutput struct {
	Images []struct {
		PatchGridWH [2]int           `json:"patch_grid_wh"`
		NumTokens   int              `json:"num_tokens"`
		Replacement []layout.Segment `json:"replacement"`
	} `json:"images"`
	TotalPlaceholderTokens int `json:"total_placeholder_tokens"`
}

// runNemotronLayout implements `kvroute layout --adapter nemotron_omni --input FILE [--image]`: it
// reads a golden record (its "inputs" object) or a bare inputs object and prints the layout vLLM
// builds for it (golden/nemotron/README.md §1). The geometry comes from the input's config object,
// so no model folder is needed. Layout errors name the stage ("layout sampling: ...").
func runNemotronLayout(set map[string]bool, path string, image bool) (any, error) {
	for _, n := range []string{"model", "contract", "total-frames", "source-fps", "width", "height"} {
		if set[n] {
			return nil, fmt.Errorf("layout: --adapter nemotron_omni takes its inputs from --input, not --%s", n)
		}
	}
	if !set["input"] {
		return nil, errors.New("layout: --input is required with --adapter nemotron_omni")
	}
	raw, err := readFileLimited(path, maxLayoutInput, "layout input")
	if err != nil {
		return nil, err
	}
	var rec struct {
		Inputs json.RawMessage `json:"inputs"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("decoding layout input: %w", err)
	}
	if len(rec.Inputs) > 0 {
		raw = rec.Inputs
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if image {
		var in layout.NemotronImageInputs
		if err := dec.Decode(&in); err != nil {
			return nil, fmt.Errorf("decoding image layout inputs: %w", err)
		}
		l, err := in.Layout()
		if err != nil {
			return nil, err
		}
		out := &nemotronImageOutput{TotalPlaceholderTokens: l.TotalPlaceholderTokens()}
		out.Images = make([]struct {
			PatchGridWH [2]int           `json:"patch_grid_wh"`
			NumTokens   int              `json:"num_tokens"`
			Replacement []layout.Segment `json:"replacement"`
		}, len(l.Images))
		for i := range l.Images {
			im := &l.Images[i]
			out.Images[i].PatchGridWH, out.Images[i].NumTokens, out.Images[i].Replacement = im.PatchGridWH, im.NumTokens, im.Segments()
		}
		return out, nil
	}
	var in layout.NemotronVideoInputs
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("decoding video layout inputs: %w", err)
	}
	l, err := in.Layout()
	if err != nil {
		return nil, err
	}
	return &nemotronVideoOutput{FramesIndices: l.Indices, TimestampTexts: l.TimestampTexts, PlaceholderCounts: l.PlaceholderCounts,
		Separators: l.Separators, TotalPlaceholderTokens: l.TotalPlaceholderTokens(), Replacement: l.Segments()}, nil
}

// nemotronContractOutput is the output of `kvroute layout --model DIR --contract FILE …` for a
// nemotron_omni contract: the layout fields and the replacement as token ids of the model's
// tokenizer (each text piece encoded alone).
type nemotronContractOutput struct {
	FramesIndices          []int    `json:"frames_indices"`
	TimestampTexts         []string `json:"timestamp_texts"`
	PlaceholderCounts      []int    `json:"placeholder_counts"`
	Separators             []string `json:"separators"`
	TotalPlaceholderTokens int      `json:"total_placeholder_tokens"`
	ReplacementTokenIDs    []uint32 `json:"replacement_token_ids"`
}

// nemotronContractLayout lays a clip out under a nemotron_omni contract with the model folder's
// tokenizer (the adapter the router builds at start).
func nemotronContractLayout(c *layout.Contract, m *layout.Model, tok layout.Tokenizer, in layout.VideoInput) (*nemotronContractOutput, error) {
	a, err := layout.NewNemotronOmni(c, m, tok)
	if err != nil {
		return nil, err
	}
	l, err := a.VideoLayout(in)
	if err != nil {
		return nil, err
	}
	ids, err := a.Replacement(l.Segments())
	if err != nil {
		return nil, err
	}
	return &nemotronContractOutput{FramesIndices: l.Indices, TimestampTexts: l.TimestampTexts, PlaceholderCounts: l.PlaceholderCounts,
		Separators: l.Separators, TotalPlaceholderTokens: l.TotalPlaceholderTokens(), ReplacementTokenIDs: ids}, nil
}

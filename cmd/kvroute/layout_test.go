package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// layoutContractDoc is the contract of DESIGN.md §2.3 with the sampler and resize mode left open.
const layoutContractDoc = `{"schema": "kvroute.video_contract/v1", "adapter": "qwen3_vl", "engine": "%ENGINE%",
 "sampler": %SAMPLER%, "frame_count_source": "decoded",
 "resize": {"mode": "%MODE%", "min_pixels": %MIN%, "max_pixels": %MAX%, "patch_size": 16, "merge_size": 2, "temporal_patch_size": 2},
 "image_resize": {"min_pixels": 65536, "max_pixels": 16777216},
 "placeholder_target": "bare_video_token", "timestamp_tokenization": "spliced",
 "token_ids": {"vision_start": 151652, "vision_end": 151653, "image_pad": 151655, "video_pad": 151656},
 "video_pruning_rate": 0.0, "sglang_preprocess": %SGLANG%}`

type layoutGolden struct {
	ID     string                     `json:"id"`
	Inputs map[string]json.RawMessage `json:"inputs"`
	Out    struct {
		Indices        []int    `json:"indices"`
		ResizedHeight  int      `json:"resized_height"`
		ResizedWidth   int      `json:"resized_width"`
		GridTHW        [3]int   `json:"grid_thw"`
		TokensPerGroup int      `json:"tokens_per_group"`
		TimestampTexts []string `json:"timestamp_texts"`
		Error          string   `json:"error"`
	} `json:"outputs"`
}

// contractDoc writes the contract JSON for a layout.jsonl case's inputs.
func contractDoc(in map[string]json.RawMessage) string {
	var kind, mode string
	_ = json.Unmarshal(in["sampler"], &kind)
	_ = json.Unmarshal(in["resize_mode"], &mode)
	engine, sglang := "vllm", "null"
	var sampler string
	switch kind {
	case "hf_fps":
		sampler = `{"kind": "hf_fps", "fps": ` + string(in["fps"]) + `, "min_frames": ` + string(in["min_frames"]) +
			`, "max_frames": ` + string(in["max_frames"]) + `, "num_frames": null}`
	case "uniform_num_frames":
		sampler = `{"kind": "uniform_num_frames", "fps": null, "min_frames": null, "max_frames": null, "num_frames": ` + string(in["num_frames"]) + `}`
	case "dynamo_max_frames":
		sampler = `{"kind": "dynamo_max_frames", "fps": null, "min_frames": null, "max_frames": ` + string(in["max_frames"]) + `, "num_frames": null}`
	case "sglang":
		sampler = `{"kind": "sglang", "fps": null, "min_frames": null, "max_frames": null, "num_frames": null}`
		engine, sglang = "sglang", string(in["sglang_preprocess"])
	}
	return strings.NewReplacer("%ENGINE%", engine, "%SAMPLER%", sampler, "%MODE%", mode,
		"%MIN%", string(in["min_pixels"]), "%MAX%", string(in["max_pixels"]), "%SGLANG%", sglang).Replace(layoutContractDoc)
}

// topKeys returns the keys of a printed JSON object in order.
func topKeys(t *testing.T, s string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestLayoutCommand(t *testing.T) {
	var lines []layoutGolden
	goldens.EachLine(t, "../../testdata/golden/layout.jsonl", func(line []byte) {
		var g layoutGolden
		if err := json.Unmarshal(line, &g); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, g)
	})
	// Full command path on the first worked example: a contract file and the model folder.
	path := filepath.Join(t.TempDir(), "contract.json")
	if err := os.WriteFile(path, []byte(contractDoc(lines[0].Inputs)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runLayout([]string{"--model", testModelDir, "--contract", path,
		"--total-frames", "300", "--source-fps", "30", "--width", "640", "--height", "360"})
	if err != nil {
		t.Fatal(err)
	}
	s := jsonOut(t, out)
	wantKeys := []string{"indices", "resized_height", "resized_width", "grid_thw", "tokens_per_group", "timestamp_texts", "replacement_token_ids"}
	if got := topKeys(t, s); !slices.Equal(got, wantKeys) {
		t.Errorf("video keys %v, want %v", got, wantKeys)
	}
	if !strings.HasPrefix(s, `{"indices":[0,16,31,47,63,79,94,110,126,142,157,173,189,205,220,236,252,268,283,299],"resized_height":352,"resized_width":640,"grid_thw":[10,22,40],"tokens_per_group":220,"timestamp_texts":["<0.3 seconds>","<1.3 seconds>",`) ||
		!strings.Contains(s, `"replacement_token_ids":[27,15,13,18,6486,29,151652,151656,`) {
		t.Errorf("video output %.400s", s)
	}
	out, err = runLayout([]string{"--model", testModelDir, "--contract", path, "--image", "--width", "1920", "--height", "1080"})
	if err != nil {
		t.Fatal(err)
	}
	if s := jsonOut(t, out); s != `{"resized_height":1088,"resized_width":1920,"grid_thw":[1,68,120],"tokens":2040}`+"\n" {
		t.Errorf("image output %s", s)
	}
	for _, args := range [][]string{
		{"--model", testModelDir, "--contract", path, "--total-frames", "1", "--source-fps", "30", "--width", "640", "--height", "360"},
		{"--model", testModelDir, "--contract", path, "--width", "640", "--height", "360"},
		{"--model", testModelDir, "--contract", path, "--image", "--total-frames", "3", "--width", "640", "--height", "360"},
		{"--model", testModelDir, "--contract", filepath.Join(t.TempDir(), "none.json"), "--image", "--width", "64", "--height", "64"},
		{"--model", t.TempDir(), "--contract", path, "--image", "--width", "64", "--height", "64"},
		{"--bogus"},
	} {
		if _, err := runLayout(args); err == nil {
			t.Errorf("%v: no error", args)
		}
	}

	// Every golden case through the same contract parsing and output code, with one tokenizer.
	tok, err := tokenizer.Load(filepath.Join(testModelDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := layout.LoadModel(testModelDir)
	if err != nil {
		t.Fatal(err)
	}
	matched := 0
	for _, g := range lines {
		c, err := layout.ParseContract([]byte(contractDoc(g.Inputs)))
		if err != nil {
			t.Fatalf("%s: %v", g.ID, err)
		}
		a, err := layout.NewQwen3VL(c, m, tok)
		if err != nil {
			t.Fatalf("%s: %v", g.ID, err)
		}
		var in layout.VideoInput
		_ = json.Unmarshal(g.Inputs["total_frames"], &in.TotalFrames)
		_ = json.Unmarshal(g.Inputs["source_fps"], &in.SourceFPS)
		_ = json.Unmarshal(g.Inputs["width"], &in.Width)
		_ = json.Unmarshal(g.Inputs["height"], &in.Height)
		got, err := videoLayout(a, in)
		if g.Out.Error != "" {
			if err == nil || !strings.Contains(err.Error(), g.Out.Error) {
				t.Errorf("%s: err %v, want %q", g.ID, err, g.Out.Error)
				continue
			}
			matched++
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", g.ID, err)
			continue
		}
		want := videoLayoutOutput{Indices: g.Out.Indices, ResizedHeight: g.Out.ResizedHeight, ResizedWidth: g.Out.ResizedWidth,
			GridTHW: g.Out.GridTHW, TokensPerGroup: g.Out.TokensPerGroup, TimestampTexts: g.Out.TimestampTexts}
		var wantRepl []uint32
		for _, text := range g.Out.TimestampTexts {
			wantRepl = append(wantRepl, tok.Encode(text)...)
			wantRepl = append(wantRepl, 151652)
			for range g.Out.TokensPerGroup {
				wantRepl = append(wantRepl, 151656)
			}
			wantRepl = append(wantRepl, 151653)
		}
		want.ReplacementTokenIDs = wantRepl
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: output differs", g.ID)
			continue
		}
		matched++
	}
	t.Logf("kvroute layout: %d/%d layout.jsonl cases match", matched, len(lines))
}

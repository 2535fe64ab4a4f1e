package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// checkNemotronCommand runs `kvroute layout --adapter nemotron_omni --input FILE [extra]` on every
// record of a golden file and compares the printed object with the record's outputs, key by key.
func checkNemotronCommand(t *testing.T, file string, keys []string, extra ...string) {
	t.Helper()
	dir := t.TempDir()
	matched, total := 0, 0
	goldens.EachLine(t, "../../testdata/golden/nemotron/"+file, func(line []byte) {
		total++
		var rec struct {
			ID      string                     `json:"id"`
			Outputs map[string]json.RawMessage `json:"outputs"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "record.json")
		if err := os.WriteFile(path, line, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := runLayout(append([]string{"--adapter", "nemotron_omni", "--input", path}, extra...))
		if e, ok := rec.Outputs["error"]; ok {
			var msg, stage string
			_ = json.Unmarshal(e, &msg)
			_ = json.Unmarshal(rec.Outputs["error_stage"], &stage)
			if err == nil || err.Error() != "layout "+stage+": "+msg {
				t.Errorf("%s: error %v, want %s: %s", rec.ID, err, stage, msg)
				return
			}
			matched++
			return
		}
		if err != nil {
			t.Errorf("%s: %v", rec.ID, err)
			return
		}
		s := jsonOut(t, out)
		if got := topKeys(t, s); !slices.Equal(got, keys) {
			t.Fatalf("%s: keys %v, want %v", rec.ID, got, keys)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(s), &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{}
		for _, k := range keys {
			var v any
			if err := json.Unmarshal(rec.Outputs[k], &v); err != nil {
				t.Fatalf("%s: outputs.%s: %v", rec.ID, k, err)
			}
			if k == "images" { // keep only the printed fields of each image
				for _, im := range v.([]any) {
					m := im.(map[string]any)
					for f := range m {
						if f != "patch_grid_wh" && f != "num_tokens" && f != "replacement" {
							delete(m, f)
						}
					}
				}
			}
			want[k] = v
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: output %.300s differs from the golden outputs", rec.ID, s)
			return
		}
		matched++
	})
	t.Logf("kvroute layout --adapter nemotron_omni %v: %d/%d %s records match", extra, matched, total, file)
	if matched != total || total == 0 {
		t.Errorf("%d/%d records match", matched, total)
	}
}

func TestLayoutCommandNemotronVideo(t *testing.T) {
	checkNemotronCommand(t, "layout.jsonl", []string{"frames_indices", "timestamp_texts", "placeholder_counts",
		"separators", "total_placeholder_tokens", "replacement"})
}

func TestLayoutCommandNemotronImage(t *testing.T) {
	checkNemotronCommand(t, "image_layout.jsonl", []string{"images", "total_placeholder_tokens"}, "--image")
}

func TestLayoutCommandNemotronArgs(t *testing.T) {
	dir := t.TempDir()
	bare := filepath.Join(dir, "inputs.json")
	doc := `{"sampler":"vllm_uniform","total_frames":3,"source_fps":30.0,"width":512,"height":512,"num_frames":32,"fps":-1,
 "max_duration":null,"video_pruning_rate":0.5,"config":{"force_image_size":512,"patch_size":16,"downsample_ratio":0.5,
 "video_temporal_patch_size":2,"video_target_num_patches":1024,"video_target_img_size":null,"video_maintain_aspect_ratio":true}}`
	if err := os.WriteFile(bare, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runLayout([]string{"--adapter", "nemotron_omni", "--input", bare})
	if err != nil {
		t.Fatal(err)
	}
	// Dynamo's own test value: 3 frames of 512² at 30 fps with EVS 0.5 keep 256 <image> tokens.
	want := `{"frames_indices":[0,1,2],"timestamp_texts":["0.00","0.03","0.07"],"placeholder_counts":[256,0],` +
		`"separators":["Frame 1 sampled at 0.00 seconds and frame 2 sampled at 0.03 seconds: ","\nFrame 3 sampled at 0.07 seconds: "],` +
		`"total_placeholder_tokens":256,"replacement":[{"text":"Frame 1 sampled at 0.00 seconds and frame 2 sampled at 0.03 seconds: "},` +
		`{"text":"<img>","special":true},{"placeholder":"<image>","count":256},{"text":"</img>","special":true},` +
		`{"text":"\nFrame 3 sampled at 0.07 seconds: "},{"text":"<img>","special":true},{"placeholder":"<image>","count":0},` +
		`{"text":"</img>","special":true}]}` + "\n"
	if s := jsonOut(t, out); s != want {
		t.Errorf("output\n%s\nwant\n%s", s, want)
	}
	for _, args := range [][]string{
		{"--adapter", "nemotron_omni"},
		{"--adapter", "nemotron_omni", "--input", filepath.Join(dir, "none.json")},
		{"--adapter", "nemotron_omni", "--input", bare, "--width", "64"},
		{"--adapter", "bogus", "--input", bare},
		{"--input", bare},
	} {
		if _, err := runLayout(args); err == nil {
			t.Errorf("%v: no error", args)
		} else if strings.Contains(err.Error(), "panic") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

func TestEventsPadIDsNemotron(t *testing.T) {
	img, vid, err := padIDs("../../testdata/nemotron-test-model/config.json")
	if err != nil || img != 18 || vid != 18 {
		t.Errorf("pad ids %d %d, %v; want the shared <image> id 18", img, vid, err)
	}
}

// TestLayoutCommandNemotronContract runs the contract form on the Nemotron test model: Dynamo's
// 3-frame 512² example with EVS 0.5 gives 256 <image> ids in the first tubelet and none in the
// second, each separator tokenized alone.
func TestLayoutCommandNemotronContract(t *testing.T) {
	dir := "../../testdata/nemotron-test-model"
	path := filepath.Join(t.TempDir(), "contract.json")
	doc := strings.Replace(layout.NemotronContractJSON, `"video_pruning_rate": 0.0`, `"video_pruning_rate": 0.5`, 1)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runLayout([]string{"--model", dir, "--contract", path, "--total-frames", "3", "--source-fps", "30", "--width", "512", "--height", "512"})
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*nemotronContractOutput)
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want []uint32
	want = append(want, tok.Encode("Frame 1 sampled at 0.00 seconds and frame 2 sampled at 0.03 seconds: ")...)
	want = append(want, 19)
	for range 256 {
		want = append(want, 18)
	}
	want = append(want, 20)
	want = append(want, tok.Encode("\nFrame 3 sampled at 0.07 seconds: ")...)
	want = append(want, 19, 20)
	if !slices.Equal(got.ReplacementTokenIDs, want) || !slices.Equal(got.PlaceholderCounts, []int{256, 0}) || got.TotalPlaceholderTokens != 256 {
		t.Errorf("output %+v\nwant ids %v", got, want)
	}
	if _, err := runLayout([]string{"--model", dir, "--contract", path, "--image", "--width", "64", "--height", "64"}); err == nil ||
		!strings.Contains(err.Error(), "--adapter nemotron_omni --input FILE --image") {
		t.Errorf("--image with a nemotron contract: %v", err)
	}
	// The Qwen model folder does not fit a nemotron contract.
	if _, err := runLayout([]string{"--model", testModelDir, "--contract", path, "--total-frames", "3", "--source-fps", "30", "--width", "512", "--height", "512"}); err == nil {
		t.Error("nemotron contract on the Qwen model folder: no error")
	}
}

// TestIdentityNemotronContract: --contract with a nemotron_omni contract samples as vLLM's opencv
// loader (32 frames of 300: numpy.linspace(0, 299, 32) truncated), the identity of those indices.
func TestIdentityNemotronContract(t *testing.T) {
	path := filepath.Join(t.TempDir(), "contract.json")
	if err := os.WriteFile(path, []byte(layout.NemotronContractJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	clip := clipDir + "vp9_640x360_30fps_10s.webm"
	out, err := runIdentity([]string{clip, "--contract", path})
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*identityOutput)
	idx := make([]string, 32)
	step := 299.0 / 31.0
	for i := range idx {
		idx[i] = strconv.Itoa(int(float64(i) * step))
	}
	idx[31] = "299"
	ref, err := runIdentity([]string{clip, "--indices", strings.Join(idx, ",")})
	if err != nil {
		t.Fatal(err)
	}
	if got.Identity != ref.(*identityOutput).Identity || len(got.FramesIndices) != 32 {
		t.Errorf("identity %s with %d frames, want %s (indices %s)", got.Identity, len(got.FramesIndices), ref.(*identityOutput).Identity, strings.Join(idx, ","))
	}
}

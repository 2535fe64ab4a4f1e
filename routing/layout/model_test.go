package layout_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/routing/layout"
)

const modelDir = goldenDir + "qwen3vl-test-model"

func TestReadTokenIDs(t *testing.T) {
	ids, err := layout.ReadTokenIDs(modelDir + "/config.json")
	if err != nil {
		t.Fatal(err)
	}
	if ids != testIDs {
		t.Errorf("ids %+v, want %+v", ids, testIDs)
	}
	if err := mustParse(t, exampleContract).Validate(); err != nil {
		t.Fatal(err)
	}
	if c := mustParse(t, exampleContract); c.TokenIDs != ids {
		t.Errorf("the example contract's token_ids %+v differ from config.json %+v", c.TokenIDs, ids)
	}
	if _, err := layout.ReadTokenIDs(filepath.Join(t.TempDir(), "config.json")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestLoadModel(t *testing.T) {
	m, err := layout.LoadModel(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	want := layout.Model{ModelType: "qwen3_vl", Architecture: "Qwen3VLForConditionalGeneration", TokenIDs: testIDs,
		PatchSize: 16, MergeSize: 2, TemporalPatchSize: 2,
		Video: layout.ImageResize{MinPixels: 4096, MaxPixels: 25165824},
		Image: layout.ImageResize{MinPixels: 65536, MaxPixels: 16777216}}
	if *m != want {
		t.Errorf("model %+v, want %+v", *m, want)
	}
	c := mustParse(t, exampleContract)
	if err := m.CheckContract(c); err != nil {
		t.Errorf("CheckContract(example): %v", err)
	}
	c.Resize.PatchSize = 14
	if err := m.CheckContract(c); !errors.Is(err, layout.ErrInvalidContract) {
		t.Errorf("CheckContract(patch 14): %v", err)
	}
	c = mustParse(t, exampleContract)
	c.TokenIDs.VisionEnd++
	if err := m.CheckContract(c); !errors.Is(err, layout.ErrInvalidContract) {
		t.Errorf("CheckContract(token ids): %v", err)
	}
}

// editedModel copies the test model's config files to a temporary folder with one file's JSON
// object edited.
func editedModel(t *testing.T, file string, edit func(map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"config.json", "preprocessor_config.json", "video_preprocessor_config.json"} {
		b, err := os.ReadFile(filepath.Join(modelDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == file {
			var v map[string]any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			edit(v)
			if b, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadModelRejects(t *testing.T) {
	const (
		cfg   = "config.json"
		video = "video_preprocessor_config.json"
		image = "preprocessor_config.json"
	)
	cases := []struct {
		name, file, msg string
		edit            func(map[string]any)
	}{
		{"model type", cfg, "model_type", func(v map[string]any) { v["model_type"] = "qwen2_vl" }},
		{"architecture", cfg, "architectures", func(v map[string]any) { v["architectures"] = []string{"Qwen3VLMoeForConditionalGeneration"} }},
		{"no video token", cfg, "video_token_id", func(v map[string]any) { delete(v, "video_token_id") }},
		{"vision config", cfg, "vision_config", func(v map[string]any) { delete(v, "vision_config") }},
		{"video processor type", video, "video_processor_type", func(v map[string]any) { v["video_processor_type"] = "Qwen2VLVideoProcessor" }},
		{"cap pixels per frame", video, "cap_pixels_per_frame", func(v map[string]any) { v["cap_pixels_per_frame"] = true }},
		{"do_resize", video, "do_resize", func(v map[string]any) { v["do_resize"] = false }},
		{"video patch size", video, "patch", func(v map[string]any) { v["patch_size"] = 14 }},
		{"video merge size", video, "patch", func(v map[string]any) { v["merge_size"] = 1 }},
		{"video budget", video, "size", func(v map[string]any) { v["size"] = map[string]any{"shortest_edge": 4096, "longest_edge": 100} }},
		{"no size", video, "size", func(v map[string]any) { delete(v, "size") }},
		{"image processor type", image, "image_processor_type", func(v map[string]any) { v["image_processor_type"] = "SiglipImageProcessor" }},
		{"image temporal size", image, "patch", func(v map[string]any) { v["temporal_patch_size"] = 1 }},
		{"image budget", image, "size", func(v map[string]any) { v["size"] = map[string]any{"shortest_edge": 0, "longest_edge": 100} }},
	}
	for _, c := range cases {
		_, err := layout.LoadModel(editedModel(t, c.file, c.edit))
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err %v, want one naming %q", c.name, err, c.msg)
		}
	}
	// cap_pixels_per_frame false or null is accepted.
	for _, v := range []any{false, nil} {
		if _, err := layout.LoadModel(editedModel(t, video, func(m map[string]any) { m["cap_pixels_per_frame"] = v })); err != nil {
			t.Errorf("cap_pixels_per_frame %v: %v", v, err)
		}
	}
	if _, err := layout.LoadModel(t.TempDir()); err == nil {
		t.Error("empty folder: no error")
	}
}

package layout_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

const nemotronModelDir = "../../testdata/nemotron-test-model"

// nemotronContract is the contract of a vLLM worker serving the checkpoint with the default loader
// (opencv, 32 frames) and EVS rate %RATE%.
const nemotronContract = `{"schema": "kvroute.video_contract/v1", "adapter": "nemotron_omni", "engine": "vllm",
 "sampler": {"kind": "vllm_uniform", "fps": null, "min_frames": null, "max_frames": null, "num_frames": 32},
 "frame_count_source": "decoded",
 "token_ids": {"vision_start": 19, "vision_end": 20, "image_pad": 18, "video_pad": 18},
 "video_pruning_rate": %RATE%,
 "nemotron": {"patch_size": 16, "downsample_ratio": 0.5, "force_image_size": 512, "video_temporal_patch_size": 2,
  "video_target_num_patches": 1024, "video_target_img_size": null, "video_maintain_aspect_ratio": true,
  "min_num_patches": 1024, "max_num_patches": 13312}}`

func nemotronDoc(rate string) string { return strings.ReplaceAll(nemotronContract, "%RATE%", rate) }

func parseNemotron(t *testing.T, doc string) *layout.Contract {
	t.Helper()
	c, err := layout.ParseContract([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func nemotronTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.Load(nemotronModelDir + "/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestNemotronContractValidateAndDigest(t *testing.T) {
	c := parseNemotron(t, nemotronDoc("0.0"))
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	canon, err := c.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	// Every field present, the Qwen-only ones null, keys sorted.
	want := `{"adapter":"nemotron_omni","engine":"vllm","frame_count_source":"decoded","image_resize":null,` +
		`"nemotron":{"downsample_ratio":0.5,"force_image_size":512,"max_num_patches":13312,"min_num_patches":1024,"patch_size":16,` +
		`"video_maintain_aspect_ratio":true,"video_target_img_size":null,"video_target_num_patches":1024,"video_temporal_patch_size":2},` +
		`"placeholder_target":null,"resize":null,"sampler":{"fps":null,"kind":"vllm_uniform","max_duration":null,"max_frames":null,` +
		`"min_frames":null,"num_frames":32},"schema":"kvroute.video_contract/v1","sglang_preprocess":null,"timestamp_tokenization":null,` +
		`"token_ids":{"image_pad":18,"video_pad":18,"vision_end":20,"vision_start":19},"video_pruning_rate":0}`
	if string(canon) != want {
		t.Errorf("canonical\n%s\nwant\n%s", canon, want)
	}
	d0, _ := c.Digest()
	// Formatting and explicit nulls do not change the digest; the EVS rate does.
	spaced := strings.Replace(nemotronDoc("0.0"), `"frame_count_source": "decoded",`,
		`"frame_count_source": "decoded", "resize": null, "placeholder_target": null,`, 1)
	if d, _ := parseNemotron(t, spaced).Digest(); d != d0 {
		t.Errorf("explicit nulls changed the digest")
	}
	if d, _ := parseNemotron(t, nemotronDoc("0.5")).Digest(); d == d0 {
		t.Errorf("video_pruning_rate 0.5 has the digest of 0")
	}
	if err := parseNemotron(t, nemotronDoc("0.5")).Validate(); err != nil {
		t.Errorf("EVS 0.5: %v", err)
	}

	bad := map[string]string{
		"pruning 1":        nemotronDoc("1.0"),
		"pruning negative": nemotronDoc("-0.1"),
		"engine sglang":    strings.Replace(nemotronDoc("0"), `"engine": "vllm"`, `"engine": "sglang"`, 1),
		"qwen sampler":     strings.Replace(nemotronDoc("0"), `"kind": "vllm_uniform"`, `"kind": "hf_fps"`, 1),
		"num_frames 0":     strings.Replace(nemotronDoc("0"), `"num_frames": 32`, `"num_frames": 0`, 1),
		"dynamic no max_duration": strings.Replace(nemotronDoc("0"), `"kind": "vllm_uniform", "fps": null`,
			`"kind": "vllm_opencv_dynamic", "fps": 2`, 1),
		"pads differ":   strings.Replace(nemotronDoc("0"), `"video_pad": 18`, `"video_pad": 21`, 1),
		"markers equal": strings.Replace(nemotronDoc("0"), `"vision_end": 20`, `"vision_end": 19`, 1),
		"downsample":    strings.Replace(nemotronDoc("0"), `"downsample_ratio": 0.5`, `"downsample_ratio": 0.25`, 1),
		"both targets":  strings.Replace(nemotronDoc("0"), `"video_target_img_size": null`, `"video_target_img_size": 512`, 1),
		"temporal 0":    strings.Replace(nemotronDoc("0"), `"video_temporal_patch_size": 2`, `"video_temporal_patch_size": 0`, 1),
	}
	for name, doc := range bad {
		c, err := layout.ParseContract([]byte(doc))
		if err == nil {
			err = c.Validate()
		}
		if !errors.Is(err, layout.ErrInvalidContract) {
			t.Errorf("%s: error %v, want ErrInvalidContract", name, err)
		}
	}
	parseBad := map[string]string{
		"resize set": strings.Replace(nemotronDoc("0"), `"frame_count_source": "decoded",`,
			`"frame_count_source": "decoded", "resize": {"mode": "round_ties_even", "min_pixels": 1, "max_pixels": 2, "patch_size": 16, "merge_size": 2, "temporal_patch_size": 2},`, 1),
		"no nemotron": nemotronDoc("0")[:strings.Index(nemotronDoc("0"), `,
 "nemotron"`)] + "}",
		"unknown field":    strings.Replace(nemotronDoc("0"), `"patch_size": 16,`, `"patch_size": 16, "tile": 1,`, 1),
		"aspect not bool":  strings.Replace(nemotronDoc("0"), `"video_maintain_aspect_ratio": true`, `"video_maintain_aspect_ratio": 1`, 1),
		"nemotron on qwen": strings.Replace(layout.HubContractJSON, `"sglang_preprocess": null}`, `"sglang_preprocess": null, "nemotron": {}}`, 1),
	}
	for name, doc := range parseBad {
		if _, err := layout.ParseContract([]byte(doc)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// writeConfig writes a copy of the test model folder whose config.json went through edit.
func writeConfig(t *testing.T, edit func(m map[string]any)) string {
	t.Helper()
	b, err := os.ReadFile(nemotronModelDir + "/config.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	dir := t.TempDir()
	out, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), out, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestNemotronModelFolder(t *testing.T) {
	m, err := layout.LoadModel(nemotronModelDir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Nemotron == nil || m.Nemotron.ImgContextTokenID != 18 || m.TokenIDs.ImagePad != 18 || m.TokenIDs.VideoPad != 18 ||
		*m.Nemotron.Geometry.TargetNumPatches != 1024 || m.Nemotron.Images.MaxNumPatches != 13312 || !m.Nemotron.HasSound {
		t.Fatalf("model %+v / %+v", m, m.Nemotron)
	}
	ids, err := layout.NemotronTokenIDs(m, nemotronTokenizer(t))
	if err != nil || ids != (layout.TokenIDs{VisionStart: 19, VisionEnd: 20, ImagePad: 18, VideoPad: 18}) {
		t.Fatalf("token ids %+v, %v", ids, err)
	}
	// A folder lacking a field the adapter needs is refused with an error naming it.
	vc := func(m map[string]any) map[string]any { return m["vision_config"].(map[string]any) }
	for field, edit := range map[string]func(m map[string]any){
		"patch_size":                  func(m map[string]any) { delete(m, "patch_size") },
		"downsample_ratio":            func(m map[string]any) { delete(m, "downsample_ratio") },
		"force_image_size":            func(m map[string]any) { delete(m, "force_image_size") },
		"img_start_token":             func(m map[string]any) { delete(m, "img_start_token") },
		"img_end_token":               func(m map[string]any) { m["img_end_token"] = "<end>" },
		"img_context_token_id":        func(m map[string]any) { delete(m, "img_context_token_id") },
		"video_context_token":         func(m map[string]any) { delete(m, "video_context_token") },
		"vision_config":               func(m map[string]any) { delete(m, "vision_config") },
		"video_temporal_patch_size":   func(m map[string]any) { delete(vc(m), "video_temporal_patch_size") },
		"video_target_num_patches":    func(m map[string]any) { delete(vc(m), "video_target_num_patches") },
		"video_maintain_aspect_ratio": func(m map[string]any) { delete(vc(m), "video_maintain_aspect_ratio") },
		"min_num_patches":             func(m map[string]any) { delete(vc(m)["args"].(map[string]any), "min_num_patches") },
		"max_num_patches":             func(m map[string]any) { delete(vc(m)["args"].(map[string]any), "max_num_patches") },
	} {
		_, err := layout.LoadModel(writeConfig(t, edit))
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("without %s: error %v", field, err)
		}
	}
	// The tokenizer must give <image> the config's id.
	m2, err := layout.LoadModel(writeConfig(t, func(m map[string]any) { m["img_context_token_id"] = 21 }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := layout.NemotronTokenIDs(m2, nemotronTokenizer(t)); err == nil || !strings.Contains(err.Error(), "img_context_token_id is 21") {
		t.Errorf("id mismatch: %v", err)
	}
	// A contract whose geometry differs from config.json does not fit the model.
	other := strings.Replace(nemotronDoc("0"), `"video_target_num_patches": 1024`, `"video_target_num_patches": 4096`, 1)
	if err := m.CheckContract(parseNemotron(t, other)); !errors.Is(err, layout.ErrInvalidContract) {
		t.Errorf("geometry mismatch: %v", err)
	}
	if err := m.CheckContract(parseNemotron(t, nemotronDoc("0.3"))); err != nil {
		t.Errorf("EVS contract: %v", err)
	}
}

func TestNemotronExpand(t *testing.T) {
	tok := nemotronTokenizer(t)
	m, err := layout.LoadModel(nemotronModelDir)
	if err != nil {
		t.Fatal(err)
	}
	prompt := "<|im_start|>user\n<video>\nDescribe the clip<|im_end|>\n<|im_start|>assistant\n"
	in := layout.VideoInput{TotalFrames: 3, SourceFPS: 30, Width: 512, Height: 512}
	for _, tc := range []struct {
		rate   string
		counts []int
	}{{"0.0", []int{256, 256}}, {"0.5", []int{256, 0}}} {
		a, err := layout.NewNemotronOmni(parseNemotron(t, nemotronDoc(tc.rate)), m, tok)
		if err != nil {
			t.Fatal(err)
		}
		l, err := a.VideoLayout(in)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(l.PlaceholderCounts, tc.counts) {
			t.Fatalf("rate %s: counts %v, want %v", tc.rate, l.PlaceholderCounts, tc.counts)
		}
		ex, err := a.Expand(prompt, []layout.Media{{Kind: blocks.Video, Identity: 0xabc, Nemotron: l}})
		if err != nil {
			t.Fatal(err)
		}
		// The worker-visible tokens: the text before <video>, then per tubelet its separator
		// encoded alone, <img>, the <image> run, </img>; then the text after <video>.
		before := tok.Encode("<|im_start|>user\n")
		var want []uint32
		want = append(want, before...)
		for g, sep := range []string{"Frame 1 sampled at 0.00 seconds and frame 2 sampled at 0.03 seconds: ", "\nFrame 3 sampled at 0.07 seconds: "} {
			want = append(want, tok.Encode(sep)...)
			want = append(want, 19)
			for range tc.counts[g] {
				want = append(want, 18)
			}
			want = append(want, 20)
		}
		end := len(want)
		want = append(want, tok.Encode("\nDescribe the clip<|im_end|>\n<|im_start|>assistant\n")...)
		if !slices.Equal(ex.Tokens, want) {
			t.Errorf("rate %s: tokens differ:\n%v\nwant\n%v", tc.rate, ex.Tokens, want)
		}
		if len(ex.Spans) != 1 || ex.Spans[0] != (blocks.Span{Start: len(before), End: end, Identity: 0xabc, Kind: blocks.Video}) {
			t.Errorf("rate %s: spans %+v, want [%d, %d)", tc.rate, ex.Spans, len(before), end)
		}
		// The span holds exactly the placeholder total of <image> ids and one marker pair per tubelet.
		n18, n19 := 0, 0
		for _, id := range ex.Tokens[ex.Spans[0].Start:ex.Spans[0].End] {
			n18 += b2i(id == 18)
			n19 += b2i(id == 19)
		}
		if n18 != l.TotalPlaceholderTokens() || n19 != 2 {
			t.Errorf("rate %s: %d <image> and %d <img> in the span", tc.rate, n18, n19)
		}
	}

	a, err := layout.NewNemotronOmni(parseNemotron(t, nemotronDoc("0")), m, tok)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := a.VideoLayout(in)
	video := layout.Media{Kind: blocks.Video, Identity: 1, Nemotron: l}
	image := layout.Media{Kind: blocks.Image, Identity: 2, Image: &layout.ImageLayout{Tokens: 4}}
	for name, tc := range map[string]struct {
		prompt string
		media  []layout.Media
		code   reason.Code
	}{
		"two videos":        {"<video>\n<video>\n", []layout.Media{video, video}, reason.MediaMixUnsupported},
		"video and image":   {"<video>\n<image>\n", []layout.Media{video, image}, reason.MediaMixUnsupported},
		"image only":        {"<image>\n", []layout.Media{image}, reason.MediaMixUnsupported},
		"two placeholders":  {"<video>\n<video>\n", []layout.Media{video}, reason.PlaceholderMismatch},
		"no placeholder":    {"Describe", []layout.Media{video}, reason.PlaceholderMismatch},
		"image placeholder": {"<video>\n<image>", []layout.Media{video}, reason.PlaceholderMismatch},
	} {
		_, err := a.Expand(tc.prompt, tc.media)
		if reason.CodeOf(err) != tc.code {
			t.Errorf("%s: error %v, want %s", name, err, tc.code)
		}
	}
	// A contract whose markers the tokenizer does not give is refused.
	wrong := strings.Replace(nemotronDoc("0"), `"vision_start": 19`, `"vision_start": 26`, 1)
	if _, err := layout.NewNemotronOmni(parseNemotron(t, wrong), nil, tok); !errors.Is(err, layout.ErrInvalidContract) {
		t.Errorf("wrong <img> id: %v", err)
	}
	if ad, err := layout.NewAdapter(parseNemotron(t, nemotronDoc("0")), m, tok); err != nil {
		t.Error(err)
	} else if _, ok := ad.(*layout.NemotronOmni); !ok {
		t.Errorf("NewAdapter gave %T", ad)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

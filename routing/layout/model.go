package layout

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// Model is what the layout needs from a model folder: the vision token ids and geometry of
// config.json and the processor budgets of preprocessor_config.json and
// video_preprocessor_config.json, checked as Dynamo's frontend checks them at startup.
type Model struct {
	ModelType         string
	Architecture      string
	TokenIDs          TokenIDs
	PatchSize         int
	MergeSize         int
	TemporalPatchSize int
	// Video is the hub video processor's whole-clip pixel budget (size.shortest_edge/longest_edge).
	Video ImageResize
	// Image is the hub image processor's per-image pixel budget.
	Image ImageResize
	// Nemotron is set for a Nemotron 3 Nano Omni folder (the Qwen fields above are then zero,
	// except TokenIDs.ImagePad and VideoPad, both the <image> id).
	Nemotron *NemotronModel
}

// supportedArch maps each supported config.json model_type to its required architecture. The
// Qwen3.5 family (dense and MoE) has Qwen3-VL's layout, vision config and processors (DESIGN.md
// §4); only its token ids differ (vision_start 248053, vision_end 248054, image_pad 248056,
// video_pad 248057 in the released configs), and they are read from config.json like Qwen3-VL's.
var supportedArch = map[string]string{
	"qwen3_vl":     "Qwen3VLForConditionalGeneration",
	"qwen3_vl_moe": "Qwen3VLMoeForConditionalGeneration",
	"qwen3_5":      "Qwen3_5ForConditionalGeneration",
	"qwen3_5_moe":  "Qwen3_5MoeForConditionalGeneration",
}

// maxConfigBytes bounds a model config file read.
const maxConfigBytes = 4 << 20

func readJSON(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("reading %s: %w", filepath.Base(path), err)
	}
	if st.Size() > maxConfigBytes {
		return fmt.Errorf("reading %s: %d bytes exceeds %d", filepath.Base(path), st.Size(), maxConfigBytes)
	}
	if err := json.NewDecoder(f).Decode(v); err != nil {
		return fmt.Errorf("decoding %s: %w", filepath.Base(path), err)
	}
	return nil
}

type configJSON struct {
	ModelType          string   `json:"model_type"`
	Architectures      []string `json:"architectures"`
	VisionStartTokenID *int64   `json:"vision_start_token_id"`
	VisionEndTokenID   *int64   `json:"vision_end_token_id"`
	ImageTokenID       *int64   `json:"image_token_id"`
	VideoTokenID       *int64   `json:"video_token_id"`
	VisionConfig       *struct {
		PatchSize         int `json:"patch_size"`
		SpatialMergeSize  int `json:"spatial_merge_size"`
		TemporalPatchSize int `json:"temporal_patch_size"`
	} `json:"vision_config"`
}

func tokenIDs(c *configJSON) (TokenIDs, error) {
	var ids TokenIDs
	for _, f := range []struct {
		name string
		v    *int64
		dst  *uint32
	}{
		{"vision_start_token_id", c.VisionStartTokenID, &ids.VisionStart},
		{"vision_end_token_id", c.VisionEndTokenID, &ids.VisionEnd},
		{"image_token_id", c.ImageTokenID, &ids.ImagePad},
		{"video_token_id", c.VideoTokenID, &ids.VideoPad},
	} {
		if f.v == nil {
			return ids, fmt.Errorf("config.json has no %s", f.name)
		}
		if *f.v <= 0 || *f.v > math.MaxUint32 {
			return ids, fmt.Errorf("config.json %s %d out of range", f.name, *f.v)
		}
		*f.dst = uint32(*f.v)
	}
	return ids, nil
}

// ReadTokenIDs reads the vision token ids (vision_start_token_id, vision_end_token_id,
// image_token_id, video_token_id) of a model's config.json.
func ReadTokenIDs(configJSONPath string) (TokenIDs, error) {
	var c configJSON
	if err := readJSON(configJSONPath, &c); err != nil {
		return TokenIDs{}, fmt.Errorf("reading token ids: %w", err)
	}
	ids, err := tokenIDs(&c)
	if err != nil {
		return TokenIDs{}, fmt.Errorf("reading token ids: %w", err)
	}
	return ids, nil
}

type sizeJSON struct {
	ShortestEdge int64 `json:"shortest_edge"`
	LongestEdge  int64 `json:"longest_edge"`
}

type processorJSON struct {
	ImageProcessorType *string   `json:"image_processor_type"`
	VideoProcessorType *string   `json:"video_processor_type"`
	DoResize           *bool     `json:"do_resize"`
	CapPixelsPerFrame  any       `json:"cap_pixels_per_frame"`
	PatchSize          int       `json:"patch_size"`
	TemporalPatchSize  int       `json:"temporal_patch_size"`
	MergeSize          int       `json:"merge_size"`
	Size               *sizeJSON `json:"size"`
}

// LoadModel reads and checks config.json, video_preprocessor_config.json and
// preprocessor_config.json of a model folder, failing closed like Dynamo's frontend
// (mm_routing/qwen3.rs): a supported model_type with its architecture; vision_config sizes > 0;
// video_processor_type Qwen3VLVideoProcessor and image_processor_type Qwen2VLImageProcessor(Fast);
// do_resize absent or true; cap_pixels_per_frame absent, null or false; patch, temporal patch and
// merge sizes equal to config.json's; 0 < shortest_edge <= longest_edge pixel budgets.
//
// A Nemotron 3 Nano Omni folder (IsNemotronConfig) is loaded by LoadNemotronModel instead.
func LoadModel(dir string) (*Model, error) {
	var c configJSON
	if err := readJSON(filepath.Join(dir, "config.json"), &c); err != nil {
		return nil, fmt.Errorf("loading model: %w", err)
	}
	if isNemotron(c.ModelType, c.Architectures) {
		return LoadNemotronModel(dir)
	}
	arch, ok := supportedArch[c.ModelType]
	if !ok {
		return nil, fmt.Errorf("loading model: model_type %q is not supported", c.ModelType)
	}
	if len(c.Architectures) != 1 || c.Architectures[0] != arch {
		return nil, fmt.Errorf("loading model: architectures %v are not [%s]", c.Architectures, arch)
	}
	ids, err := tokenIDs(&c)
	if err != nil {
		return nil, fmt.Errorf("loading model: %w", err)
	}
	vc := c.VisionConfig
	if vc == nil || vc.PatchSize <= 0 || vc.SpatialMergeSize <= 0 || vc.TemporalPatchSize <= 0 {
		return nil, fmt.Errorf("loading model: config.json vision_config needs positive patch_size, spatial_merge_size and temporal_patch_size")
	}
	m := &Model{
		ModelType: c.ModelType, Architecture: arch, TokenIDs: ids,
		PatchSize: vc.PatchSize, MergeSize: vc.SpatialMergeSize, TemporalPatchSize: vc.TemporalPatchSize,
	}
	check := func(file, typeField string, want ...string) (ImageResize, error) {
		var p processorJSON
		if err := readJSON(filepath.Join(dir, file), &p); err != nil {
			return ImageResize{}, err
		}
		typ := p.ImageProcessorType
		if typeField == "video_processor_type" {
			typ = p.VideoProcessorType
		}
		okType := false
		for _, w := range want {
			okType = okType || (typ != nil && *typ == w)
		}
		if !okType {
			return ImageResize{}, fmt.Errorf("%s %s is not one of %v", file, typeField, want)
		}
		if p.DoResize != nil && !*p.DoResize {
			return ImageResize{}, fmt.Errorf("%s do_resize is false", file)
		}
		if p.CapPixelsPerFrame != nil && p.CapPixelsPerFrame != false {
			return ImageResize{}, fmt.Errorf("%s cap_pixels_per_frame %v is not supported", file, p.CapPixelsPerFrame)
		}
		if p.PatchSize != m.PatchSize || p.TemporalPatchSize != m.TemporalPatchSize || p.MergeSize != m.MergeSize {
			return ImageResize{}, fmt.Errorf("%s patch/temporal/merge sizes %d/%d/%d differ from config.json's %d/%d/%d", file,
				p.PatchSize, p.TemporalPatchSize, p.MergeSize, m.PatchSize, m.TemporalPatchSize, m.MergeSize)
		}
		if p.Size == nil {
			return ImageResize{}, fmt.Errorf("%s has no size", file)
		}
		if err := checkBudget(file+" size", p.Size.ShortestEdge, p.Size.LongestEdge); err != nil {
			return ImageResize{}, err
		}
		return ImageResize{MinPixels: p.Size.ShortestEdge, MaxPixels: p.Size.LongestEdge}, nil
	}
	if m.Video, err = check("video_preprocessor_config.json", "video_processor_type", "Qwen3VLVideoProcessor"); err != nil {
		return nil, fmt.Errorf("loading model: %w", err)
	}
	if m.Image, err = check("preprocessor_config.json", "image_processor_type",
		"Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast"); err != nil {
		return nil, fmt.Errorf("loading model: %w", err)
	}
	return m, nil
}

// CheckContract reports whether a contract fits this model: its geometry (patch, merge and
// temporal patch sizes) and token ids must equal the model's. The error wraps ErrInvalidContract.
func (m *Model) CheckContract(c *Contract) error {
	if m.Nemotron != nil || c.Adapter == AdapterNemotronOmni {
		return m.checkNemotronContract(c)
	}
	r := c.Resize
	if r.PatchSize != m.PatchSize || r.MergeSize != m.MergeSize || r.TemporalPatchSize != m.TemporalPatchSize {
		return fmt.Errorf("%w: resize patch/merge/temporal sizes %d/%d/%d differ from the model's %d/%d/%d",
			ErrInvalidContract, r.PatchSize, r.MergeSize, r.TemporalPatchSize, m.PatchSize, m.MergeSize, m.TemporalPatchSize)
	}
	if c.TokenIDs != m.TokenIDs {
		return fmt.Errorf("%w: token_ids %+v differ from the model's config.json %+v", ErrInvalidContract, c.TokenIDs, m.TokenIDs)
	}
	return nil
}

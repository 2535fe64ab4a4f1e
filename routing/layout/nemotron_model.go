package layout

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
)

// NemotronArchitecture is the config.json architecture (and model_type) of NVIDIA Nemotron 3 Nano
// Omni, which vLLM serves with its NemotronH_Nano_VL_V2 class.
const NemotronArchitecture = "NemotronH_Nano_Omni_Reasoning_V3"

// NemotronModel is what the Nemotron adapter reads from a model folder's config.json
// (golden/nemotron/README.md §4).
type NemotronModel struct {
	// Geometry and Images hold patch_size, downsample_ratio, force_image_size and the
	// vision_config values.
	Geometry NemotronGeometry
	Images   NemotronImageBudget
	// ImgContextTokenID is img_context_token_id (the <image> id).
	ImgContextTokenID uint32
	// HasSound says config.json has a sound_config (audio parts fall back with audio_present).
	HasSound bool
}

func isNemotron(modelType string, archs []string) bool {
	return modelType == NemotronArchitecture || slices.Contains(archs, NemotronArchitecture)
}

// nemotronConfigJSON is the part of a Nemotron config.json the adapter reads. Pointers tell a
// missing field from a zero one.
type nemotronConfigJSON struct {
	ModelType         string          `json:"model_type"`
	Architectures     []string        `json:"architectures"`
	PatchSize         *int            `json:"patch_size"`
	DownsampleRatio   *float64        `json:"downsample_ratio"`
	ForceImageSize    *int            `json:"force_image_size"`
	ImgStartToken     *string         `json:"img_start_token"`
	ImgEndToken       *string         `json:"img_end_token"`
	ImgContextToken   *string         `json:"img_context_token"`
	ImgContextTokenID *int64          `json:"img_context_token_id"`
	VideoContextToken *string         `json:"video_context_token"`
	SoundConfig       json.RawMessage `json:"sound_config"`
	VisionConfig      *struct {
		VideoTemporalPatchSize   *int  `json:"video_temporal_patch_size"`
		VideoTargetNumPatches    *int  `json:"video_target_num_patches"`
		VideoTargetImgSize       *int  `json:"video_target_img_size"`
		VideoMaintainAspectRatio *bool `json:"video_maintain_aspect_ratio"`
		Args                     *struct {
			MinNumPatches *int `json:"min_num_patches"`
			MaxNumPatches *int `json:"max_num_patches"`
		} `json:"args"`
	} `json:"vision_config"`
}

// IsNemotronConfig reports whether the config.json at path names the Nemotron 3 Nano Omni
// architecture (model_type or architectures).
func IsNemotronConfig(path string) (bool, error) {
	var c nemotronConfigJSON
	if err := readJSON(path, &c); err != nil {
		return false, err
	}
	return isNemotron(c.ModelType, c.Architectures), nil
}

// LoadNemotronModel reads and checks the config.json of a Nemotron 3 Nano Omni folder, refusing a
// folder that lacks a field the adapter needs (golden/nemotron/README.md §4): model_type or
// architectures NemotronH_Nano_Omni_Reasoning_V3; patch_size > 0; downsample_ratio 0.5;
// force_image_size > 0; img_start_token "<img>", img_end_token "</img>", img_context_token
// "<image>", video_context_token "<video>" (vLLM's constants); img_context_token_id > 0;
// vision_config.video_temporal_patch_size > 0, exactly one of video_target_num_patches and
// video_target_img_size, video_maintain_aspect_ratio; vision_config.args.min_num_patches and
// max_num_patches (vLLM takes the dynamic-resolution image path only when min_num_patches is
// there). The error names the missing or wrong field. The <img>/</img> ids come from the
// tokenizer: NemotronTokenIDs.
func LoadNemotronModel(dir string) (*Model, error) {
	var c nemotronConfigJSON
	if err := readJSON(filepath.Join(dir, "config.json"), &c); err != nil {
		return nil, fmt.Errorf("loading model: %w", err)
	}
	nm, err := c.check()
	if err != nil {
		return nil, fmt.Errorf("loading model: config.json of %s: %w", NemotronArchitecture, err)
	}
	return &Model{ModelType: c.ModelType, Architecture: NemotronArchitecture, Nemotron: nm,
		TokenIDs: TokenIDs{ImagePad: nm.ImgContextTokenID, VideoPad: nm.ImgContextTokenID}}, nil
}

func (c *nemotronConfigJSON) check() (*NemotronModel, error) {
	if !isNemotron(c.ModelType, c.Architectures) {
		return nil, fmt.Errorf("model_type %q and architectures %v do not name %s", c.ModelType, c.Architectures, NemotronArchitecture)
	}
	for _, s := range []struct {
		name string
		v    *string
		want string
	}{{"img_start_token", c.ImgStartToken, NemotronImgStart}, {"img_end_token", c.ImgEndToken, NemotronImgEnd},
		{"img_context_token", c.ImgContextToken, NemotronImgContext}, {"video_context_token", c.VideoContextToken, NemotronVideoToken}} {
		if s.v == nil {
			return nil, fmt.Errorf("%s is missing (want %q)", s.name, s.want)
		}
		if *s.v != s.want {
			return nil, fmt.Errorf("%s is %q, not %q (vLLM's constant)", s.name, *s.v, s.want)
		}
	}
	switch {
	case c.PatchSize == nil:
		return nil, fmt.Errorf("patch_size is missing")
	case c.DownsampleRatio == nil:
		return nil, fmt.Errorf("downsample_ratio is missing")
	case c.ForceImageSize == nil:
		return nil, fmt.Errorf("force_image_size is missing")
	case c.ImgContextTokenID == nil:
		return nil, fmt.Errorf("img_context_token_id is missing")
	case *c.ImgContextTokenID <= 0 || *c.ImgContextTokenID > math.MaxUint32:
		return nil, fmt.Errorf("img_context_token_id %d out of range", *c.ImgContextTokenID)
	case c.VisionConfig == nil:
		return nil, fmt.Errorf("vision_config is missing")
	}
	vc := c.VisionConfig
	switch {
	case vc.VideoTemporalPatchSize == nil:
		return nil, fmt.Errorf("vision_config.video_temporal_patch_size is missing")
	case vc.VideoTargetNumPatches == nil && vc.VideoTargetImgSize == nil:
		return nil, fmt.Errorf("vision_config has neither video_target_num_patches nor video_target_img_size")
	case vc.VideoMaintainAspectRatio == nil:
		return nil, fmt.Errorf("vision_config.video_maintain_aspect_ratio is missing")
	case vc.Args == nil || vc.Args.MinNumPatches == nil:
		return nil, fmt.Errorf("vision_config.args.min_num_patches is missing (vLLM would tile images, which kvroute does not model)")
	case vc.Args.MaxNumPatches == nil:
		return nil, fmt.Errorf("vision_config.args.max_num_patches is missing")
	}
	nm := &NemotronModel{
		Geometry: NemotronGeometry{PatchSize: *c.PatchSize, DownsampleRatio: *c.DownsampleRatio, ForceImageSize: *c.ForceImageSize,
			TemporalPatchSize: *vc.VideoTemporalPatchSize, TargetNumPatches: vc.VideoTargetNumPatches,
			TargetImgSize: vc.VideoTargetImgSize, MaintainAspectRatio: *vc.VideoMaintainAspectRatio},
		Images: NemotronImageBudget{PatchSize: *c.PatchSize, DownsampleRatio: *c.DownsampleRatio,
			MinNumPatches: *vc.Args.MinNumPatches, MaxNumPatches: *vc.Args.MaxNumPatches},
		ImgContextTokenID: uint32(*c.ImgContextTokenID),
		HasSound:          len(c.SoundConfig) > 0 && string(c.SoundConfig) != "null",
	}
	if err := nm.Geometry.Validate(); err != nil {
		return nil, err
	}
	if err := nm.Images.Validate(); err != nil {
		return nil, err
	}
	return nm, nil
}

// NemotronTokenIDs resolves a Nemotron model's token ids with its tokenizer, as vLLM does at
// start-up: <img>, </img> and <image> must each encode to exactly one id
// (encode(text, add_special_tokens=False)), <image>'s equal to config.json's img_context_token_id,
// and <video> must encode to at least one id (the prompt placeholder vLLM replaces). The result
// has vision_start = <img>, vision_end = </img>, image_pad = video_pad = <image>, the token_ids a
// nemotron_omni contract must carry.
func NemotronTokenIDs(m *Model, tok Tokenizer) (TokenIDs, error) {
	if m == nil || m.Nemotron == nil {
		return TokenIDs{}, fmt.Errorf("resolving Nemotron token ids: not a %s model", NemotronArchitecture)
	}
	if tok == nil {
		return TokenIDs{}, fmt.Errorf("resolving Nemotron token ids: no tokenizer")
	}
	one := func(text string) (uint32, error) {
		ids := tok.Encode(text)
		if len(ids) != 1 {
			return 0, fmt.Errorf("resolving Nemotron token ids: tokenizer encodes %s as %v, not one id (is it an added token of tokenizer.json?)", text, ids)
		}
		return ids[0], nil
	}
	var ids TokenIDs
	var err error
	if ids.VisionStart, err = one(NemotronImgStart); err != nil {
		return ids, err
	}
	if ids.VisionEnd, err = one(NemotronImgEnd); err != nil {
		return ids, err
	}
	if ids.ImagePad, err = one(NemotronImgContext); err != nil {
		return ids, err
	}
	if ids.ImagePad != m.Nemotron.ImgContextTokenID {
		return ids, fmt.Errorf("resolving Nemotron token ids: tokenizer encodes %s as %d, config.json img_context_token_id is %d",
			NemotronImgContext, ids.ImagePad, m.Nemotron.ImgContextTokenID)
	}
	ids.VideoPad = ids.ImagePad
	if len(tok.Encode(NemotronVideoToken)) == 0 {
		return ids, fmt.Errorf("resolving Nemotron token ids: tokenizer encodes %s as no tokens", NemotronVideoToken)
	}
	return ids, nil
}

// checkNemotronContract reports whether an adapter nemotron_omni contract describes this model:
// its geometry and image budget must equal config.json's (a worker started with hf_overrides
// needs the same overrides in the router's config.json) and its <image> id the model's. The
// error wraps ErrInvalidContract.
func (m *Model) checkNemotronContract(c *Contract) error {
	if m.Nemotron == nil || c.Adapter != AdapterNemotronOmni || c.Nemotron == nil {
		return fmt.Errorf("%w: adapter %q does not fit the model folder (%s)", ErrInvalidContract, c.Adapter, m.Architecture)
	}
	if g, want := c.Nemotron.Geometry(), m.Nemotron.Geometry; !sameGeometry(g, want) {
		return fmt.Errorf("%w: nemotron geometry %s differs from the model's config.json %s", ErrInvalidContract, g, want)
	}
	if b := c.Nemotron.ImageBudget(); b != m.Nemotron.Images {
		return fmt.Errorf("%w: nemotron image patches [%d, %d] differ from the model's config.json [%d, %d]", ErrInvalidContract,
			b.MinNumPatches, b.MaxNumPatches, m.Nemotron.Images.MinNumPatches, m.Nemotron.Images.MaxNumPatches)
	}
	if c.TokenIDs.ImagePad != m.Nemotron.ImgContextTokenID {
		return fmt.Errorf("%w: token_ids.image_pad %d differs from the model's img_context_token_id %d", ErrInvalidContract,
			c.TokenIDs.ImagePad, m.Nemotron.ImgContextTokenID)
	}
	return nil
}

func sameGeometry(a, b NemotronGeometry) bool {
	eq := func(x, y *int) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.PatchSize == b.PatchSize && a.DownsampleRatio == b.DownsampleRatio && a.ForceImageSize == b.ForceImageSize &&
		a.TemporalPatchSize == b.TemporalPatchSize && eq(a.TargetNumPatches, b.TargetNumPatches) &&
		eq(a.TargetImgSize, b.TargetImgSize) && a.MaintainAspectRatio == b.MaintainAspectRatio
}

// String writes the geometry for error messages.
func (g NemotronGeometry) String() string {
	opt := func(p *int) string {
		if p == nil {
			return "null"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("{patch_size %d, downsample_ratio %v, force_image_size %d, video_temporal_patch_size %d, "+
		"video_target_num_patches %s, video_target_img_size %s, video_maintain_aspect_ratio %v}", g.PatchSize, g.DownsampleRatio,
		g.ForceImageSize, g.TemporalPatchSize, opt(g.TargetNumPatches), opt(g.TargetImgSize), g.MaintainAspectRatio)
}

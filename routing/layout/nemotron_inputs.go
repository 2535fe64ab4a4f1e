package layout

// NemotronVideoInputs is the inputs object of a golden/nemotron/layout.jsonl record: one clip's
// frame count, rate and size, the worker's loader setup and the checkpoint geometry. kvroute
// layout --adapter nemotron_omni reads it.
type NemotronVideoInputs struct {
	Sampler          string   `json:"sampler"`
	TotalFrames      int      `json:"total_frames"`
	SourceFPS        float64  `json:"source_fps"`
	Width            int      `json:"width"`
	Height           int      `json:"height"`
	NumFrames        *int     `json:"num_frames"`
	FPS              *float64 `json:"fps"`
	MaxDuration      *float64 `json:"max_duration"`
	VideoPruningRate float64  `json:"video_pruning_rate"`
	Config           struct {
		ForceImageSize           int     `json:"force_image_size"`
		PatchSize                int     `json:"patch_size"`
		DownsampleRatio          float64 `json:"downsample_ratio"`
		VideoTemporalPatchSize   int     `json:"video_temporal_patch_size"`
		VideoTargetNumPatches    *int    `json:"video_target_num_patches"`
		VideoTargetImgSize       *int    `json:"video_target_img_size"`
		VideoMaintainAspectRatio bool    `json:"video_maintain_aspect_ratio"`
	} `json:"config"`
}

// Geometry returns the inputs' checkpoint geometry.
func (in *NemotronVideoInputs) Geometry() NemotronGeometry {
	c := in.Config
	return NemotronGeometry{PatchSize: c.PatchSize, DownsampleRatio: c.DownsampleRatio, ForceImageSize: c.ForceImageSize,
		TemporalPatchSize: c.VideoTemporalPatchSize, TargetNumPatches: c.VideoTargetNumPatches,
		TargetImgSize: c.VideoTargetImgSize, MaintainAspectRatio: c.VideoMaintainAspectRatio}
}

// NemotronSampler returns the inputs' loader setup (null num_frames and fps are unset: -1).
func (in *NemotronVideoInputs) NemotronSampler() NemotronSampler {
	s := NemotronSampler{Kind: in.Sampler, NumFrames: -1, FPS: -1}
	if in.NumFrames != nil {
		s.NumFrames = *in.NumFrames
	}
	if in.FPS != nil {
		s.FPS = *in.FPS
	}
	if in.MaxDuration != nil {
		s.MaxDuration = *in.MaxDuration
	}
	return s
}

// Layout computes the video layout of the inputs (LayoutNemotronVideo).
func (in *NemotronVideoInputs) Layout() (*NemotronVideoLayout, error) {
	return LayoutNemotronVideo(in.Geometry(), in.NemotronSampler(), in.VideoPruningRate,
		VideoInput{TotalFrames: in.TotalFrames, SourceFPS: in.SourceFPS, Width: in.Width, Height: in.Height})
}

// NemotronImageInputs is the inputs object of a golden/nemotron/image_layout.jsonl record.
type NemotronImageInputs struct {
	Images        []ImageSize `json:"images"`
	MaxModelLen   int         `json:"max_model_len"`
	TextPromptLen int         `json:"text_prompt_len"`
	Config        struct {
		PatchSize       int     `json:"patch_size"`
		DownsampleRatio float64 `json:"downsample_ratio"`
		MinNumPatches   int     `json:"min_num_patches"`
		MaxNumPatches   int     `json:"max_num_patches"`
	} `json:"config"`
}

// Layout computes the image layout of the inputs (LayoutNemotronImages).
func (in *NemotronImageInputs) Layout() (*NemotronImagesLayout, error) {
	c := in.Config
	return LayoutNemotronImages(NemotronImageBudget{PatchSize: c.PatchSize, DownsampleRatio: c.DownsampleRatio,
		MinNumPatches: c.MinNumPatches, MaxNumPatches: c.MaxNumPatches}, in.Images, in.MaxModelLen, in.TextPromptLen)
}

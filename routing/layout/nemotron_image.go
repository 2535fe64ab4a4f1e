package layout

import (
	"fmt"
	"math"
)

// NemotronImageBudget is the dynamic-resolution setup of a Nemotron 3 Nano Omni checkpoint
// (config.json patch_size, downsample_ratio, vision_config.args.min_num_patches and
// max_num_patches; MaxNumPatches 0 means unlimited, as in vLLM).
type NemotronImageBudget struct {
	PatchSize       int
	DownsampleRatio float64
	MinNumPatches   int
	MaxNumPatches   int
}

// Validate checks the budget kvroute supports (vLLM asserts a 2×2 pixel shuffle).
func (b NemotronImageBudget) Validate() error {
	switch {
	case b.PatchSize <= 0 || b.PatchSize > 1024:
		return fmt.Errorf("patch_size %d out of range [1, 1024]", b.PatchSize)
	case b.DownsampleRatio != 0.5:
		return fmt.Errorf("downsample_ratio %v is not 0.5", b.DownsampleRatio)
	case b.MinNumPatches <= 0 || b.MinNumPatches > 1<<24:
		return fmt.Errorf("min_num_patches %d out of range [1, %d]", b.MinNumPatches, 1<<24)
	case b.MaxNumPatches != 0 && (b.MaxNumPatches < 0 || b.MaxNumPatches > 1<<24):
		return fmt.Errorf("max_num_patches %d out of range [0, %d]", b.MaxNumPatches, 1<<24)
	}
	return nil
}

// ImageSize is an image's decoded size in pixels.
type ImageSize struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// NemotronBudgetRound is one round of the shared budget: each image's patch budget, the patches
// it got and their sum.
type NemotronBudgetRound struct {
	Budgets      []int
	Patches      []int
	TotalPatches int
}

// NemotronImage is one image's dynamic-resolution layout.
type NemotronImage struct {
	// ClosestPatchGridWH is [round(W/patch+0.5), round(H/patch+0.5)].
	ClosestPatchGridWH [2]int
	// PatchBudget is the budget of the round that was kept.
	PatchBudget   int
	UpscaledToMin bool
	// PatchGridWH is [tw, th] in patches; the image is resized to tw·patch × th·patch pixels.
	PatchGridWH   [2]int
	ResizedWidth  int
	ResizedHeight int
	NumPatches    int
	// NumTokens is the <image> count: th·tw/4.
	NumTokens int
}

// Segments is the image's replacement: <img>, NumTokens × <image>, </img>.
func (im *NemotronImage) Segments() []Segment {
	return []Segment{{Text: NemotronImgStart, Special: true}, {Placeholder: NemotronImgContext, Count: im.NumTokens},
		{Text: NemotronImgEnd, Special: true}}
}

// NemotronImagesLayout is the layout of every image of one request (they share one budget).
type NemotronImagesLayout struct {
	// NumTokensAvailable is max_model_len - text_prompt_len - 4 (may be negative).
	NumTokensAvailable int
	// TotalPatchBudget is max(4·NumTokensAvailable, min_num_patches·len(images)).
	TotalPatchBudget int
	Iterations       []NemotronBudgetRound
	Images           []NemotronImage
}

// TotalPlaceholderTokens is the number of <image> tokens of all images.
func (l *NemotronImagesLayout) TotalPlaceholderTokens() int {
	n := 0
	for _, im := range l.Images {
		n += im.NumTokens
	}
	return n
}

// Bounds of an image request: an image side (the budget arithmetic stays exact in float64) and
// the number of images.
const (
	maxNemotronImageSide = 1 << 24
	maxNemotronImages    = 1 << 12
	maxBudgetRounds      = 10
)

// LayoutNemotronImages computes the dynamic-resolution layout of a request's images, as vLLM's
// DynamicResolutionImageTiler (transformers_utils/processors/nano_nemotron_vl.py, compute_params
// and process_media; golden/nemotron/README.md §1 image): every image starts with budget
// max(min(total, max_num_patches), min_num_patches); while the patches exceed the total, budgets
// are rescaled (at most 10 rounds). textPromptLen is the token count of the text vLLM's processor
// call sees (README §1). Errors are *StageError: process_media (a side floors to 0 before the
// upscale, Python's ZeroDivisionError), apply_params (a 0-patch side with no upscale: the resize
// fails), compute_params (10 rounds without fitting); the layout so far comes with them.
func LayoutNemotronImages(b NemotronImageBudget, images []ImageSize, maxModelLen, textPromptLen int) (*NemotronImagesLayout, error) {
	l := &NemotronImagesLayout{}
	if err := b.Validate(); err != nil {
		return l, stageErr(StageProcessMedia, err.Error())
	}
	if len(images) == 0 || len(images) > maxNemotronImages {
		return l, stageErr(StageProcessMedia, fmt.Sprintf("image count %d out of range [1, %d]", len(images), maxNemotronImages))
	}
	if maxModelLen <= 0 || maxModelLen > 1<<30 || textPromptLen < 0 || textPromptLen > 1<<30 {
		return l, stageErr(StageProcessMedia, fmt.Sprintf("max_model_len %d or text_prompt_len %d out of range", maxModelLen, textPromptLen))
	}
	for i, im := range images {
		if im.Width <= 0 || im.Height <= 0 || im.Width > maxNemotronImageSide || im.Height > maxNemotronImageSide {
			return l, stageErr(StageProcessMedia, fmt.Sprintf("image %d size %dx%d out of range [1, %d]", i, im.Width, im.Height, maxNemotronImageSide))
		}
	}
	n := len(images)
	l.NumTokensAvailable = maxModelLen - textPromptLen - 4
	total := max(4*l.NumTokensAvailable, b.MinNumPatches*n)
	l.TotalPatchBudget = total
	start := total
	if b.MaxNumPatches > 0 {
		start = min(start, b.MaxNumPatches)
	}
	start = max(start, b.MinNumPatches)
	budgets := make([]int, n)
	for i := range budgets {
		budgets[i] = start
	}
	out := make([]NemotronImage, n)
	for range maxBudgetRounds {
		round := NemotronBudgetRound{Budgets: append([]int(nil), budgets...), Patches: make([]int, n)}
		for i, im := range images {
			var err error
			if out[i], err = nemotronProcessMedia(b, im, budgets[i]); err != nil {
				return l, err
			}
			round.Patches[i] = out[i].NumPatches
			round.TotalPatches += out[i].NumPatches
		}
		l.Iterations = append(l.Iterations, round)
		if round.TotalPatches <= total {
			for i := range out {
				if out[i].PatchGridWH[0] == 0 || out[i].PatchGridWH[1] == 0 {
					return l, stageErr(StageApplyParams, "zero-sized resize target (vLLM's bicubic resize to a 0-pixel side fails; the torch message is not transcribed)")
				}
			}
			l.Images = out
			return l, nil
		}
		scale := float64(total) / float64(round.TotalPatches)
		down := false
		next := make([]int, n)
		for i, p := range round.Patches {
			next[i] = max(b.MinNumPatches, int(float64(p)*scale))
			down = down || next[i] < budgets[i]
		}
		if !down {
			for i := range next {
				next[i] = b.MinNumPatches
			}
		}
		budgets = next
	}
	return l, stageErr(StageComputeParams, "Should be unreachable - `return params` above must be reached")
}

// nemotronProcessMedia is process_media for one image and patch budget: the closest grid
// round(side/patch + 0.5) (ties to even), scaled down by min(sqrt(budget/patches), 1) and floored,
// upscaled to min_num_patches when the budget exceeds it, then height and width made even.
func nemotronProcessMedia(b NemotronImageBudget, im ImageSize, budget int) (NemotronImage, error) {
	p := float64(b.PatchSize)
	cph := int(math.RoundToEven(float64(im.Height)/p + 0.5))
	cpw := int(math.RoundToEven(float64(im.Width)/p + 0.5))
	out := NemotronImage{ClosestPatchGridWH: [2]int{cpw, cph}, PatchBudget: budget}
	factor := min(math.Sqrt(float64(budget)/float64(cph*cpw)), 1.0)
	th := int(math.Floor(factor * float64(cph)))
	tw := int(math.Floor(factor * float64(cpw)))
	if budget > b.MinNumPatches && th*tw < b.MinNumPatches {
		if th*tw == 0 {
			return out, stageErr(StageProcessMedia, "division by zero")
		}
		up := math.Sqrt(float64(b.MinNumPatches) / float64(th*tw))
		th = int(math.Ceil(up * float64(th)))
		tw = int(math.Ceil(up * float64(tw)))
		out.UpscaledToMin = true
	}
	if th%2 != 0 {
		if (th+1)*tw <= budget {
			th++
		} else {
			th = max(2, th-1)
		}
	}
	if tw%2 != 0 {
		if th*(tw+1) <= budget {
			tw++
		} else {
			tw = max(2, tw-1)
		}
	}
	out.PatchGridWH = [2]int{tw, th}
	out.ResizedWidth, out.ResizedHeight = tw*b.PatchSize, th*b.PatchSize
	out.NumPatches = tw * th
	out.NumTokens = tw * th / 4
	return out, nil
}

package layout_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/layout"
)

// exampleContract is the contract of DESIGN.md §2.3.
const exampleContract = layout.HubContractJSON

// exampleCanonical is the RFC 8785 form of exampleContract, written out by hand from the JCS rules.
const exampleCanonical = `{"adapter":"qwen3_vl","engine":"vllm","frame_count_source":"decoded",` +
	`"image_resize":{"max_pixels":16777216,"min_pixels":65536},"placeholder_target":"bare_video_token",` +
	`"resize":{"max_pixels":25165824,"merge_size":2,"min_pixels":4096,"mode":"round_ties_even","patch_size":16,"temporal_patch_size":2},` +
	`"sampler":{"fps":2,"kind":"hf_fps","max_frames":768,"min_frames":4,"num_frames":null},` +
	`"schema":"kvroute.video_contract/v1","sglang_preprocess":null,"timestamp_tokenization":"spliced",` +
	`"token_ids":{"image_pad":151655,"video_pad":151656,"vision_end":151653,"vision_start":151652},"video_pruning_rate":0}`

// mustParse parses a contract document; an error fails the test or benchmark.
func mustParse(t testing.TB, doc string) *layout.Contract {
	t.Helper()
	c, err := layout.ParseContract([]byte(doc))
	if err != nil {
		t.Fatalf("ParseContract: %v", err)
	}
	return c
}

func digest(t *testing.T, c *layout.Contract) string {
	t.Helper()
	d, err := c.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestContractExampleCanonicalAndDigest(t *testing.T) {
	c := mustParse(t, exampleContract)
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	got, err := c.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != exampleCanonical {
		t.Fatalf("canonical\n got %s\nwant %s", got, exampleCanonical)
	}
	sum := sha256.Sum256([]byte(exampleCanonical))
	if d := digest(t, c); d != hex.EncodeToString(sum[:]) {
		t.Errorf("digest %s, want %s", d, hex.EncodeToString(sum[:]))
	}
	// The generic canonicalizer agrees on the document itself.
	doc, err := layout.CanonicalJSON([]byte(exampleContract))
	if err != nil || string(doc) != exampleCanonical {
		t.Errorf("CanonicalJSON = %s, %v", doc, err)
	}
}

func TestContractDigestInvariants(t *testing.T) {
	want := digest(t, mustParse(t, exampleContract))
	same := map[string]string{
		"integral floats": strings.NewReplacer(`"min_frames": 4,`, `"min_frames": 4.0,`, `"fps": 2.0`, `"fps": 2`,
			`"patch_size": 16`, `"patch_size": 1.6e1`, `"video_pruning_rate": 0.0`, `"video_pruning_rate": 0`).Replace(exampleContract),
		"key order": `{"sglang_preprocess": null, "video_pruning_rate": 0, "token_ids": {"video_pad": 151656, "image_pad": 151655,
			"vision_end": 151653, "vision_start": 151652}, "timestamp_tokenization": "spliced", "placeholder_target": "bare_video_token",
			"image_resize": {"max_pixels": 16777216, "min_pixels": 65536}, "resize": {"temporal_patch_size": 2, "merge_size": 2,
			"patch_size": 16, "max_pixels": 25165824, "min_pixels": 4096, "mode": "round_ties_even"}, "frame_count_source": "decoded",
			"sampler": {"num_frames": null, "max_frames": 768, "min_frames": 4, "fps": 2, "kind": "hf_fps"}, "engine": "vllm",
			"adapter": "qwen3_vl", "schema": "kvroute.video_contract/v1"}`,
		"absent optional fields": strings.NewReplacer(`, "num_frames": null`, ``, `,
 "sglang_preprocess": null`, ``).Replace(exampleContract),
	}
	for name, doc := range same {
		if d := digest(t, mustParse(t, doc)); d != want {
			t.Errorf("%s: digest %s, want %s", name, d, want)
		}
	}
	changed := map[string][2]string{
		"engine":                 {`"engine": "vllm"`, `"engine": "sglang"`},
		"sampler.fps":            {`"fps": 2.0`, `"fps": 2.5`},
		"sampler.min_frames":     {`"min_frames": 4`, `"min_frames": 5`},
		"sampler.max_frames":     {`"max_frames": 768`, `"max_frames": 767`},
		"frame_count_source":     {`"decoded"`, `"container"`},
		"resize.mode":            {`"round_ties_even"`, `"legacy_ceil"`},
		"resize.min_pixels":      {`"min_pixels": 4096`, `"min_pixels": 4097`},
		"resize.max_pixels":      {`"max_pixels": 25165824`, `"max_pixels": 25165825`},
		"image_resize":           {`"image_resize": {"min_pixels": 65536, "max_pixels": 16777216}`, `"image_resize": null`},
		"placeholder_target":     {`"bare_video_token"`, `"vision_wrapped_video_token"`},
		"timestamp_tokenization": {`"spliced"`, `"whole"`},
		"token_ids.video_pad":    {`"video_pad": 151656`, `"video_pad": 151657`},
		"video_pruning_rate":     {`"video_pruning_rate": 0.0`, `"video_pruning_rate": null`},
	}
	for name, r := range changed {
		doc := strings.Replace(exampleContract, r[0], r[1], 1)
		if doc == exampleContract {
			t.Fatalf("%s: replacement did not apply", name)
		}
		if d := digest(t, mustParse(t, doc)); d == want {
			t.Errorf("%s changed but the digest did not", name)
		}
	}
}

func TestContractInvalid(t *testing.T) {
	cases := map[string]struct {
		from, to, msg string
	}{
		"schema":                 {`"kvroute.video_contract/v1"`, `"kvroute.video_contract/v2"`, "schema"},
		"adapter":                {`"qwen3_vl"`, `"nemotron"`, "adapter"},
		"engine":                 {`"vllm"`, `"tgi"`, "engine"},
		"sampler kind":           {`"hf_fps"`, `"every_frame"`, "sampler.kind"},
		"hf_fps with num_frames": {`"num_frames": null`, `"num_frames": 32`, "sampler.num_frames"},
		"hf_fps without fps":     {`"fps": 2.0`, `"fps": null`, "sampler.fps"},
		"uniform with fps":       {`"kind": "hf_fps", "fps": 2.0, "min_frames": 4, "max_frames": 768, "num_frames": null`, `"kind": "uniform_num_frames", "fps": 2.0, "num_frames": 32`, "sampler.fps"},
		"dynamo with num_frames": {`"kind": "hf_fps", "fps": 2.0, "min_frames": 4, "max_frames": 768, "num_frames": null`, `"kind": "dynamo_max_frames", "max_frames": 32, "num_frames": 32`, "sampler.num_frames"},
		"sglang without params":  {`"kind": "hf_fps", "fps": 2.0, "min_frames": 4, "max_frames": 768, "num_frames": null`, `"kind": "sglang"`, "sglang_preprocess"},
		"preprocess with hf_fps": {`"sglang_preprocess": null`, `"sglang_preprocess": {"image_factor": 28, "video_min_pixels": 100352, "video_max_pixels": 602112, "video_total_pixels": 90316800, "frame_factor": 2, "fps": 2.0, "min_frames": 4, "max_frames": 768}`, "sglang_preprocess"},
		"zero fps":               {`"fps": 2.0`, `"fps": 0`, "sampler.fps"},
		"min over max frames":    {`"min_frames": 4`, `"min_frames": 800`, "min_frames"},
		"frame_count_source":     {`"decoded"`, `"guessed"`, "frame_count_source"},
		"resize mode":            {`"round_ties_even"`, `"ceil"`, "resize.mode"},
		"pixel budget":           {`"max_pixels": 25165824`, `"max_pixels": 100`, "resize pixel budget"},
		"patch size":             {`"patch_size": 16`, `"patch_size": 0`, "resize.patch_size"},
		"image budget":           {`"min_pixels": 65536`, `"min_pixels": 0`, "image_resize"},
		"placeholder_target":     {`"bare_video_token"`, `"video_token"`, "placeholder_target"},
		"timestamp_tokenization": {`"spliced"`, `"per_group"`, "timestamp_tokenization"},
		"token ids not distinct": {`"image_pad": 151655`, `"image_pad": 151656`, "token_ids"},
		"zero token id":          {`"vision_start": 151652`, `"vision_start": 0`, "token_ids"},
		"video pruning":          {`"video_pruning_rate": 0.0`, `"video_pruning_rate": 0.5`, "video_pruning_rate"},
	}
	for name, c := range cases {
		doc := strings.Replace(exampleContract, c.from, c.to, 1)
		if doc == exampleContract {
			t.Fatalf("%s: replacement did not apply", name)
		}
		ct, err := layout.ParseContract([]byte(doc))
		if err == nil {
			err = ct.Validate()
		}
		if !errors.Is(err, layout.ErrInvalidContract) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err %v, want ErrInvalidContract naming %q", name, err, c.msg)
		}
	}
	parse := map[string]string{
		"unknown field":      strings.Replace(exampleContract, `"engine": "vllm"`, `"engine": "vllm", "evs": true`, 1),
		"string number":      strings.Replace(exampleContract, `"min_frames": 4`, `"min_frames": "4"`, 1),
		"fractional integer": strings.Replace(exampleContract, `"min_frames": 4`, `"min_frames": 4.5`, 1),
		"missing field":      strings.Replace(exampleContract, `"adapter": "qwen3_vl", `, ``, 1),
		"missing resize": strings.Replace(exampleContract, `"resize": {"mode": "round_ties_even", "min_pixels": 4096, "max_pixels": 25165824,
            "patch_size": 16, "merge_size": 2, "temporal_patch_size": 2},`, ``, 1),
		"negative token id":   strings.Replace(exampleContract, `"video_pad": 151656`, `"video_pad": -1`, 1),
		"trailing data":       exampleContract + ` {}`,
		"not an object":       `[1, 2]`,
		"huge":                `{"schema": "` + strings.Repeat("x", 70000) + `"}`,
		"number out of range": strings.Replace(exampleContract, `"min_frames": 4`, `"min_frames": 1e400`, 1),
	}
	for name, doc := range parse {
		if doc == exampleContract {
			t.Fatalf("%s: replacement did not apply", name)
		}
		if _, err := layout.ParseContract([]byte(doc)); !errors.Is(err, layout.ErrInvalidContract) {
			t.Errorf("%s: err %v, want ErrInvalidContract", name, err)
		}
	}
	var nilContract *layout.Contract
	if err := nilContract.Validate(); !errors.Is(err, layout.ErrInvalidContract) {
		t.Errorf("nil contract: err %v", err)
	}
}

func TestContractSGLangValid(t *testing.T) {
	doc := strings.NewReplacer(
		`"kind": "hf_fps", "fps": 2.0, "min_frames": 4, "max_frames": 768, "num_frames": null`, `"kind": "sglang", "fps": null, "min_frames": null, "max_frames": null, "num_frames": null`,
		`"sglang_preprocess": null`, `"sglang_preprocess": {"image_factor": 28, "video_min_pixels": 100352, "video_max_pixels": 602112, "video_total_pixels": 90316800, "frame_factor": 2, "fps": 2.0, "min_frames": 4, "max_frames": 768}`,
		`"engine": "vllm"`, `"engine": "sglang"`,
	).Replace(exampleContract)
	c := mustParse(t, doc)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.SGLangPreprocess.VideoTotalPixels != 90316800 || c.SGLangPreprocess.FPS != 2 {
		t.Errorf("sglang_preprocess = %+v", *c.SGLangPreprocess)
	}
	// Fields are independent: bare_video_token with legacy_ceil is valid.
	c = mustParse(t, strings.Replace(exampleContract, `"round_ties_even"`, `"legacy_ceil"`, 1))
	if err := c.Validate(); err != nil {
		t.Errorf("bare_video_token with legacy_ceil: %v", err)
	}
}

func TestContractFrameCount(t *testing.T) {
	c := mustParse(t, exampleContract)
	if n, err := c.FrameCount(300, 0); err != nil || n != 300 {
		t.Errorf("decoded: %d, %v", n, err)
	}
	c.FrameCountSource = layout.FrameCountContainer
	if n, err := c.FrameCount(300, 300); err != nil || n != 300 {
		t.Errorf("container equal: %d, %v", n, err)
	}
	for _, container := range []int{301, 0} {
		if _, err := c.FrameCount(300, container); reason.CodeOf(err) != reason.FrameCountMismatch {
			t.Errorf("container %d: err %v, want frame_count_mismatch", container, err)
		}
	}
}

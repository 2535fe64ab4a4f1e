package model_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/model"
)

// qwen35Shift moves Qwen3's added-token ids to Qwen3.5's: <|endoftext|> 151643 → 248044, …,
// <|vision_start|> 151652 → 248053, <|video_pad|> 151656 → 248057 (the released Qwen3.5
// configs' ids keep Qwen3's order and spacing).
const qwen35Shift = 248044 - 151643

// qwen35IDs are the vision token ids of the released Qwen3.5 configs.
var qwen35IDs = layout.TokenIDs{VisionStart: 248053, VisionEnd: 248054, ImagePad: 248056, VideoPad: 248057}

var addedIDRe = regexp.MustCompile(`"id": (\d+)`)

// qwen35Dir builds a Qwen3.5-shaped model folder: the Qwen3-VL test model (processor configs,
// chat template) with config.json's model_type, architecture and vision ids set to Qwen3.5's, and
// the qwen35_pretok tokenizer (Qwen3.5's split pattern; fetched by make deps) with its added
// tokens moved to Qwen3.5's ids. The real Qwen3.5 vocabulary is not public in a registry this
// project reaches; text ids are Qwen3's, which is what the ids below are checked against.
func qwen35Dir(t *testing.T, modelType, arch string) string {
	t.Helper()
	src := goldenDir + "qwen3vl-test-model/"
	tokPath := "../../testdata/tokenizers/qwen35_pretok/tokenizer.json"
	tok, err := os.ReadFile(tokPath)
	if err != nil {
		t.Fatalf("%v: run `make deps` to fetch the tokenizer files", err)
	}
	start := strings.Index(string(tok), `"added_tokens": [`)
	end := strings.Index(string(tok), `"normalizer":`)
	if start < 0 || end < start {
		t.Fatal("tokenizer.json: added_tokens section not found")
	}
	added := addedIDRe.ReplaceAllStringFunc(string(tok[start:end]), func(m string) string {
		id, _ := strconv.Atoi(m[len(`"id": `):])
		return fmt.Sprintf(`"id": %d`, id+qwen35Shift)
	})
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tokenizer.json", string(tok[:start])+added+string(tok[end:]))
	for _, f := range []string{"chat_template.jinja", "tokenizer_config.json", "preprocessor_config.json", "video_preprocessor_config.json"} {
		b, err := os.ReadFile(src + f)
		if err != nil {
			t.Fatal(err)
		}
		write(f, string(b))
	}
	write("config.json", fmt.Sprintf(`{
  "architectures": [%q],
  "model_type": %q,
  "image_token_id": 248056,
  "video_token_id": 248057,
  "vision_start_token_id": 248053,
  "vision_end_token_id": 248054,
  "text_config": {"model_type": "qwen3_5_text", "vocab_size": 248320, "bos_token_id": 248044, "eos_token_id": 248046},
  "vision_config": {"model_type": "qwen3_5", "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2}
}`, arch, modelType))
	return dir
}

// qwen35Contract is the hub contract with Qwen3.5's token ids.
func qwen35Contract(t *testing.T) *layout.Contract {
	t.Helper()
	doc := layout.HubContractJSON
	for old, id := range map[string]uint32{`151652`: qwen35IDs.VisionStart, `151653`: qwen35IDs.VisionEnd, `151655`: qwen35IDs.ImagePad, `151656`: qwen35IDs.VideoPad} {
		if !strings.Contains(doc, old) {
			t.Fatalf("hub contract has no id %s", old)
		}
		doc = strings.ReplaceAll(doc, old, strconv.Itoa(int(id)))
	}
	c, err := layout.ParseContract([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestQwen35Model: Qwen3.5 dense and MoE folders load (model_type qwen3_5 / qwen3_5_moe with
// their architectures), their vision ids come from config.json, a contract with those ids fits
// and one with Qwen3-VL's does not, and a chat request renders and tokenizes with the Qwen3.5
// split and ids.
func TestQwen35Model(t *testing.T) {
	for _, v := range []struct{ modelType, arch string }{
		{"qwen3_5", "Qwen3_5ForConditionalGeneration"},
		{"qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration"},
	} {
		t.Run(v.modelType, func(t *testing.T) {
			dir := qwen35Dir(t, v.modelType, v.arch)
			m, err := model.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !m.Vision || m.TokenIDs != qwen35IDs {
				t.Fatalf("token ids %+v (vision %v), want %+v", m.TokenIDs, m.Vision, qwen35IDs)
			}
			lm, err := layout.LoadModel(dir)
			if err != nil {
				t.Fatal(err)
			}
			if lm.ModelType != v.modelType || lm.Architecture != v.arch || lm.TokenIDs != qwen35IDs {
				t.Fatalf("layout model %s %s %+v", lm.ModelType, lm.Architecture, lm.TokenIDs)
			}
			c := qwen35Contract(t)
			a, err := layout.NewQwen3VL(c, lm, m.Tokenizer)
			if err != nil {
				t.Fatalf("NewQwen3VL with Qwen3.5 ids: %v", err)
			}
			hub, err := layout.ParseContract([]byte(layout.HubContractJSON))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := layout.NewQwen3VL(hub, lm, m.Tokenizer); !errors.Is(err, layout.ErrInvalidContract) {
				t.Errorf("Qwen3-VL ids against a Qwen3.5 config: err = %v, want ErrInvalidContract", err)
			}

			// Chat render and tokenize: the template's special tokens become Qwen3.5's ids, Thai
			// is split by the Qwen3.5 pattern (golden README example ids).
			req, err := chat.ParseRequest([]byte(`{"messages":[{"role":"user","content":[` +
				`{"type":"video_url","video_url":{"url":"https://example.com/clip.mp4"}},` +
				`{"type":"text","text":"สวัสดีครับ"}]}]}`))
			if err != nil {
				t.Fatal(err)
			}
			prompt, ids, err := m.PromptTokens(req)
			if err != nil {
				t.Fatal(err)
			}
			wantPrompt := "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>สวัสดีครับ<|im_end|>\n<|im_start|>assistant\n"
			// The ids of chat_000 in tokens.jsonl with Qwen3.5's special ids, and the Thai text
			// (a segment of its own between added tokens) as the golden README gives it for the
			// Qwen3.5 split (Qwen3's split: 143126, 23271, 125136, 28319, 123886, 83546).
			want := []uint32{248045, 872, 198, 248053, 248057, 248054,
				35648, 124294, 35648, 124311, 125459, 248046, 198, 248045, 77091, 198}
			if prompt != wantPrompt || !slices.Equal(ids, want) {
				t.Errorf("prompt %q\n ids %v\nwant %q\n     %v", prompt, ids, wantPrompt, want)
			}

			// Expansion: the video's pads and brackets carry Qwen3.5's ids.
			l, err := a.VideoLayout(layout.VideoInput{TotalFrames: 60, SourceFPS: 30, Width: 640, Height: 360})
			if err != nil {
				t.Fatal(err)
			}
			exp, err := a.Expand(prompt, []layout.Media{{Kind: blocks.Video, Identity: 1, Video: l}})
			if err != nil {
				t.Fatal(err)
			}
			counts := map[uint32]int{}
			for _, id := range exp.Tokens {
				counts[id]++
				if id >= 151643 && id < 151643+26 {
					t.Fatalf("expanded prompt holds Qwen3 special id %d", id)
				}
			}
			if counts[qwen35IDs.VideoPad] == 0 || counts[qwen35IDs.VisionStart] != counts[qwen35IDs.VisionEnd] {
				t.Errorf("expanded: %d video pads, %d vision_start, %d vision_end", counts[qwen35IDs.VideoPad],
					counts[qwen35IDs.VisionStart], counts[qwen35IDs.VisionEnd])
			}
		})
	}
	t.Run("architecture mismatch", func(t *testing.T) {
		dir := qwen35Dir(t, "qwen3_5", "Qwen3_5MoeForConditionalGeneration")
		if _, err := layout.LoadModel(dir); err == nil || !strings.Contains(err.Error(), "architectures") {
			t.Errorf("qwen3_5 with the MoE architecture: err = %v, want an architectures error", err)
		}
	})
}

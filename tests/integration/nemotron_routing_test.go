package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/kvroute/kvroute/internal/testkit"
	"github.com/kvroute/kvroute/internal/testkit/caddytest"
	"github.com/kvroute/kvroute/routing/layout"
)

const nemotronModelDir = "../../testdata/nemotron-test-model"

// nemotronEVSContract is the Nemotron contract with EVS pruning at rate 0.5.
var nemotronEVSContract = strings.Replace(layout.NemotronContractJSON, `"video_pruning_rate": 0.0`, `"video_pruning_rate": 0.5`, 1)

// nemotronTextPrefixBlocks is the number of complete blocks before the request's <video>
// placeholder in its rendered prompt (the Nemotron test model's template and tokenizer).
func nemotronTextPrefixBlocks(t *testing.T, body []byte) int {
	t.Helper()
	ids := promptIDs(t, nemotronModelDir, body)
	m, _ := testkit.Models(t, nemotronModelDir)
	video := m.Tokenizer.Encode(layout.NemotronVideoToken)
	for i := 0; i+len(video) <= len(ids); i++ {
		if slices.Equal(ids[i:i+len(video)], video) {
			return i / blockSize
		}
	}
	t.Fatal("no <video> placeholder in the prompt")
	return 0
}

// TestNemotronVideoRouting checks exact video routing for Nemotron 3 Nano Omni end to end: Caddy
// with the Nemotron test model folder in front of simulated vLLM workers publishing nemotron_omni
// contracts, with EVS pruning off (model "nemotron") and at rate 0.5 (model "nemotron-evs").
func TestNemotronVideoRouting(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: loads the Nemotron test model and decodes clips with and without EVS through Caddy, ~2 s")
	}
	h := startHarness(t, []simSpec{
		{ID: "nemo-a", Model: "nemotron", Contract: layout.NemotronContractJSON},
		{ID: "nemo-b", Model: "nemotron", Contract: layout.NemotronContractJSON},
		{ID: "evs-a", Model: "nemotron-evs", Contract: nemotronEVSContract},
		{ID: "evs-b", Model: "nemotron-evs", Contract: nemotronEVSContract},
	}, modelFolder(nemotronModelDir))
	a := h.media + "/a/"
	question := textPart("Describe this video.")
	spanTokens := map[string]int{}
	for _, tc := range []struct {
		model       string
		imageTokens int // <image> tokens of the 10 s clip: 16 tubelets of 252, or EVS's max(252, int(4032·0.5))
	}{{"nemotron", 16 * 252}, {"nemotron-evs", 2016}} {
		t.Run(tc.model, func(t *testing.T) {
			body := mediaBody(t, tc.model, videoPart(a+"vp9_640x360_30fps_10s.webm"), question)
			ref := h.explain(t, body)
			// 300 frames at 30 fps, the loader's 32 frames, 640x360 → a 42x24 patch grid.
			if ref.fallback() != "" || len(ref.Media) != 1 || ref.Media[0].Frames != 32 || ref.Media[0].GridTHW != [3]int{16, 24, 42} {
				t.Fatalf("explain: fallback %q detail %q media %+v", ref.fallback(), ref.Detail, ref.Media)
			}
			// The span: per tubelet a separator, <img>, its <image> run, </img>.
			if ref.Media[0].Tokens <= tc.imageTokens+32 || ref.Media[0].Tokens > tc.imageTokens+32+16*40 {
				t.Fatalf("span of %d tokens for %d <image> tokens", ref.Media[0].Tokens, tc.imageTokens)
			}
			spanTokens[tc.model] = ref.Media[0].Tokens

			cold := h.chat(t, body).mustOK(t)
			if cold.fallback != "" || cold.sim.spec.Model != tc.model {
				t.Fatalf("cold: fallback %q worker %s", cold.fallback, cold.worker)
			}
			h.waitEvents(t)
			// Warm repeat: the same worker, every block credited, and the worker's own cache agrees.
			warm := h.chat(t, body).mustOK(t)
			if warm.fallback != "" || warm.worker != cold.worker || warm.overlap != warm.total || warm.total != ref.TotalBlocks ||
				warm.hitBlocks != warm.overlap || warm.cached < (warm.total-1)*blockSize {
				t.Fatalf("warm: worker %s (cold %s), overlap %d of %d (explain %d), simulator hit %d blocks, cached %d of %d, fallback %q",
					warm.worker, cold.worker, warm.overlap, warm.total, ref.TotalBlocks, warm.hitBlocks, warm.cached, warm.promptTokens, warm.fallback)
			}
			t.Logf("%s: %d prompt tokens; cold overlap %d/%d on %s; warm overlap %d/%d, simulator hit %d blocks", tc.model,
				warm.promptTokens, cold.overlap, cold.total, cold.worker, warm.overlap, warm.total, warm.hitBlocks)
			if got := uuidsOf(t, cold.sim.lastBody()); len(got) != 1 || got[0] != ref.Media[0].Identity+strings.Repeat("0", 48) {
				t.Fatalf("forwarded uuids %q, identity %s", got, ref.Media[0].Identity)
			}

			// A different clip with the same text: credited at most the text before <video>.
			other := mediaBody(t, tc.model, videoPart(a+"vp9_333x197_24fps_3s.webm"), question)
			h.textPrefixOnly(t, other, ref.Media[0].Identity, nemotronTextPrefixBlocks(t, other))
			// After the events settle, no layout verification failed: routing stays exact.
			h.waitEvents(t)
			if e := h.explain(t, body); e.fallback() != "" {
				t.Fatalf("after verification: fallback %q %s", e.fallback(), e.Detail)
			}
		})
	}
	if spanTokens["nemotron"]-spanTokens["nemotron-evs"] != 16*252-2016 {
		t.Errorf("EVS shortened the span by %d tokens, want %d", spanTokens["nemotron"]-spanTokens["nemotron-evs"], 16*252-2016)
	}

	t.Run("media the adapter does not route exactly fall back", func(t *testing.T) {
		for name, body := range map[string][]byte{
			"two videos":      mediaBody(t, "nemotron", videoPart(a+"vp9_333x197_24fps_3s.webm"), question, videoPart(a+"vp8_320x240_25fps_4s.webm")),
			"video and image": mediaBody(t, "nemotron", videoPart(a+"vp9_333x197_24fps_3s.webm"), question, imagePart(h.media+"/img1.png")),
		} {
			got := h.chat(t, body)
			if got.fallback != "media_mix_unsupported" || got.sim == nil {
				t.Errorf("%s: fallback %q worker %q status %d", name, got.fallback, got.worker, got.status)
			}
		}
	})
}

// TestNemotronModelFolderRefusedAtStart checks that Caddy does not start with a Nemotron model
// folder lacking a field the adapter needs, and says which.
func TestNemotronModelFolderRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"tokenizer.json", "chat_template.jinja", "config.json"} {
		b, err := os.ReadFile(filepath.Join(nemotronModelDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "config.json" {
			b = []byte(strings.Replace(string(b), `"downsample_ratio": 0.5,`, "", 1))
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h := &harness{modelDir: dir}
	h.setSite(t, caddytest.Port(t), caddytest.Port(t))
	err := caddytest.Load(h.caddyfile(h.httpPort, h.adminPort))
	if err == nil {
		_ = caddy.Stop()
		t.Fatal("caddy started with a model folder lacking downsample_ratio")
	}
	if !strings.Contains(err.Error(), "downsample_ratio is missing") {
		t.Errorf("error %v does not name downsample_ratio", err)
	}
}

package integration

import (
	"math"
	"strings"
	"testing"
)

// TestLastBlockRule is issue 27's fourth fault through Caddy: a prompt of exactly k·16 tokens is
// cached whole by the worker, but vLLM reuses at most num_tokens − 1 tokens, so its repeat hits
// k − 1 blocks (the simulator follows that rule). The router predicts the same k − 1 in the
// overlap header, explain and the hit-ratio metric, for a text prompt and for one with a video.
// The old code predicted k of k.
func TestLastBlockRule(t *testing.T) {
	h := startHarness(t, []simSpec{{ID: "lb-a", Model: "qwen"}})

	// exact finds, among bodies made by mk(0), mk(1), ..., one whose worker prompt is a whole
	// number of blocks (explain's request_tokens), and returns it with its block count.
	exact := func(t *testing.T, mk func(i int) []byte) ([]byte, int) {
		t.Helper()
		for i := range 48 {
			body := mk(i)
			e := h.explain(t, body)
			if e.fallback() != "" {
				t.Fatalf("explain: fallback %q", e.fallback())
			}
			if e.RequestTokens > 0 && e.RequestTokens%blockSize == 0 {
				if e.TotalBlocks != e.RequestTokens/blockSize {
					t.Fatalf("explain: %d tokens in %d blocks", e.RequestTokens, e.TotalBlocks)
				}
				return body, e.TotalBlocks
			}
		}
		e := h.explain(t, mk(0))
		t.Fatalf("no prompt of a whole number of blocks among 48 lengths (the first: %d tokens, %d blocks)", e.RequestTokens, e.TotalBlocks)
		return nil, 0
	}
	check := func(t *testing.T, body []byte, k int) {
		t.Helper()
		cold := h.coldChat(t, body)
		if cold.promptTokens != k*blockSize {
			t.Fatalf("the simulator counted %d prompt tokens, the router %d", cold.promptTokens, k*blockSize)
		}
		sum0, n0 := h.metric(t, "caddy_kvroute_predicted_hit_ratio_sum"), h.metric(t, "caddy_kvroute_predicted_hit_ratio_count")
		warm := h.chat(t, body).mustOK(t)
		if warm.hitBlocks != k-1 {
			t.Fatalf("the simulator hit %d of %d blocks, want %d (vLLM's num_tokens − 1 rule)", warm.hitBlocks, k, k-1)
		}
		if warm.fallback != "" || warm.total != k || warm.overlap != warm.hitBlocks {
			t.Fatalf("warm: predicted %d of %d blocks (fallback %q), the simulator hit %d", warm.overlap, warm.total, warm.fallback, warm.hitBlocks)
		}
		e := h.explain(t, body)
		if len(e.Candidates) != 1 || e.Candidates[0].OverlapBlocks != k-1 {
			t.Fatalf("explain candidates %+v, want overlap %d", e.Candidates, k-1)
		}
		sum1, n1 := h.metric(t, "caddy_kvroute_predicted_hit_ratio_sum"), h.metric(t, "caddy_kvroute_predicted_hit_ratio_count")
		if want := float64(k-1) / float64(k); n1-n0 != 1 || math.Abs(sum1-sum0-want) > 1e-9 {
			t.Fatalf("predicted_hit_ratio observed %v (%v times), want %v once", sum1-sum0, n1-n0, want)
		}
		t.Logf("%d tokens = %d blocks: predicted %d, simulator hit %d", k*blockSize, k, warm.overlap, warm.hitBlocks)
	}

	t.Run("text", func(t *testing.T) {
		body, k := exact(t, func(i int) []byte { return textBody(t, "qwen", longText("Whole blocks.", 150)+strings.Repeat(" a", i)) })
		check(t, body, k)
	})
	t.Run("video", func(t *testing.T) {
		clip := videoPart(h.media + "/a/vp9_640x360_30fps_10s.webm")
		body, k := exact(t, func(i int) []byte {
			return mediaBody(t, "qwen", clip, textPart(longText("Describe it.", 10)+strings.Repeat(" a", i)))
		})
		check(t, body, k)
	})
}

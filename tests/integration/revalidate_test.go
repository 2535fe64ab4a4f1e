package integration

import (
	"testing"
)

// TestVideoRevalidated (issue 14): a repeated clip (served by a file server, so with
// Last-Modified) is read by the router once; the repeats revalidate with a conditional request,
// reuse the identity (counted as decode_cache_total{result="revalidated"}) and route to the
// worker holding the clip's blocks, as the first request's events say.
func TestVideoRevalidated(t *testing.T) {
	h := startHarness(t, []simSpec{{ID: "reval-a", Model: "qwen"}, {ID: "reval-b", Model: "qwen"}})
	body := mediaBody(t, "qwen", videoPart(h.media+"/b/vp9_640x360_30fps_10s.webm"), textPart("What happens here?"))
	r0 := h.metric(t, "caddy_kvroute_decode_cache_total", `result="revalidated"`)
	miss0 := h.metric(t, "caddy_kvroute_decode_cache_total", `result="miss"`)
	cold := h.coldChat(t, body)
	for i := 0; i < 3; i++ {
		warm := h.chat(t, body).mustOK(t)
		if warm.fallback != "" || warm.worker != cold.worker || 10*warm.overlap < 9*warm.total || warm.hitBlocks < warm.overlap-1 {
			t.Fatalf("repeat %d: worker %s (cold %s), overlap %d of %d, simulator hit %d, fallback %q",
				i, warm.worker, cold.worker, warm.overlap, warm.total, warm.hitBlocks, warm.fallback)
		}
	}
	if got := h.metric(t, "caddy_kvroute_decode_cache_total", `result="revalidated"`) - r0; got != 3 {
		t.Errorf("revalidated: %v, want 3 (every repeat)", got)
	}
	if got := h.metric(t, "caddy_kvroute_decode_cache_total", `result="miss"`) - miss0; got > 1 {
		t.Errorf("decode cache misses: %v, want at most the first request's", got)
	}
}

package integration

import (
	"fmt"
	"testing"
)

// hybridBlockSize is the simulated Qwen3.5-style workers' attention block size.
const hybridBlockSize = 1056

// TestHybridRouting runs two hybrid simulators (kvroute-sim -hybrid: a full-attention KV cache group
// of 1056-token blocks beside a Mamba group whose stores are not dense and whose kind-less removals
// name blocks the attention group still holds) next to a plain one (16-token blocks) behind one
// Caddy. Warm text and video repeats go to the holder and are credited exactly its own cache hit;
// extending a cached prompt (the Mamba group then drops its state for the old end) takes nothing
// away from the attention blocks the router credits; every Mamba event is counted as
// non_attention_group and none is indexed; a worker is never credited blocks it lacks.
func TestHybridRouting(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: runs two hybrid simulators with 1056-token blocks beside a plain one, text and video, ~2 s")
	}
	h := startHarness(t, []simSpec{
		{ID: "hyb-a", Model: "qwen-hybrid", BlockSize: hybridBlockSize, Hybrid: true},
		{ID: "hyb-b", Model: "qwen-hybrid", BlockSize: hybridBlockSize, Hybrid: true},
		{ID: "plain-a", Model: "qwen"},
	})
	// exact checks that the router's overlap is the worker's own hit (vLLM recomputes the last
	// prompt token, so a hit never covers it) and that the other hybrid worker is credited nothing.
	exact := func(t *testing.T, what string, body []byte, a answer) {
		t.Helper()
		if a.fallback != "" || a.hitBlocks < 0 {
			t.Fatalf("%s: fallback %q, hit header %d", what, a.fallback, a.hitBlocks)
		}
		bs := h.sims[a.worker].spec.BlockSize
		if bs == 0 {
			bs = blockSize
		}
		if want := min(a.overlap, (a.promptTokens-1)/bs); want != a.hitBlocks || a.total != a.promptTokens/bs {
			t.Fatalf("%s on %s: overlap %d of %d blocks, worker's own hit %d (prompt %d tokens, block %d)",
				what, a.worker, a.overlap, a.total, a.hitBlocks, a.promptTokens, bs)
		}
		e := h.explain(t, body)
		for _, c := range e.Candidates {
			if c.WorkerID != a.worker && c.OverlapBlocks != 0 {
				t.Fatalf("%s: %s credited %d blocks it never stored", what, c.WorkerID, c.OverlapBlocks)
			}
		}
	}
	coldWarm := func(t *testing.T, what string, body []byte) (cold, warm answer) {
		t.Helper()
		cold = h.chat(t, body).mustOK(t)
		if cold.overlap != 0 || cold.hitBlocks != 0 {
			t.Fatalf("%s cold: overlap %d hit %d", what, cold.overlap, cold.hitBlocks)
		}
		h.waitEvents(t)
		warm = h.chat(t, body).mustOK(t)
		if warm.worker != cold.worker || warm.overlap != warm.total || warm.total < 2 {
			t.Fatalf("%s warm: worker %s (cold %s), overlap %d/%d", what, warm.worker, cold.worker, warm.overlap, warm.total)
		}
		exact(t, what+" warm", body, warm)
		t.Logf("%s: %d prompt tokens, %d blocks of %d on %s; warm overlap %d, worker hit %d",
			what, warm.promptTokens, warm.total, hybridBlockSize, warm.worker, warm.overlap, warm.hitBlocks)
		return cold, warm
	}

	text := longText("Summarize the following notes.", 3000)
	textReq := textBody(t, "qwen-hybrid", text)
	var textWorker string
	t.Run("text repeat on a hybrid worker", func(t *testing.T) {
		_, warm := coldWarm(t, "text", textReq)
		textWorker = warm.worker
	})

	t.Run("extending the prompt keeps the attention blocks credited", func(t *testing.T) {
		if textWorker == "" {
			t.Fatal("needs the text subtest")
		}
		longer := textBody(t, "qwen-hybrid", text+" "+longText("And then the appendix.", 1500))
		before := h.sims[textWorker].nonAttention.Load()
		ext := h.chat(t, longer).mustOK(t)
		if ext.worker != textWorker || ext.overlap == 0 {
			t.Fatalf("extension: worker %s (want %s), overlap %d", ext.worker, textWorker, ext.overlap)
		}
		exact(t, "extension", longer, ext)
		h.waitEvents(t)
		if h.sims[textWorker].nonAttention.Load() < before+2 {
			t.Fatalf("the extension published %d Mamba events, want its store and the removal of its old end", h.sims[textWorker].nonAttention.Load()-before)
		}
		// The Mamba group dropped its state for the old end; the attention group kept the blocks.
		again := h.chat(t, textReq).mustOK(t)
		if again.worker != textWorker || again.overlap != again.total {
			t.Fatalf("repeat after extension: worker %s, overlap %d/%d", again.worker, again.overlap, again.total)
		}
		exact(t, "repeat after extension", textReq, again)
		warmLonger := h.chat(t, longer).mustOK(t)
		if warmLonger.overlap != warmLonger.total {
			t.Fatalf("extended prompt repeated: overlap %d/%d", warmLonger.overlap, warmLonger.total)
		}
		exact(t, "extended prompt repeated", longer, warmLonger)
	})

	t.Run("video repeat on a hybrid worker", func(t *testing.T) {
		body := mediaBody(t, "qwen-hybrid", videoPart(h.media+"/a/vp9_640x360_30fps_10s.webm"),
			textPart(longText("Describe this video, then answer the questions.", 1200)))
		coldWarm(t, "video", body)
		// another clip, same words: only blocks before the video could be shared (none at 1056 tokens)
		other := mediaBody(t, "qwen-hybrid", videoPart(h.media+"/a/vp8_320x240_25fps_4s.webm"),
			textPart(longText("Describe this video, then answer the questions.", 1200)))
		if prefix := promptTextPrefixBlocks(t, other) * blockSize / hybridBlockSize; prefix != 0 {
			t.Fatalf("test prompt has %d text blocks before the video", prefix)
		}
		e := h.explain(t, other)
		for _, c := range e.Candidates {
			if c.OverlapBlocks != 0 {
				t.Fatalf("different clip: %s credited %d blocks", c.WorkerID, c.OverlapBlocks)
			}
		}
	})

	t.Run("plain worker beside them", func(t *testing.T) {
		coldWarmPlain := textBody(t, "qwen", longText("A plain worker's notes.", 600))
		cold := h.chat(t, coldWarmPlain).mustOK(t)
		h.waitEvents(t)
		warm := h.chat(t, coldWarmPlain).mustOK(t)
		if cold.worker != "plain-a" || warm.worker != "plain-a" || warm.overlap != warm.total || warm.total != warm.promptTokens/blockSize {
			t.Fatalf("plain: worker %s/%s overlap %d/%d", cold.worker, warm.worker, warm.overlap, warm.total)
		}
		exact(t, "plain warm", coldWarmPlain, warm)
	})

	t.Run("every Mamba event counted as skipped, none indexed", func(t *testing.T) {
		h.waitEvents(t)
		for _, id := range []string{"hyb-a", "hyb-b", "plain-a"} {
			w := h.sims[id]
			lbl := fmt.Sprintf(`worker="%s"`, id)
			got := h.metric(t, "caddy_kvroute_events_total", lbl, `result="non_attention_group"`)
			for _, r := range []string{"non_dense_block_span", "block_size_mismatch", "invalid_event", "unknown_removal"} {
				if n := h.metric(t, "caddy_kvroute_events_total", lbl, fmt.Sprintf(`result=%q`, r)); n != 0 {
					t.Errorf("%s: %s = %v, want 0", id, r, n)
				}
			}
			if got != float64(w.nonAttention.Load()) {
				t.Errorf("%s: non_attention_group = %v, want the %d Mamba events it published", id, got, w.nonAttention.Load())
			}
			if id != "plain-a" && w.count.Load() > 0 && got == 0 {
				t.Errorf("%s served %d requests but no Mamba event was counted", id, w.count.Load())
			}
			t.Logf("%s: %d requests, %v Mamba events skipped as non_attention_group", id, w.count.Load(), got)
		}
	})
}

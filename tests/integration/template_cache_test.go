package integration

import (
	"testing"
)

// TestTemplateCacheConversation sends a conversation growing by turns through Caddy (issue 14):
// the earlier turns' template values come from the template cache and the template engine
// replays their loop iterations (counted on caddy_kvroute_template_cache_* and
// caddy_kvroute_template_replays_total), and the replayed prompt is exact: the worker, which
// renders and tokenizes the prompt itself, finds as many cached blocks as kvroute predicted. A
// reload that keeps the cache size keeps the cache; template_cache_size 0 turns it off.
func TestTemplateCacheConversation(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: sends a conversation growing turn by turn through Caddy, with reloads, ~2.5 s")
	}
	h := startHarness(t, []simSpec{{ID: "tc-a", Model: "qwen"}, {ID: "tc-b", Model: "qwen"}})
	msg := func(role, content string) map[string]any { return map[string]any{"role": role, "content": content} }
	system := msg("system", longText("You answer questions about the template notes.", 200))
	user1 := msg("user", longText("First template question.", 600))
	asst1 := msg("assistant", longText("First template answer.", 300))
	user2 := msg("user", longText("Second template question.", 400))
	counts := func() (hits, misses, replays float64) {
		return h.metric(t, "caddy_kvroute_template_cache_hits_total"), h.metric(t, "caddy_kvroute_template_cache_misses_total"),
			h.metric(t, "caddy_kvroute_template_replays_total")
	}
	h0, m0, r0 := counts()
	first := h.chat(t, mustJSON(t, map[string]any{"model": "qwen", "messages": []any{system, user1}})).mustOK(t)
	if hits, miss, rep := counts(); hits-h0 != 0 || miss-m0 != 2 || rep-r0 != 0 {
		t.Fatalf("first request: %v hits, %v misses, %v replays; want 0, 2, 0", hits-h0, miss-m0, rep-r0)
	}
	h.waitEvents(t)
	second := h.chat(t, mustJSON(t, map[string]any{"model": "qwen", "messages": []any{system, user1, asst1, user2}})).mustOK(t)
	// system and user1 hit (their loop iterations are recorded now: a message's first request
	// records nothing); asst1 and user2 are new
	if hits, miss, rep := counts(); hits-h0 != 2 || miss-m0 != 4 || rep-r0 != 0 {
		t.Fatalf("second request: %v hits, %v misses, %v replays; want 2, 4, 0", hits-h0, miss-m0, rep-r0)
	}
	third := h.chat(t, mustJSON(t, map[string]any{"model": "qwen", "messages": []any{system, user1, asst1, user2}})).mustOK(t)
	// system and user1 replay; asst1 and user2 are recorded
	if hits, miss, rep := counts(); hits-h0 != 6 || miss-m0 != 4 || rep-r0 != 2 {
		t.Fatalf("third request: %v hits, %v misses, %v replays; want 6, 4, 2", hits-h0, miss-m0, rep-r0)
	}
	if third.total != second.total || third.fallback != "" || third.hitBlocks != third.overlap || third.overlap < second.total-1 {
		t.Fatalf("third (replayed): %d blocks (second %d), fallback %q, overlap %d (worker found %d)",
			third.total, second.total, third.fallback, third.overlap, third.hitBlocks)
	}
	if second.worker != first.worker || second.fallback != "" || second.overlap < first.total-1 || second.hitBlocks != second.overlap {
		t.Fatalf("second: worker %s (first %s), fallback %q, overlap %d (worker found %d) of %d; first had %d blocks",
			second.worker, first.worker, second.fallback, second.overlap, second.hitBlocks, second.total, first.total)
	}
	if b := h.metric(t, "caddy_kvroute_template_cache_bytes"); b <= 0 {
		t.Fatalf("template cache charges %v bytes", b)
	}

	// A reload with the same size keeps the cache: the repeated conversation is 4 hits. The
	// reloaded template is a new compile, so its loop records the 4 iterations again (no
	// replay), and the next request replays all 4. The prompt (its block count) is the same.
	h.reload(t, harnessOpts{appOpts: "		max_media 16"})
	body := mustJSON(t, map[string]any{"model": "qwen", "messages": []any{system, user1, asst1, user2}})
	again := h.chat(t, body).mustOK(t)
	if hits, miss, rep := counts(); hits-h0 != 10 || miss-m0 != 4 || rep-r0 != 2 {
		t.Fatalf("after the reload: %v hits, %v misses, %v replays; want 10, 4, 2", hits-h0, miss-m0, rep-r0)
	}
	again2 := h.chat(t, body).mustOK(t)
	if hits, miss, rep := counts(); hits-h0 != 14 || miss-m0 != 4 || rep-r0 != 6 {
		t.Fatalf("repeated after the reload: %v hits, %v misses, %v replays; want 14, 4, 6", hits-h0, miss-m0, rep-r0)
	}
	for _, r := range []answer{again, again2} {
		if r.total != second.total || r.fallback != "" {
			t.Fatalf("after the reload: %d blocks (before %d), fallback %q", r.total, second.total, r.fallback)
		}
	}

	// template_cache_size 0: no lookups, the same prompt.
	h.reload(t, harnessOpts{appOpts: "		template_cache_size 0"})
	h1, m1, r1 := counts()
	off := h.chat(t, mustJSON(t, map[string]any{"model": "qwen", "messages": []any{system, user1, asst1, user2}})).mustOK(t)
	if hits, miss, rep := counts(); hits != h1 || miss != m1 || rep != r1 {
		t.Fatalf("cache off: %v hits, %v misses, %v replays counted", hits-h1, miss-m1, rep-r1)
	}
	if off.total != second.total || off.fallback != "" {
		t.Fatalf("cache off: %d blocks (before %d), fallback %q", off.total, second.total, off.fallback)
	}
}

package integration

import (
	"testing"
)

// TestTokenizeCacheConversation sends a conversation growing by one turn per request through
// Caddy (issue 14): the earlier turns' segments come from the tokenize cache (counted on
// caddy_kvroute_tokenize_cache_*), and the cached ids are exact: the second request reaches the
// worker that cached the first with the first request's blocks as overlap. A config reload that
// changes neither the tokenizer files nor the cache size keeps the cache.
func TestTokenizeCacheConversation(t *testing.T) {
	h := startHarness(t, []simSpec{{ID: "conv-a", Model: "qwen"}, {ID: "conv-b", Model: "qwen"}})
	msg := func(role, content string) map[string]any { return map[string]any{"role": role, "content": content} }
	system := msg("system", longText("You answer questions about the routing notes.", 200))
	user1 := msg("user", longText("First question.", 600))
	asst1 := msg("assistant", longText("First answer.", 300))
	user2 := msg("user", longText("Second question.", 400))

	hits0 := h.metric(t, "caddy_kvroute_tokenize_cache_hits_total")
	miss0 := h.metric(t, "caddy_kvroute_tokenize_cache_misses_total")
	first := h.chat(t, mustJSON(t, map[string]any{"model": "qwen", "messages": []any{system, user1}})).mustOK(t)
	if first.fallback != "" || first.overlap != 0 {
		t.Fatalf("first: fallback %q overlap %d", first.fallback, first.overlap)
	}
	// segments of at least 64 bytes: "system\n…" and "user\n…", both new
	if hits, miss := h.metric(t, "caddy_kvroute_tokenize_cache_hits_total")-hits0, h.metric(t, "caddy_kvroute_tokenize_cache_misses_total")-miss0; hits != 0 || miss != 2 {
		t.Fatalf("first request: %v hits, %v misses; want 0 and 2", hits, miss)
	}
	h.waitEvents(t)
	second := h.chat(t, mustJSON(t, map[string]any{"model": "qwen", "messages": []any{system, user1, asst1, user2}})).mustOK(t)
	// the system and first user turns hit; the assistant turn and the new question are new
	if hits, miss := h.metric(t, "caddy_kvroute_tokenize_cache_hits_total")-hits0, h.metric(t, "caddy_kvroute_tokenize_cache_misses_total")-miss0; hits != 2 || miss != 4 {
		t.Fatalf("after the second request: %v hits, %v misses; want 2 and 4", hits, miss)
	}
	if second.worker != first.worker || second.fallback != "" || second.overlap == 0 || second.overlap < first.total-1 {
		t.Fatalf("second: worker %s (first %s), fallback %q, overlap %d of %d (first request had %d blocks)",
			second.worker, first.worker, second.fallback, second.overlap, second.total, first.total)
	}
	if second.hitBlocks != second.overlap {
		t.Fatalf("second: the worker found %d cached blocks, kvroute predicted %d", second.hitBlocks, second.overlap)
	}
	bytes := h.metric(t, "caddy_kvroute_tokenize_cache_bytes")
	if bytes <= 0 {
		t.Fatalf("tokenize cache holds %v bytes", bytes)
	}

	// A reload that changes no tokenizer file and not the cache size keeps the cache: the same
	// conversation is then four hits (system, both user turns, the assistant turn), no miss.
	h.reload(t, harnessOpts{appOpts: "		max_media 16"})
	if b := h.metric(t, "caddy_kvroute_tokenize_cache_bytes"); b != bytes {
		t.Fatalf("after the reload the tokenize cache holds %v bytes, before %v", b, bytes)
	}
	again := h.chat(t, mustJSON(t, map[string]any{"model": "qwen", "messages": []any{system, user1, asst1, user2}})).mustOK(t)
	if hits, miss := h.metric(t, "caddy_kvroute_tokenize_cache_hits_total")-hits0, h.metric(t, "caddy_kvroute_tokenize_cache_misses_total")-miss0; hits != 6 || miss != 4 {
		t.Fatalf("after the reload: %v hits, %v misses; want 6 and 4 (the repeated conversation all from the kept cache)", hits, miss)
	}
	if again.total != second.total || again.fallback != "" {
		t.Fatalf("after the reload: %d blocks (before %d), fallback %q", again.total, second.total, again.fallback)
	}
}

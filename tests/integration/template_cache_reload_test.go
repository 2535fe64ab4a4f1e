package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/memtest"
)

// TestReloadReleasesReplacedConfig: the caches and the model of a replaced config are collectable
// after a reload (the operator test saw a replaced template cache stay in memory with its gauge at
// 0; every reload also kept the replaced model, ~17 MB, alive). A client's connection to the
// replaced config's server keeps that config's modules, and so its App, reachable; the App must
// then hold nothing heavy. The long messages go to /kvroute/explain, which routes without
// forwarding (no KV events, no index growth), so the only state they grow is the template
// cache's; one short chat request through the site opens the client's connection.
func TestReloadReleasesReplacedConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: reloads Caddy repeatedly with long template-cache messages and waits for the old configs to be collected, ~4 s")
	}
	// A size of its own: the process's 64 MiB cache may be full of earlier tests' messages (a
	// reload that keeps the size keeps the cache), and 20 more would only replace some of them.
	h := startHarness(t, []simSpec{{ID: "tf-a", Model: "qwen"}}, harnessOpts{appOpts: "		tokenize_cache_size 0\n		template_cache_size 48MiB"})
	send := func(n, from int) {
		for i := range n {
			text := fmt.Sprintf("document %d ", from+i) + strings.Repeat("a long distinct message text ", 8000)
			h.explain(t, mustJSON(t, map[string]any{"model": "qwen", "messages": []any{
				map[string]any{"role": "user", "content": text}}}))
		}
	}
	send(2, 0)
	h.chat(t, mustJSON(t, map[string]any{"model": "qwen", "messages": []any{map[string]any{"role": "user", "content": "hello"}}})).mustOK(t)
	h0 := memtest.LiveHeap()
	send(20, 100)
	h1 := memtest.LiveHeap()
	cached := h.metric(t, "caddy_kvroute_template_cache_bytes")
	// Each reload loads the model again (a new config); the replaced one must go.
	for i, opts := range []string{"		template_cache_size 0", "		template_cache_size 0\n		max_media 9", "		template_cache_size 40MiB"} {
		h.reload(t, harnessOpts{appOpts: "		tokenize_cache_size 0\n" + opts})
		h.chat(t, mustJSON(t, map[string]any{"model": "qwen", "messages": []any{map[string]any{"role": "user", "content": "hello"}}})).mustOK(t)
		h2 := memtest.LiveHeap()
		t.Logf("reload %d: live heap %d KiB (before the messages %d KiB, with 20 cached messages %d KiB, gauge %.0f)", i+1, h2>>10, h0>>10, h1>>10, cached)
		// 20 messages of 232 kB: 4.4 MiB of text held by the cache (their values too; a message
		// seen once has no recorded render). A retained cache would leave at least that.
		if h1-h0 < 3<<20 {
			t.Fatalf("the cache did not hold the messages (%d KiB)", (h1-h0)>>10)
		}
		if h2 > h0+3<<20 {
			t.Fatalf("after reload %d the live heap is %d KiB over where it started: a replaced config is retained", i+1, (h2-h0)>>10)
		}
	}
}

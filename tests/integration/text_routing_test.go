package integration

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// textBody is a chat request of one user message for the given served model.
func textBody(t *testing.T, model, content string) []byte {
	return mustJSON(t, map[string]any{"model": model, "messages": []map[string]any{{"role": "user", "content": content}}})
}

// longText is about n tokens of deterministic English-like text starting with tag.
func longText(tag string, n int) string {
	words := []string{"router", "cache", "video", "block", "prefix", "worker", "token", "event", "frame", "layout",
		"queue", "latency", "index", "hash", "model", "request"}
	var b strings.Builder
	b.WriteString(tag)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, " %s%d", words[(i*7+i/16)%len(words)], i%10)
	}
	return b.String()
}

// TestTextRouting checks text prefix routing end to end (issue 4): a repeated long prompt goes to
// the worker that cached it with full overlap, concurrent identical requests spread by load, and
// distinct prompts spread over the workers.
func TestTextRouting(t *testing.T) {
	h := startHarness(t, []simSpec{
		{ID: "text-a", Model: "qwen"}, {ID: "text-b", Model: "qwen"},
		{ID: "slow-a", Model: "qwen-slow", PrefillDelay: 400 * time.Millisecond},
		{ID: "slow-b", Model: "qwen-slow", PrefillDelay: 400 * time.Millisecond},
	})

	t.Run("2k-token prompt twice: same worker, full overlap, cached tokens", func(t *testing.T) {
		body := textBody(t, "qwen", longText("Summarize the following notes.", 1000))
		cold := h.chat(t, body).mustOK(t)
		if cold.fallback != "" || cold.overlap != 0 || cold.hitBlocks != 0 {
			t.Fatalf("cold: fallback %q overlap %d hit %d", cold.fallback, cold.overlap, cold.hitBlocks)
		}
		if cold.promptTokens < 1800 || cold.promptTokens > 2600 || cold.total != cold.promptTokens/blockSize {
			t.Fatalf("cold: %d prompt tokens, %d blocks: want ~2k tokens, tokens/16 blocks", cold.promptTokens, cold.total)
		}
		h.waitEvents(t)
		warm := h.chat(t, body).mustOK(t)
		if warm.worker != cold.worker || warm.overlap != warm.total || warm.total != cold.total || warm.fallback != "" {
			t.Fatalf("warm: worker %s (cold %s), overlap %d/%d, fallback %q", warm.worker, cold.worker, warm.overlap, warm.total, warm.fallback)
		}
		if 2*warm.cached <= warm.promptTokens {
			t.Fatalf("warm: simulator cached %d of %d prompt tokens", warm.cached, warm.promptTokens)
		}
		t.Logf("%d prompt tokens, %d blocks; warm on %s: overlap %d, cached %d", warm.promptTokens, warm.total, warm.worker, warm.overlap, warm.cached)
	})

	t.Run("8 concurrent identical requests are not herded", func(t *testing.T) {
		body := textBody(t, "qwen-slow", longText("Concurrent question.", 300))
		got := make([]answer, 8)
		var wg sync.WaitGroup
		for i := range got {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				got[i] = h.chat(t, body)
			}(i)
		}
		wg.Wait()
		per := map[string]int{}
		for _, a := range got {
			a.mustOK(t)
			per[a.worker]++
		}
		if per["slow-a"] == 0 || per["slow-b"] == 0 || per["slow-a"]+per["slow-b"] != 8 {
			t.Fatalf("split %v: want both workers used", per)
		}
		t.Logf("split %v", per)
	})

	t.Run("100 distinct prompts spread over two workers", func(t *testing.T) {
		per := map[string]int{}
		for i := 0; i < 100; i++ {
			// distinct from the 5th token on: fewer shared tokens than a block
			body := textBody(t, "qwen", fmt.Sprintf("%d. %s", 1000+i, longText("Question", 20+i%7)))
			a := h.chat(t, body).mustOK(t)
			if a.overlap != 0 {
				t.Fatalf("prompt %d: overlap %d, distinct prompts share no complete block", i, a.overlap)
			}
			per[a.worker]++
		}
		if per["text-a"] < 25 || per["text-b"] < 25 {
			t.Fatalf("split %v: want at least 25 each", per)
		}
		t.Logf("split %v", per)
	})
}

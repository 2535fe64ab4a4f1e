package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit"
)

// bosModelDir is a text-only model folder whose worker adds a BOS to a completions prompt:
// DeepSeek-V3 (tokenizer_config.json LlamaTokenizerFast, add_bos_token true; transformers 4.x
// prepends <｜begin▁of▁sentence｜> although tokenizer.json's post_processor adds nothing).
const bosModelDir = "../../testdata/tokenizers/deepseek_v3"

// specialOracleIDs returns the oracle ids of testdata/special_tokens/vectors.jsonl for the first
// text starting with prefix (Hugging Face tokenizers 0.23.2 with transformers' post-processor).
func specialOracleIDs(t *testing.T, folder, reading, prefix string, add bool) (string, []uint32) {
	t.Helper()
	vectors := testkit.SpecialTokenVectors(t, "../../testdata/special_tokens/vectors.jsonl", folder, reading)
	texts := make([]string, 0, len(vectors))
	for text := range vectors {
		texts = append(texts, text)
	}
	slices.Sort(texts) // the first text with the prefix, whatever the map's order
	for _, text := range texts {
		if ids, ok := vectors[text][add]; ok && strings.HasPrefix(text, prefix) {
			return text, ids
		}
	}
	t.Fatalf("no vector %s %s %q %t", folder, reading, prefix, add)
	return "", nil
}

// completions posts body to /v1/completions through Caddy.
func (h *harness) completions(t *testing.T, body []byte) answer {
	t.Helper()
	return h.post(t, "/v1/completions", body)
}

// explainAt is explain for a request path (the admin endpoint's path parameter).
func (h *harness) explainAt(t *testing.T, path string, body []byte) explainResp {
	t.Helper()
	res, err := h.client.Post(h.admin+"/kvroute/explain?path="+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var e explainResp
	if res.StatusCode != 200 || json.Unmarshal(b, &e) != nil {
		t.Fatalf("explain: %d %s", res.StatusCode, b)
	}
	return e
}

// TestCompletionsBOS: a /v1/completions prompt for a model whose worker adds a BOS is hashed as
// the worker's ids with the BOS. The simulators run in oracle mode on the oracle's ids of the
// prompt with add_special_tokens=True (testdata/special_tokens, not kvroute's tokenizer) and
// publish their KV events; through Caddy (TLS, header, encode, log, kvroute, reverse_proxy) the
// router's block hashes for the prompt equal the oracle's block hashes, the warm repeat is credited
// every block, and the same prompt with add_special_tokens false (ids without the BOS: every block
// shifted by one token) matches no block.
func TestCompletionsBOS(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: loads the DeepSeek test model for Caddy and oracle-mode simulators, ~2 s")
	}
	text, withBOS := specialOracleIDs(t, "tokenizers/deepseek_v3", "transformers4", "Summarize the following notes.", true)
	_, plain := specialOracleIDs(t, "tokenizers/deepseek_v3", "transformers4", "Summarize the following notes.", false)
	if len(withBOS) != len(plain)+1 || withBOS[0] == plain[0] || len(withBOS) < 8*blockSize {
		t.Fatalf("oracle: %d ids with BOS (%d…), %d without (%d…)", len(withBOS), withBOS[0], len(plain), plain[0])
	}
	logFile := filepath.Join(t.TempDir(), "access.log")
	h := startHarness(t, []simSpec{{ID: "bos-a", Model: "deepseek", Oracle: withBOS}, {ID: "bos-b", Model: "deepseek", Oracle: withBOS}}, modelFolder(bosModelDir),
		harnessOpts{accessLog: logFile})
	body := mustJSON(t, map[string]any{"model": "deepseek", "prompt": text, "max_tokens": 4})
	total := len(withBOS) / blockSize

	e := h.explainAt(t, "/v1/completions", body)
	if e.fallback() != "" || e.TotalBlocks != total {
		t.Fatalf("explain: fallback %q, %d blocks; want exact, %d blocks", e.fallback(), e.TotalBlocks, total)
	}
	cold := h.completions(t, body).mustOK(t)
	if cold.fallback != "" || cold.overlap != 0 || cold.total != total {
		t.Fatalf("cold: fallback %q overlap %d total %d", cold.fallback, cold.overlap, cold.total)
	}
	h.waitEvents(t)
	// The router's block hashes are those of the oracle ids the worker published: every block of
	// the warm repeat is found in the worker's KV events.
	warm := h.completions(t, body).mustOK(t)
	if warm.fallback != "" || warm.worker != cold.worker || warm.overlap != total || warm.total != total || warm.hitBlocks != total {
		t.Fatalf("warm: worker %s (cold %s), overlap %d/%d, simulator hit %d, fallback %q", warm.worker, cold.worker, warm.overlap, warm.total, warm.hitBlocks, warm.fallback)
	}
	e = h.explainAt(t, "/v1/completions", body)
	for _, c := range e.Candidates {
		if want := map[bool]int{true: total, false: 0}[c.WorkerID == cold.worker]; c.OverlapBlocks != want {
			t.Errorf("explain candidate %s: overlap %d, want %d", c.WorkerID, c.OverlapBlocks, want)
		}
	}

	// The client turns the BOS off: the router hashes the ids without it, which no worker holds.
	var noBOS map[string]any
	_ = json.Unmarshal(body, &noBOS)
	noBOS["add_special_tokens"] = false
	off := h.explainAt(t, "/v1/completions", mustJSON(t, noBOS))
	if off.fallback() != "" || off.TotalBlocks != len(plain)/blockSize {
		t.Fatalf("add_special_tokens false: fallback %q, %d blocks", off.fallback(), off.TotalBlocks)
	}
	for _, c := range off.Candidates {
		if c.OverlapBlocks != 0 {
			t.Errorf("add_special_tokens false: %s overlap %d, want 0 (the ids without BOS)", c.WorkerID, c.OverlapBlocks)
		}
	}
	// A non-boolean add_special_tokens is a schema misfit: forwarded, routed on load alone.
	// (The simulator, parsing as vLLM would not, answers it 400; kvroute forwards it unchanged.)
	noBOS["add_special_tokens"] = "no"
	bad := h.completions(t, mustJSON(t, noBOS))
	if bad.fallback != "template_error" || bad.sim == nil {
		t.Fatalf("add_special_tokens \"no\": status %d worker %q fallback %q, want template_error", bad.status, bad.worker, bad.fallback)
	}
	if got := bad.sim.lastBody(); !slices.Equal(got, mustJSON(t, noBOS)) {
		t.Errorf("body at the worker %.200s, want the client's", got)
	}
	t.Logf("%d prompt tokens with BOS, %d blocks; warm on %s: overlap %d, simulator hit %d", len(withBOS), total, warm.worker, warm.overlap, warm.hitBlocks)

	// The same prompt as token ids, as a list and as a batch of one (vLLM prefills them as sent,
	// adding nothing): the ids with the BOS are the blocks the string prompt warmed.
	for _, prompt := range []any{withBOS, [][]uint32{withBOS}} {
		got := h.completions(t, mustJSON(t, map[string]any{"model": "deepseek", "prompt": prompt, "max_tokens": 4})).mustOK(t)
		if got.fallback != "" || got.worker != cold.worker || got.overlap != total || got.total != total {
			t.Errorf("token-id prompt %T: worker %s (warm %s), overlap %d/%d, fallback %q", prompt, got.worker, cold.worker, got.overlap, got.total, got.fallback)
		}
	}
	// A batch of two prompts has no one prompt to route by: routed on load alone, forwarded.
	batchBody := mustJSON(t, map[string]any{"model": "deepseek", "prompt": []string{text, text}, "max_tokens": 4})
	batch := h.completions(t, batchBody)
	if batch.fallback != "template_error" || batch.sim == nil || !slices.Equal(batch.sim.lastBody(), batchBody) {
		t.Errorf("a batch of two prompts: status %d worker %q fallback %q, want template_error and the body forwarded", batch.status, batch.worker, batch.fallback)
	}
}

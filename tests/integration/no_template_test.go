package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestModelWithoutChatTemplate: a model folder without a chat template (gpt-oss's tokenizer
// folder is one) starts and reloads (the operator test saw Caddy panic at start when the template
// cache was given to the missing template); completions route on their tokens, chat requests on
// load alone with template_error.
func TestModelWithoutChatTemplate(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: starts and reloads Caddy with the gpt-oss tokenizer folder (a large tokenizer load), ~2 s")
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "chat_template.jinja" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(modelDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "tokenizer_config.json" {
			var cfg map[string]any
			if err := json.Unmarshal(b, &cfg); err != nil {
				t.Fatal(err)
			}
			delete(cfg, "chat_template")
			if b, err = json.Marshal(cfg); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := startHarness(t, []simSpec{{ID: "nt-a", Model: "qwen"}, {ID: "nt-b", Model: "qwen"}},
		harnessOpts{caddyModelDir: dir})
	comp := h.completions(t, mustJSON(t, map[string]any{"model": "qwen", "prompt": longText("A prompt without a template.", 100)})).mustOK(t)
	if comp.fallback != "" || comp.total == 0 {
		t.Fatalf("completions: fallback %q, %d blocks", comp.fallback, comp.total)
	}
	chatAns := h.chat(t, mustJSON(t, map[string]any{"model": "qwen", "messages": []any{map[string]any{"role": "user", "content": "hi"}}})).mustOK(t)
	if chatAns.fallback != "template_error" {
		t.Fatalf("chat without a template: fallback %q, want template_error", chatAns.fallback)
	}
	h.reload(t, harnessOpts{caddyModelDir: dir, appOpts: "		template_cache_size 0"})
	if again := h.completions(t, mustJSON(t, map[string]any{"model": "qwen", "prompt": "after the reload"})).mustOK(t); again.fallback != "" {
		t.Fatalf("after the reload: fallback %q", again.fallback)
	}
}

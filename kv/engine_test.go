package kv

import "testing"

// TestEngineNames: the engine and feature names are DESIGN.md §2.1's, spelled exactly.
func TestEngineNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{EngineVLLM, "vllm"},
		{EngineSGLang, "sglang"},
		{FeatureMMHashes, "mm_hashes"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

package router

import "testing"

// TestReuseCapBlocks pins the engines' last-token rule at block boundaries: vLLM's
// max_cache_hit_length = num_tokens − 1 and SGLang's max_prefix_len = input_len − 1, in whole
// blocks (the cases: a 160-token text is 10 blocks and reuses 9; the 720p clip's 754-block
// prompt reuses 753).
func TestReuseCapBlocks(t *testing.T) {
	for _, c := range []struct {
		engine             string
		tokens, bs, blocks int
	}{
		{"vllm", 160, 16, 9}, {"vllm", 161, 16, 10}, {"vllm", 159, 16, 9}, {"vllm", 754 * 16, 16, 753},
		{"vllm", 1, 16, 0}, {"vllm", 17, 16, 1}, {"vllm", 16, 16, 0}, {"vllm", 0, 16, 0}, {"vllm", 32, 0, 0},
		{"sglang", 64, 64, 0}, {"sglang", 65, 64, 1}, {"sglang", 128, 1, 127}, {"", 48, 16, 2},
	} {
		if got := ReuseCapBlocks(c.engine, c.tokens, c.bs); got != c.blocks {
			t.Errorf("%s: %d tokens, block %d: %d blocks, want %d", c.engine, c.tokens, c.bs, got, c.blocks)
		}
	}
}

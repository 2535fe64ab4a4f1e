package router

// ReuseCapBlocks returns the most blocks of a prompt of numTokens tokens a worker of engine can
// reuse from its prefix cache, with blocks of blockSize tokens: the engine always computes at
// least the prompt's last token (it needs its logits), so a prompt that fills its last block
// reuses one block less than it has cached (DESIGN.md §1 step 5).
//
//   - vLLM: at most numTokens − 1 tokens (vllm/v1/core/kv_cache_manager.py
//     get_computed_blocks, v0.11: max_cache_hit_length = request.num_tokens - 1), in whole blocks.
//   - SGLang: max_prefix_len = input_len − 1 (python/sglang/srt/managers/schedule_batch.py,
//     _compute_max_prefix_len, v0.5; adjust_max_prefix_ids before), matched in whole pages by the
//     radix cache; a request with return_logprob may reuse less (logprob_start_len), which the
//     router does not see.
//
// Both rules give floor((numTokens − 1) / blockSize), so engine selects nothing yet; it is a
// parameter so an engine with another rule gets its own. numTokens ≤ 0 or blockSize ≤ 0 returns 0.
func ReuseCapBlocks(engine string, numTokens, blockSize int) int {
	_ = engine // "vllm", "sglang": the same rule (above)
	if numTokens <= 0 || blockSize <= 0 {
		return 0
	}
	return (numTokens - 1) / blockSize
}

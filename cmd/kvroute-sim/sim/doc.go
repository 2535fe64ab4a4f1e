// Package sim is kvroute-sim's worker: an OpenAI-compatible stand-in for a vLLM worker serving
// /v1/chat/completions (JSON, or SSE with "stream": true), /v1/models and /health, with a
// configurable prefill delay and per-token delay, and a worker record in the kvroute registry.
//
// The pieces a real worker has are behind small seams so they can grow separately: Tokenizer
// (tokens.go: a stand-in word tokenizer now, the model's tokenizer later), Cache (cache.go: no
// cache now, so cached_tokens is 0; a block cache publishing real-format KV events later) and
// Registration (register.go).
package sim

package kv

// Engines a worker can run: a worker record's `engine` and a video contract's `engine`
// (DESIGN.md §2.1, §2.3).
const (
	EngineVLLM   = "vllm"
	EngineSGLang = "sglang"
)

// FeatureMMHashes is the worker feature (a record's `features`, DESIGN.md §2.1) a patched SGLang
// worker declares when it takes forwarded media hashes and names them in its KV events (§1.6).
const FeatureMMHashes = "mm_hashes"

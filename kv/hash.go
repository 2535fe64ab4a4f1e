package kv

// The two block hashes of kvroute, as named types so that one cannot be passed where the other is
// meant (llm-d-kv-cache keeps one `type BlockHash uint64` in pkg/kvcache/kvblock and tells its
// engine keys from its request keys by parameter name only; here the type says it).
//
// They live in the root vocabulary because both sides use them: kv/blocks computes BlockHash and
// kv/index is keyed by both, while kvevents/codec and kvevents/normalize produce them from events.
// The event layer and the request layer (routing/) each depend on kv and never on each other
// (internal/importrules).

// EngineHash is the hash an engine put in its KV event for one block: an entry of a vLLM or SGLang
// BlockStored/BlockRemoved block_hashes or its parent_block_hash, or a Dynamo RouterEvent's
// block_hash / parent_hash, in the engine's own scheme (vLLM: sha256_cbor or builtin hash of the
// parent hash, tokens and extra keys; vllm/v1/core/kv_cache_utils.py). Signed integers are taken
// bitwise and byte strings by their last 8 bytes big-endian (kvevents/codec). kvroute never computes
// one: it only keys a worker's removals and parent links by it.
type EngineHash uint64

// BlockHash is kvroute's own hash of one complete block, the LocalBlockHash of DESIGN.md §5:
// XXH3-64 of the block's routing tokens (worker tokens, media placeholder runs normalized to pad
// values, or tokens followed by identities) under the chain's seed (BaseSeed + LoRA and cache salt
// terms), computed by kv/blocks from token ids alike on the request side and the event side
// (Dynamo RouterEvent tokens_hash is the same hash computed by the publisher). It does not depend on
// the blocks before it; kv/index keys each radix node by it under its parent node, so a path of
// BlockHashes names a prefix.
type BlockHash uint64

// Package kv is kvroute's shared vocabulary, the root every layer depends on and that depends on
// nothing of kvroute (internal/importrules checks it): what a block, a worker's engine and a media
// item are called on both sides of the router.
//
//   - hash.go: the two block hashes, EngineHash (the engine's, from its KV events) and BlockHash
//     (kvroute's LocalBlockHash, kv/blocks), as distinct types.
//   - identity.go: a media item's Identity (DESIGN.md §3, the mm_hash kvroute computes) in its two
//     text forms, Hex (16 lowercase hex digits) and UUID (16 hex digits and 48 zeros, what kvroute
//     forwards and a worker's extra_keys names), and MediaKey, one media item named by a stored block.
//   - engine.go: engine and feature names of a worker record and a contract (vllm, sglang, mm_hashes).
//
// Beside it: kv/blocks computes BlockHash from token ids (request side and event side alike) and
// kv/index is the prefix index keyed by both hashes. The dependency arrows read
//
//	request (routing/...) → kv, kv/blocks, kv/index ← events (kvevents/...)
//
// as Dynamo keeps this vocabulary at the root of its router (lib/kv-router/src/protocols.rs) and
// llm-d next to its index (pkg/kvcache/kvblock). NATS subjects and headers stay in kvevents/wire:
// they are the event transport's names, not the core's.
package kv

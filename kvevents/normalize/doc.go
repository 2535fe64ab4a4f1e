// Package normalize turns decoded KV events into index entries: for every stored block the engine's
// hash (kept only as the key for later removals), its parent's engine hash, and the LocalBlockHash the
// request side computes for the same tokens (DESIGN.md §2 extra_keys rules, §5 block rule through
// kv/blocks.Hasher.Block). See kvevents/codec for the package layout.
//
// Before that it keeps out the events whose blocks do not line up with the prompt (DESIGN.md §2, KV
// cache groups): events of hybrid models' Mamba, sliding-window or other non-attention groups
// (GroupFilter: the event's kv_cache_spec_kind, else the kind its (dp rank, group_idx) learned from an
// earlier BlockStored, else group 0 only), stored spans that are not dense, and stored events of
// another block size than the worker's. Each is listed in Result.Filtered with a SkipReason; the
// vectors are golden/vllm_hybrid_events.jsonl.
package normalize

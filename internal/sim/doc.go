// Package sim is kvroute-sim's worker, a stand-in for a stock vLLM worker with prefix caching, usable
// in-process by tests (cmd/kvroute-sim is its command line). It serves /v1/chat/completions and
// /v1/completions (JSON, or SSE with "stream": true), /v1/models, /health and /reset_prefix_cache
// with a configurable prefill delay and per-token delay, and keeps a worker record in the kvroute
// registry. With PrefillPerToken and MaxRunning (engine.go) time to first token follows caching and
// load: prefill time grows with the uncached prompt tokens, prefills run one at a time per worker,
// and at most MaxRunning sequences run at once with a queue beyond.
//
// With a Frontend (the default of the command), a request is handled as vLLM handles it:
//
//   - Frontend.Prepare renders the chat template and tokenizes with the model folder, fetches and
//     decodes every media part itself with the contract it publishes (routing/mediaresolver), takes a
//     client uuid verbatim as the item's identifier (else its own content identity in kvroute's
//     forwarded form, hex16 + 48 zeros) and expands the placeholders with routing/layout's Qwen3-VL
//     adapter. Oracle mode takes the worker-visible tokens from a file instead and reads the media
//     spans from their placeholder runs.
//   - BlockCache chains engine block hashes over the complete blocks like vLLM's hash_block_tokens
//     (parent hash, block tokens, extra keys: [identifier, offset] per overlapping media item, the
//     cache salt on block 0), answers the prefix hit at admission (usage.prompt_tokens_details.
//     cached_tokens = hit blocks × block size, one block less when the whole prompt hit, and the
//     X-Kvroute-Sim-Hit-Blocks response header), and when prefill ends, before the first response
//     byte, stores the new blocks, evicting least recently used blocks beyond its capacity.
//   - Publisher publishes the resulting BlockStored / BlockRemoved / AllBlocksCleared events as
//     vLLM KVEventBatch msgpack (array or map events) on kvroute.events.<worker_id> with the
//     Kvroute-Seq / Kvroute-Encoding / Kvroute-Dp-Rank headers, keeps a bounded ring of batches and
//     answers replay requests on kvroute.ctl.<worker_id>.replay; it also keeps the block set its
//     events leave the cache holding (kvevents/snapshot, bounded by PublisherConfig.MaxBlocks) and
//     answers snapshot requests on kvroute.ctl.<worker_id>.snapshot, as kvroute-bridge does.
//
// Without a Frontend, the simulator counts whitespace-separated words (Tokenizer) and asks a Cache
// seam for cached_tokens (NoCache by default), as its first version did.
package sim

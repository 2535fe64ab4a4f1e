// Package snapshot keeps the set of KV blocks one worker rank holds, from the events its publisher
// forwards, and carries that set to a router replica in chunks over NATS (DESIGN.md §2.2
// kvroute.ctl.<worker_id>.snapshot, §9). It is Caddy-free: kvevents/bridge and internal/sim keep a
// Set per rank and answer requests with Respond; kvevents/subscriber loads a snapshot with Fetch when
// its replay cannot rebuild a stream (a replica that starts or restarts after the publisher's replay
// ring wrapped, or a gap the ring no longer holds).
//
// What a Set keeps per block (see Block): the engine block hash, its parent's engine hash, the
// block's token ids, its extra_keys, and the event fields a router reads (lora_name, lora_id,
// medium, group_idx, block_size), shared between the blocks of the same kind. It applies events the
// way kv/index does: a block stored under a parent it does not hold is dropped with the rest of
// its event, and a removed block that still has blocks under it stays as a placeholder. A snapshot
// is those blocks written back as vLLM BlockStored events (kvevents/codec EncodeVLLM), parents
// before children, followed by BlockRemoved events for the placeholders, so a router applies it with
// the very decoder and normalizer it applies live batches with: the index entries it builds
// (LocalBlockHash with pad runs, cache salt, LoRA, placeholders) are the ones the original events
// built. Memory: about 230 B per block of 16 tokens, plus 4 B per further token (live heap after GC,
// BenchmarkSetMemory); a Set is bounded by its MaxBlocks (the engine's GPU block count), beyond which
// the oldest stored block is dropped and counted (Set.Evicted).
//
// Wire format of one snapshot (documented for operators in docs/architecture.md#snapshots): the
// request on kvroute.ctl.<worker_id>.snapshot is {"dp_rank": r} with a reply subject; the answer is
// one or more messages on that reply subject, each carrying the headers
//
//	Kvroute-Snapshot-Seq       S: the set holds the effect of every batch the publisher forwarded
//	                           before seq S (since its last reset); live batches continue at S
//	Kvroute-Snapshot-Chunk     i: 0, 1, 2, … in order
//	Kvroute-Snapshot-Last      "1" on the last chunk only
//	Kvroute-Snapshot-Blocks    on the last chunk: the number of blocks in all chunks
//	Kvroute-Snapshot-Complete  "1" when the set starts at the engine's first batch or at an
//	                           AllBlocksCleared (nothing before it is missing)
//	Kvroute-Encoding           vllm or sglang (how a router normalizes the blocks)
//	Kvroute-Dp-Rank            r
//
// and as payload one vLLM KVEventBatch (msgpack, positional batch, map events) of about
// Answer.MaxChunkBytes (default DefaultMaxChunkBytes, 256 KiB): BlockStored events, then on the last
// chunks BlockRemoved events for the placeholders. A publisher that cannot answer sends one
// message with the header Kvroute-Snapshot-Error and no payload.
package snapshot

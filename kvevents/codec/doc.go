// Package codec decodes the KV event batches kvroute subscribes to and encodes vLLM batches.
//
// The kvevents tree is laid out as:
//
//   - kvevents/codec: wire formats → typed [Batch]/[Event] values. vLLM batches (msgspec msgpack, the
//     batch and each event either positional arrays or tagged maps; vllm/distributed/kv_events.py),
//     SGLang batches (the same shape, token_ids already padded; sglang srt/disaggregation kv_events),
//     and Dynamo RouterEvent batches (serde JSON, or rmp_serde named msgpack; ai-dynamo
//     lib/kv-router/src/protocols.rs). [EncodeVLLM] writes vLLM batches in both encodings for the
//     simulator and tests.
//   - kvevents/normalize: stored blocks → index entries (engine hash, parent engine hash, LocalBlockHash)
//     with the extra_keys rules of DESIGN.md §2 and the block rule of kv/blocks.
//
// Files by job: decoder.go (the Decoder, entry points, per-batch scratch), batch.go (the engine batch
// envelope), vllm.go (the vLLM/SGLang event layout: tagged arrays or maps, the fields of each vLLM
// version), vllm_values.go (block hash, token_ids and extra_keys value forms), msgpack.go (the msgpack
// value reader), skip.go (skipping values under MaxDepth), dynamo.go (Dynamo RouterEvent batches),
// encode.go (EncodeVLLM), event.go (the decoded types).
//
// Decoding never panics and bounds its work by the input size: an unknown event type, or an event
// whose fields do not have the expected shape, is skipped and counted in the Batch; bytes that are not
// one well-formed batch are an error wrapping [ErrMalformed].
package codec

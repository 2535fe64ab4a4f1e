// Package extrakeys writes a BlockStored's extra_keys the way vLLM does, for a simulated worker
// (internal/sim) and the tests that encode worker events. The router never writes extra_keys; it
// reads them back with kvevents/normalize. It lives outside kvevents/codec so the production codec
// does not import kv/blocks (issue 17).
package extrakeys

import (
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kvevents/codec"
)

// For builds a BlockStored's per-block extra_keys the way vLLM does
// (vllm/v1/core/kv_cache_utils.py generate_block_hash_extra_keys, _gen_mm_extra_hash_keys) for the
// complete blocks of a prompt of numTokens tokens: per block [blockStart, blockStart+blockSize), the
// LoRA name (if any), then one key per media span overlapping the block in span order, then the cache
// salt on the block starting at token 0; a block with no key gets a nil entry. spans must be sorted by
// Start. It is what a simulated worker publishes; the router reads it back with kvevents/normalize.
func For(blockSize, numTokens int, spans []blocks.Span, loraName, cacheSalt string, style codec.ExtraKeysStyle) [][]codec.ExtraKey {
	if blockSize <= 0 || numTokens < blockSize {
		return [][]codec.ExtraKey{}
	}
	nb := numTokens / blockSize
	out := make([][]codec.ExtraKey, nb)
	for b := range out {
		start, end := b*blockSize, (b+1)*blockSize
		var keys []codec.ExtraKey
		if loraName != "" {
			keys = append(keys, codec.ExtraKey{Kind: codec.KeyString, Str: loraName})
		}
		for _, s := range spans {
			if s.Start < end && s.End > start {
				id := s.Identity.UUID()
				if style == codec.BareKeys {
					keys = append(keys, codec.ExtraKey{Kind: codec.KeyString, Str: id})
				} else {
					keys = append(keys, codec.ExtraKey{Kind: codec.KeyPair, Str: id, Offset: int64(s.Start - start)})
				}
			}
		}
		if b == 0 && cacheSalt != "" {
			keys = append(keys, codec.ExtraKey{Kind: codec.KeyString, Str: cacheSalt})
		}
		out[b] = keys
	}
	return out
}

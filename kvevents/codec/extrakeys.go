package codec

import (
	"fmt"
	"strings"

	"github.com/kvroute/kvroute/routing/blocks"
)

// IdentityString is the identifier vLLM uses for a media item whose uuid kvroute forwarded: the
// identity as 16 lowercase hex digits followed by 48 '0' (DESIGN.md §2).
func IdentityString(identity uint64) string {
	return fmt.Sprintf("%016x", identity) + strings.Repeat("0", 48)
}

// ExtraKeysStyle selects how ExtraKeysFor writes media keys.
type ExtraKeysStyle uint8

const (
	// PairKeys writes [identifier, placeholder offset − block start] (vLLM ≥ PR #36708).
	PairKeys ExtraKeysStyle = iota + 1
	// BareKeys writes the identifier alone (older vLLM).
	BareKeys
)

// ExtraKeysFor builds a BlockStored's per-block extra_keys the way vLLM does
// (vllm/v1/core/kv_cache_utils.py generate_block_hash_extra_keys, _gen_mm_extra_hash_keys) for the
// complete blocks of a prompt of numTokens tokens: per block [blockStart, blockStart+blockSize), the
// LoRA name (if any), then one key per media span overlapping the block in span order, then the cache
// salt on the block starting at token 0; a block with no key gets a nil entry. spans must be sorted by
// Start. It is what a simulated worker publishes; the router reads it back with kvevents/normalize.
func ExtraKeysFor(blockSize, numTokens int, spans []blocks.Span, loraName, cacheSalt string, style ExtraKeysStyle) [][]ExtraKey {
	if blockSize <= 0 || numTokens < blockSize {
		return [][]ExtraKey{}
	}
	nb := numTokens / blockSize
	out := make([][]ExtraKey, nb)
	for b := range out {
		start, end := b*blockSize, (b+1)*blockSize
		var keys []ExtraKey
		if loraName != "" {
			keys = append(keys, ExtraKey{Kind: KeyString, Str: loraName})
		}
		for _, s := range spans {
			if s.Start < end && s.End > start {
				id := IdentityString(s.Identity)
				if style == BareKeys {
					keys = append(keys, ExtraKey{Kind: KeyString, Str: id})
				} else {
					keys = append(keys, ExtraKey{Kind: KeyPair, Str: id, Offset: int64(s.Start - start)})
				}
			}
		}
		if b == 0 && cacheSalt != "" {
			keys = append(keys, ExtraKey{Kind: KeyString, Str: cacheSalt})
		}
		out[b] = keys
	}
	return out
}

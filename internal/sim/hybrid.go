package sim

import (
	"github.com/kvroute/kvroute/kv"
	"github.com/kvroute/kvroute/kvevents/codec"
)

// KV cache groups of the simulated hybrid worker (PublisherConfig.Hybrid), as vLLM numbers a
// Qwen3.5-style model's: full attention first, then the gated-delta-net (Mamba) layers.
const (
	hybridAttentionGroup = 0
	hybridMambaGroup     = 1
)

// hybridEvents rewrites the block cache's events as a hybrid vLLM worker publishes them: one
// BlockStored per KV cache group (vllm/distributed/kv_events.py; group_idx, kv_cache_spec_kind).
//
//   - The full-attention group (0, "full_attention") stores the blocks as given: dense, block_size
//     tokens per block hash.
//   - The Mamba group (1, "mamba", align mode) keeps only the newest state of a chain: its
//     BlockStored names the last block hash alone while token_ids cover the whole span (null blocks
//     are skipped in block_hashes only, so the event is not dense), and it drops the state it held
//     for the chain's previous end with a kind-less BlockRemoved of that hash, a block the attention
//     group still holds (vLLM's block hash does not include the group).
//   - Removals and clears of the cache are published for group 0 (kind-less, learned) and, for the
//     removals, for group 1 too.
//
// A router that indexed the Mamba group's events would credit hashes without their prefix tokens
// and remove blocks the worker still holds; kvevents/normalize's group rule skips them.
func hybridEvents(events []codec.Event) []codec.Event {
	out := make([]codec.Event, 0, 2*len(events)+1)
	for _, ev := range events {
		switch ev.Type {
		case codec.BlockStored:
			full := ev
			full.GroupIdx, full.HasGroupIdx = hybridAttentionGroup, true
			full.SpecKind, full.HasSpecKind = "full_attention", true
			out = append(out, full)
			n := len(ev.BlockHashes)
			if n == 0 {
				continue
			}
			mamba := codec.Event{Type: codec.BlockStored, BlockHashes: ev.BlockHashes[n-1:], Parent: ev.Parent, HasParent: ev.HasParent,
				TokenIDs: ev.TokenIDs, BlockSize: ev.BlockSize, Medium: ev.Medium, HasMedium: ev.HasMedium,
				GroupIdx: hybridMambaGroup, HasGroupIdx: true, SpecKind: "mamba", HasSpecKind: true}
			out = append(out, mamba)
			if ev.HasParent {
				out = append(out, codec.Event{Type: codec.BlockRemoved, BlockHashes: []kv.EngineHash{ev.Parent}, Medium: ev.Medium,
					HasMedium: ev.HasMedium, GroupIdx: hybridMambaGroup, HasGroupIdx: true})
			}
		case codec.BlockRemoved:
			full := ev
			full.GroupIdx, full.HasGroupIdx = hybridAttentionGroup, true
			mamba := full
			mamba.GroupIdx = hybridMambaGroup
			out = append(out, full, mamba)
		default:
			out = append(out, ev)
		}
	}
	return out
}

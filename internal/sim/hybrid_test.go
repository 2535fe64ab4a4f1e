package sim

import (
	"slices"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/normalize"
)

// TestHybridEventsThroughTheFilter publishes a chain and its extension as the hybrid worker does and
// reads them back as the router does: the full-attention group's blocks are indexed at 528 tokens,
// the Mamba group's store is skipped (its own kind, then non-dense if it were admitted) and its
// kind-less removal of a block the attention group holds is skipped as a learned non-attention group.
func TestHybridEventsThroughTheFilter(t *testing.T) {
	const bs = 528
	toks := make([]uint32, 3*bs)
	for i := range toks {
		toks[i] = uint32(i % 7000)
	}
	first := codec.Event{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{1, 2}, TokenIDs: toks[:2*bs], BlockSize: bs, Medium: "GPU", HasMedium: true}
	ext := codec.Event{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{3}, Parent: 2, HasParent: true, TokenIDs: toks[2*bs:], BlockSize: bs, Medium: "GPU", HasMedium: true}
	evict := codec.Event{Type: codec.BlockRemoved, BlockHashes: []kv.EngineHash{3}, Medium: "GPU", HasMedium: true}
	n, err := normalize.New(normalize.Config{Blocks: blocks.Config{BlockSize: bs, ImagePad: 151655, VideoPad: 151656}, Encoding: codec.VLLM})
	if err != nil {
		t.Fatal(err)
	}
	var stored, removed []kv.EngineHash
	var reasons []string
	for _, evs := range [][]codec.Event{{first}, {ext}, {evict}} {
		raw, err := codec.EncodeVLLM(&codec.Batch{TS: 1, Events: hybridEvents(evs), HasDPRank: true}, codec.ArrayForm, codec.MapForm)
		if err != nil {
			t.Fatal(err)
		}
		bt, err := codec.Decode(codec.VLLM, raw)
		if err != nil {
			t.Fatal(err)
		}
		res := n.Apply(bt)
		for _, op := range res.Ops {
			for _, s := range op.Stored {
				stored = append(stored, s.EngineHash)
			}
			removed = append(removed, op.Removed...)
		}
		for _, f := range res.Filtered {
			reasons = append(reasons, bt.Events[f.Event].Type.String()+" "+f.Reason.String())
		}
	}
	if !slices.Equal(stored, []kv.EngineHash{1, 2, 3}) || !slices.Equal(removed, []kv.EngineHash{3}) {
		t.Errorf("indexed stored %v removed %v, want [1 2 3] and [3]", stored, removed)
	}
	want := []string{"BlockStored kind_not_admitted", "BlockStored kind_not_admitted", "BlockRemoved group_kind_not_admitted", "BlockRemoved group_kind_not_admitted"}
	if !slices.Equal(reasons, want) {
		t.Errorf("skipped %v, want %v", reasons, want)
	}
}

package snapshot_test

import (
	"slices"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/normalize"
	"github.com/kvroute/kvroute/kvevents/snapshot"
)

// TestSnapshotKeepsGroupKinds: a hybrid worker's snapshot carries each KV cache group's
// kv_cache_spec_kind, so the router's group filter admits exactly the blocks it admitted from the
// live events (the full-attention group's, here group 1) and skips the dense sliding-window group
// 0's: by group_idx alone a fresh router would take group 0 and drop group 1.
func TestSnapshotKeepsGroupKinds(t *testing.T) {
	const bs = 4
	live := &codec.Batch{Events: []codec.Event{
		{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{11, 12}, BlockSize: bs, TokenIDs: []uint32{1, 2, 3, 4, 5, 6, 7, 8},
			GroupIdx: 0, HasGroupIdx: true, SpecKind: "sliding_window", HasSpecKind: true},
		{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{21, 22}, BlockSize: bs, TokenIDs: []uint32{1, 2, 3, 4, 5, 6, 7, 8},
			GroupIdx: 1, HasGroupIdx: true, SpecKind: "full_attention", HasSpecKind: true},
	}}
	admitted := func(batches []*codec.Batch) []kv.EngineHash {
		var f normalize.GroupFilter
		var out []kv.EngineHash
		for _, b := range batches {
			for i := range b.Events {
				if ev := &b.Events[i]; ev.Type == codec.BlockStored && f.Admit(ev) == 0 {
					out = append(out, ev.BlockHashes...)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	want := admitted([]*codec.Batch{live})
	if !slices.Equal(want, []kv.EngineHash{21, 22}) {
		t.Fatalf("live events admitted %v, want the full-attention group's [21 22]", want)
	}

	set := snapshot.NewSet(0)
	set.Apply(live)
	var chunks []*codec.Batch
	err := snapshot.Encode(set.Order(), 0, func(p []byte, _ int) error {
		b, err := codec.Decode(codec.VLLM, p)
		if err != nil {
			return err
		}
		chunks = append(chunks, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range chunks {
		for _, ev := range b.Events {
			if ev.Type == codec.BlockStored && !ev.HasSpecKind {
				t.Errorf("snapshot event of group %d has no kv_cache_spec_kind", ev.GroupIdx)
			}
		}
	}
	if got := admitted(chunks); !slices.Equal(got, want) {
		t.Fatalf("snapshot admitted %v, live events %v", got, want)
	}
}

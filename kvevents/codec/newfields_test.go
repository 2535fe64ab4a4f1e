package codec

import (
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/vmihailenco/msgpack/v5"
)

// TestNewVLLMFields decodes events carrying the fields newer vLLM adds after group_idx
// (kv_cache_spec_kind, kv_cache_spec_sliding_window, locality, ownership, session_id) and unknown
// future keys of any shape, in the positional and the map encoding: the known fields come out, the
// others are read past, and nothing is skipped.
func TestNewVLLMFields(t *testing.T) {
	future := map[string]any{"nested": []any{1, "x", nil, map[string]any{"k": 2.5}}}
	toks := []uint32{1, 2, 3, 4}
	arrayStored := []any{"BlockStored", []int64{11, -2}, int64(7), toks, 2, nil, "GPU", nil, nil,
		int64(0), "full_attention", nil, "LOCAL", "owner-a", "sess-1", future} // one unknown trailing field
	arrayRemoved := []any{"BlockRemoved", []int64{11}, "GPU", int64(1), "LOCAL", "owner-a", future}
	mapStored := map[string]any{"type": "BlockStored", "block_hashes": []int64{11, -2}, "parent_block_hash": 7,
		"token_ids": toks, "block_size": 2, "lora_id": nil, "medium": "GPU", "lora_name": nil,
		"group_idx": 1, "kv_cache_spec_kind": "sliding_window", "kv_cache_spec_sliding_window": 128,
		"locality": "LOCAL", "ownership": "owner-a", "session_id": "sess-1", "future_key": future}
	mapRemoved := map[string]any{"type": "BlockRemoved", "block_hashes": []int64{11}, "medium": "GPU",
		"group_idx": 1, "locality": "LOCAL", "ownership": "owner-a", "future_key": future}
	for name, batch := range map[string]any{
		"array": []any{1.5, []any{arrayStored, arrayRemoved}, 0},
		"map":   map[string]any{"ts": 1.5, "events": []any{mapStored, mapRemoved}, "data_parallel_rank": 0, "future_key": future},
	} {
		raw, err := msgpack.Marshal(batch)
		if err != nil {
			t.Fatal(err)
		}
		bt, err := Decode(VLLM, raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if bt.Unknown+bt.Malformed != 0 || len(bt.Events) != 2 {
			t.Fatalf("%s: %d events, %d unknown, %d malformed (%v)", name, len(bt.Events), bt.Unknown, bt.Malformed, bt.FirstErr)
		}
		st, rm := bt.Events[0], bt.Events[1]
		wantGroup, wantKind := int64(0), "full_attention"
		if name == "map" {
			wantGroup, wantKind = 1, "sliding_window"
		}
		if st.Type != BlockStored || len(st.BlockHashes) != 2 || st.BlockHashes[1] != 0xfffffffffffffffe ||
			st.Parent != 7 || !st.HasParent || len(st.TokenIDs) != 4 || st.BlockSize != 2 || st.Medium != "GPU" ||
			!st.HasGroupIdx || st.GroupIdx != wantGroup || !st.HasSpecKind || st.SpecKind != wantKind || st.HasExtraKeys {
			t.Errorf("%s: stored %+v", name, st)
		}
		if rm.Type != BlockRemoved || len(rm.BlockHashes) != 1 || rm.BlockHashes[0] != 11 || !rm.HasGroupIdx || rm.GroupIdx != 1 || rm.HasSpecKind {
			t.Errorf("%s: removed %+v", name, rm)
		}
	}
}

// TestEncodeKindRoundTrip encodes group_idx and kv_cache_spec_kind in both forms (the simulator's
// hybrid worker) and decodes them back, with the fields before them unset.
func TestEncodeKindRoundTrip(t *testing.T) {
	for _, f := range []Form{ArrayForm, MapForm} {
		in := Event{Type: BlockStored, BlockHashes: []kv.EngineHash{5}, TokenIDs: []uint32{1, 2}, BlockSize: 2,
			GroupIdx: 1, HasGroupIdx: true, SpecKind: "mamba", HasSpecKind: true}
		kindOnly := Event{Type: BlockStored, BlockHashes: []kv.EngineHash{6}, TokenIDs: []uint32{1, 2}, BlockSize: 2,
			SpecKind: "full_attention", HasSpecKind: true}
		raw, err := EncodeVLLM(&Batch{TS: 1, Events: []Event{in, kindOnly}}, f, f)
		if err != nil {
			t.Fatal(err)
		}
		bt, err := Decode(VLLM, raw)
		if err != nil || len(bt.Events) != 2 {
			t.Fatalf("form %d: %v %+v", f, err, bt)
		}
		a, b := bt.Events[0], bt.Events[1]
		if a.GroupIdx != 1 || !a.HasGroupIdx || a.SpecKind != "mamba" || !a.HasSpecKind || a.HasExtraKeys {
			t.Errorf("form %d: %+v", f, a)
		}
		if b.HasGroupIdx || b.SpecKind != "full_attention" || !b.HasSpecKind || b.HasExtraKeys {
			t.Errorf("form %d: kind without group: %+v", f, b)
		}
	}
}

package codec

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvroute/kvroute/internal/goldens"
)

type eventsRecord struct {
	ID            string `json:"id"`
	Encoding      string `json:"encoding"`
	BatchEncoding string `json:"batch_encoding"`
	BlockSize     int    `json:"block_size"`
	DPRank        *int64 `json:"data_parallel_rank"`
	PayloadHex    string `json:"payload_hex"`
	Expected      struct {
		EventTypes []string `json:"event_types"`
	} `json:"expected"`
}

func goldenEvents(t testing.TB) []eventsRecord {
	return goldens.Records[eventsRecord](t, "../../testdata/golden/vllm_events.jsonl")
}

func payload(t testing.TB, r eventsRecord) []byte {
	t.Helper()
	b, err := hex.DecodeString(r.PayloadHex)
	if err != nil {
		t.Fatalf("%s: decoding payload_hex: %v", r.ID, err)
	}
	return b
}

func form(s string) Form {
	if s == "map" {
		return MapForm
	}
	return ArrayForm
}

// TestGoldenRoundTrip decodes every golden vLLM batch and re-encodes it byte for byte in its own
// encodings: the encoder writes what vLLM's msgspec encoder writes.
func TestGoldenRoundTrip(t *testing.T) {
	recs := goldenEvents(t)
	matched := 0
	for _, r := range recs {
		t.Run(r.ID, func(t *testing.T) {
			b := payload(t, r)
			bt, err := Decode(VLLM, b)
			if err != nil {
				t.Fatal(err)
			}
			if bt.Unknown != 0 || bt.Malformed != 0 {
				t.Fatalf("skipped %d unknown, %d malformed: %v", bt.Unknown, bt.Malformed, bt.FirstErr)
			}
			var types []string
			for _, ev := range bt.Events {
				types = append(types, ev.Type.String())
			}
			if !equalStrings(types, r.Expected.EventTypes) {
				t.Errorf("types %v, want %v", types, r.Expected.EventTypes)
			}
			if (r.DPRank == nil) == bt.HasDPRank || (r.DPRank != nil && *r.DPRank != bt.DPRank) {
				t.Errorf("dp rank %d/%v, want %v", bt.DPRank, bt.HasDPRank, r.DPRank)
			}
			enc, err := EncodeVLLM(bt, form(r.BatchEncoding), form(r.Encoding))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, b) {
				t.Fatalf("re-encoded\n%x\nwant\n%x", enc, b)
			}
			matched++
		})
	}
	t.Logf("vllm_events.jsonl: %d/%d batches decoded and re-encoded byte for byte", matched, len(recs))
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDecodeShapes(t *testing.T) {
	stored := Event{Type: BlockStored, BlockHashes: []kv.EngineHash{1<<63 + 5, 7}, TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 2,
		Medium: "GPU", HasMedium: true, LoRAName: "ad", HasLoRAName: true, HasExtraKeys: true,
		ExtraKeys: [][]ExtraKey{{{Kind: KeyString, Str: "ad"}, {Kind: KeyPair, Str: "x", Offset: -3}, {Kind: KeyOther, Raw: []byte{0xc3}}}, nil},
		GroupIdx:  0, HasGroupIdx: true}
	in := &Batch{TS: 1.5, Events: []Event{stored, {Type: BlockRemoved, BlockHashes: []kv.EngineHash{9}}, {Type: AllBlocksCleared}}, DPRank: 2, HasDPRank: true}
	for _, bf := range []Form{ArrayForm, MapForm} {
		for _, ef := range []Form{ArrayForm, MapForm} {
			b, err := EncodeVLLM(in, bf, ef)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Decode(VLLM, b)
			if err != nil {
				t.Fatalf("%d/%d: %v", bf, ef, err)
			}
			got, _ := json.Marshal(out)
			want, _ := json.Marshal(in)
			if !bytes.Equal(got, want) {
				t.Errorf("%d/%d:\n%s\nwant\n%s", bf, ef, got, want)
			}
		}
	}
}

func TestSGLangMapBatch(t *testing.T) {
	b, _ := msgpack.Marshal(map[string]any{"ts": 2, "events": []any{[]any{"AllBlocksCleared"}}, "attn_dp_rank": 3, "extra": []any{1}})
	bt, err := Decode(SGLang, b)
	if err != nil || !bt.HasDPRank || bt.DPRank != 3 || bt.TS != 2 || len(bt.Events) != 1 {
		t.Errorf("%+v %v", bt, err)
	}
}

func TestDecodeHashForms(t *testing.T) {
	// Byte-string hashes (vLLM without int block hashes): the last 8 bytes, big-endian.
	raw := make([]byte, 32)
	for i := range raw {
		raw[i] = byte(i)
	}
	b, _ := msgpack.Marshal([]any{1.0, []any{[]any{"BlockRemoved", []any{raw, []byte{1, 2}, uint64(1<<64 - 1), int64(-2)}, nil}}})
	bt, err := Decode(VLLM, b)
	if err != nil || len(bt.Events) != 1 {
		t.Fatalf("%+v %v", bt, err)
	}
	want := []kv.EngineHash{0x18191a1b1c1d1e1f, 0x0102, 1<<64 - 1, 1<<64 - 2}
	for i, h := range bt.Events[0].BlockHashes {
		if h != want[i] {
			t.Errorf("hash %d = %x, want %x", i, h, want[i])
		}
	}
}

func TestDecodeSkipsUnknownAndMalformed(t *testing.T) {
	b, _ := msgpack.Marshal([]any{1.0, []any{
		[]any{"BlockFoo", 1, 2},
		map[string]any{"type": "BlockBar"},
		[]any{"BlockStored", "not a list", nil, []int{1}, 1, nil, "CPU", nil},
		[]any{"BlockStored", []int{5}, nil, []int{-1}, 1, nil, "CPU", nil},
		[]any{"BlockRemoved", []int{5}, nil},
		[]any{},
		42,
	}, 0})
	bt, err := Decode(VLLM, b)
	if err != nil {
		t.Fatal(err)
	}
	if bt.Unknown != 2 || bt.Malformed != 4 || len(bt.Events) != 1 || bt.Events[0].Type != BlockRemoved {
		t.Errorf("unknown %d malformed %d events %+v", bt.Unknown, bt.Malformed, bt.Events)
	}
	if !errors.Is(bt.FirstErr, ErrMalformed) {
		t.Errorf("first error %v", bt.FirstErr)
	}
}

func TestDecodeErrors(t *testing.T) {
	good, _ := msgpack.Marshal([]any{1.0, []any{}})
	deep := bytes.Repeat([]byte{0x91}, 10000)
	for name, b := range map[string][]byte{
		"empty":     nil,
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte(nil), good...), 0),
		"scalar":    {0x05},
		"short":     {0x91, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0},
		"reserved":  {0xc1},
		"deep":      deep,
		"huge len":  {0xdd, 0xff, 0xff, 0xff, 0xff},
	} {
		encs := []Encoding{VLLM, SGLang, DynamoMsgpack}
		if name == "short" { // a list holding one non-RouterEvent is a batch with one skipped event
			encs = encs[:2]
		}
		for _, enc := range encs {
			if _, err := Decode(enc, b); !errors.Is(err, ErrMalformed) {
				t.Errorf("%s %s: err = %v", name, enc, err)
			}
		}
	}
	if _, err := Decode(DynamoJSON, []byte(`{"worker_id":1} x`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("json trailing: %v", err)
	}
}

func TestRandomBytesNeverPanic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dc := NewDecoder()
	for i := 0; i < 2000; i++ {
		b := make([]byte, rng.IntN(1024)+1)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		for _, enc := range []Encoding{VLLM, SGLang, DynamoJSON, DynamoMsgpack} {
			if _, err := dc.Decode(enc, b); err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: error %v does not wrap ErrMalformed", enc, err)
			}
		}
	}
}

func TestDynamo(t *testing.T) {
	js := `[{"worker_id": 7, "event": {"event_id": 3, "dp_rank": 1, "data": {"stored": {"parent_hash": null,
	  "blocks": [{"block_hash": 18446744073709551615, "tokens_hash": 12, "mm_extra_info": null},
	             {"block_hash": 2, "tokens_hash": 13, "mm_extra_info": {"mm_objects": [{"mm_hash": 5, "offsets": [[0, 3]]}]}}]}}}},
	 {"worker_id": 7, "event": {"event_id": 4, "data": {"removed": {"block_hashes": [2]}}}},
	 {"worker_id": 7, "event": {"event_id": 5, "data": "cleared"}},
	 {"worker_id": 7, "event": {"event_id": 6, "data": {"moved": {}}}}]`
	var generic any
	if err := json.Unmarshal([]byte(js), &generic); err != nil {
		t.Fatal(err)
	}
	mp, err := msgpack.Marshal(toMsgpackShape(generic))
	if err != nil {
		t.Fatal(err)
	}
	for enc, b := range map[Encoding][]byte{DynamoJSON: []byte(js), DynamoMsgpack: mp} {
		bt, err := Decode(enc, b)
		if err != nil {
			t.Fatalf("%s: %v", enc, err)
		}
		if len(bt.Events) != 3 || bt.Unknown != 1 {
			t.Fatalf("%s: %+v", enc, bt)
		}
		st := bt.Events[0]
		if st.Type != BlockStored || st.HasParent || st.BlockHashes[0] != 1<<64-1 || st.LocalHashes[1] != 13 || st.WorkerID != 7 || st.DPRank != 1 || st.EventID != 3 {
			t.Errorf("%s stored: %+v", enc, st)
		}
		if bt.Events[1].Type != BlockRemoved || bt.Events[1].BlockHashes[0] != 2 || bt.Events[2].Type != AllBlocksCleared {
			t.Errorf("%s: %+v", enc, bt.Events[1:])
		}
	}
}

// toMsgpackShape turns JSON float64 numbers into uint64 so msgpack carries integers, as rmp_serde does.
func toMsgpackShape(v any) any {
	switch t := v.(type) {
	case []any:
		for i := range t {
			t[i] = toMsgpackShape(t[i])
		}
	case map[string]any:
		for k := range t {
			t[k] = toMsgpackShape(t[k])
		}
	case float64:
		if t >= 1<<63 {
			return uint64(1<<64 - 1)
		}
		return uint64(t)
	}
	return v
}

func FuzzDecode(f *testing.F) {
	for _, r := range goldenEvents(f) {
		f.Add(payload(f, r))
	}
	f.Add([]byte(`[{"worker_id":1,"event":{"event_id":1,"data":"cleared"}}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dc := NewDecoder()
		for _, enc := range []Encoding{VLLM, SGLang, DynamoJSON, DynamoMsgpack} {
			bt, err := dc.Decode(enc, b)
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("%s: error %v does not wrap ErrMalformed", enc, err)
				}
				continue
			}
			if enc == VLLM {
				// Whatever decodes re-encodes, and the re-encoding decodes to the same events.
				enc2, err := EncodeVLLM(bt, ArrayForm, MapForm)
				if err != nil {
					t.Fatalf("re-encoding: %v", err)
				}
				bt2, err := Decode(VLLM, enc2)
				if err != nil || len(bt2.Events) != len(bt.Events) {
					t.Fatalf("re-decoding: %v", err)
				}
			}
		}
	})
}

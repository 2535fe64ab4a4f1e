package normalize

import (
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/kvroute/kvroute/kvevents/codec"
)

// TestAllFormsNormalizeAlike re-encodes every golden batch in the four batch/event form combinations;
// each normalizes to the same entries as the original bytes.
func TestAllFormsNormalizeAlike(t *testing.T) {
	for _, r := range goldenEvents(t) {
		want, _ := json.Marshal(flatten(normalizeHex(t, r.PayloadHex, r.BlockSize)))
		raw, _ := hex.DecodeString(r.PayloadHex)
		bt, err := codec.Decode(codec.VLLM, raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, bf := range []codec.Form{codec.ArrayForm, codec.MapForm} {
			for _, ef := range []codec.Form{codec.ArrayForm, codec.MapForm} {
				enc, err := codec.EncodeVLLM(bt, bf, ef)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := json.Marshal(flatten(normalizeHex(t, hex.EncodeToString(enc), r.BlockSize)))
				if string(got) != string(want) {
					t.Errorf("%s in forms %d/%d: %s, want %s", r.ID, bf, ef, got, want)
				}
			}
		}
	}
}

// FuzzDecodeNormalize: any bytes decode to an error or to a batch that normalizes without panicking,
// one entry per engine hash for every stored event kept.
func FuzzDecodeNormalize(f *testing.F) {
	for _, r := range goldenEvents(f) {
		raw, _ := hex.DecodeString(r.PayloadHex)
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, enc := range []codec.Encoding{codec.VLLM, codec.SGLang, codec.DynamoMsgpack, codec.DynamoJSON} {
			bt, err := codec.Decode(enc, b)
			if err != nil {
				continue
			}
			n, err := New(Config{Blocks: qwen, Encoding: enc, MaxSaltedBlocks: 4})
			if err != nil {
				t.Fatal(err)
			}
			res := n.Apply(bt)
			if len(res.Ops)+res.Skipped+res.Ignored+len(res.Filtered) != len(bt.Events) {
				t.Fatalf("%d ops + %d skipped + %d ignored + %d filtered for %d events", len(res.Ops), res.Skipped, res.Ignored, len(res.Filtered), len(bt.Events))
			}
			if len(n.salts) > 4 || len(n.ring) > 4 {
				t.Fatalf("salt memory over its bound: %d", len(n.salts))
			}
		}
	})
}

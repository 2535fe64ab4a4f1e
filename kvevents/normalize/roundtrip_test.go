package normalize

import (
	"strconv"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/extrakeys"
	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kvevents/codec"
)

// TestRequestSideEqualsEventSide publishes every normalize.jsonl prompt as a worker would (vLLM
// extra_keys from its spans, LoRA and salt included; both key styles and all encodings; the chain split
// over two events so the salt must be carried), then checks that normalization gives the request side's
// golden hashes block for block.
func TestRequestSideEqualsEventSide(t *testing.T) {
	prompts := 0
	for _, r := range goldens.Records[goldens.NormalizeRecord](t, "../../testdata/golden/normalize.jsonl") {
		in := r.Inputs
		spans := make([]blocks.Span, len(in.Spans))
		for i, s := range in.Spans {
			id, _ := strconv.ParseUint(s.Identity, 10, 64)
			spans[i] = blocks.Span{Start: s.Start, End: s.End, Identity: kv.Identity(id)}
		}
		lora, salt := str(in.LoRAName), str(in.CacheSalt)
		bs := in.BlockSize
		nb := len(in.Tokens) / bs
		if nb < 2 {
			continue
		}
		for _, style := range []codec.ExtraKeysStyle{codec.PairKeys, codec.BareKeys} {
			keys := extrakeys.For(bs, len(in.Tokens), spans, lora, salt, style)
			hashes := make([]kv.EngineHash, nb)
			for i := range hashes {
				hashes[i] = kv.EngineHash(1000*prompts + i + 1)
			}
			split := nb / 2
			ev := func(from, to int) codec.Event {
				e := codec.Event{Type: codec.BlockStored, BlockHashes: hashes[from:to], TokenIDs: in.Tokens[from*bs : to*bs],
					BlockSize: bs, Medium: "GPU", HasMedium: true, LoRAName: lora, HasLoRAName: lora != "",
					ExtraKeys: keys[from:to], HasExtraKeys: true}
				if from > 0 {
					e.Parent, e.HasParent = hashes[from-1], true
				}
				return e
			}
			for _, form := range []codec.Form{codec.ArrayForm, codec.MapForm} {
				n, err := New(Config{Blocks: blocks.Config{BlockSize: bs, ImagePad: in.ImagePad, VideoPad: in.VideoPad}, Encoding: codec.VLLM})
				if err != nil {
					t.Fatal(err)
				}
				var got []Stored
				for _, b := range []*codec.Batch{{Events: []codec.Event{ev(0, split)}}, {Events: []codec.Event{ev(split, nb)}}} {
					raw, err := codec.EncodeVLLM(b, codec.ArrayForm, form)
					if err != nil {
						t.Fatal(err)
					}
					dec, err := codec.Decode(codec.VLLM, raw)
					if err != nil {
						t.Fatal(err)
					}
					res := n.Apply(dec)
					if res.Skipped != 0 {
						t.Fatalf("%s: %v", r.ID, res.FirstErr)
					}
					got = append(got, res.Ops[0].Stored...)
				}
				for i, w := range r.Outputs.Blocks {
					if strconv.FormatUint(uint64(got[i].LocalHash), 10) != w.LocalHash || got[i].Kind.String() != w.Kind {
						t.Errorf("%s style %d form %d block %d: %x %v, want %s %s", r.ID, style, form, i, got[i].LocalHash, got[i].Kind, w.LocalHash, w.Kind)
					}
				}
			}
		}
		prompts++
	}
	if prompts < 30 {
		t.Errorf("only %d prompts checked", prompts)
	}
	t.Logf("%d normalize.jsonl prompts: event side equals request side", prompts)
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

package codec_test

import (
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/extrakeys"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kvevents/codec"
)

// benchBatch is one codec.BlockStored of 64 blocks of 16 tokens holding a video (pairs in extra_keys).
func benchBatch() *codec.Batch {
	toks := make([]uint32, 64*16)
	for i := range toks {
		toks[i] = uint32(i * 7 % 150000)
		if i >= 100 && i < 900 && i%100 > 6 {
			toks[i] = 151656
		}
	}
	hashes := make([]kv.EngineHash, 64)
	for i := range hashes {
		hashes[i] = kv.EngineHash(uint64(i) * 0x9e3779b97f4a7c15)
	}
	spans := []blocks.Span{{Start: 100, End: 900, Identity: 0x1234abcd, Kind: blocks.Video}}
	return &codec.Batch{TS: 1.5, Events: []codec.Event{{Type: codec.BlockStored, BlockHashes: hashes, TokenIDs: toks, BlockSize: 16,
		Medium: "GPU", HasMedium: true, HasExtraKeys: true, ExtraKeys: extrakeys.For(16, len(toks), spans, "", "", codec.PairKeys)}}}
}

func BenchmarkDecode(b *testing.B) {
	for _, tc := range []struct {
		name string
		form codec.Form
	}{{"array", codec.ArrayForm}, {"map", codec.MapForm}} {
		b.Run(tc.name, func(b *testing.B) {
			raw, err := codec.EncodeVLLM(benchBatch(), codec.ArrayForm, tc.form)
			if err != nil {
				b.Fatal(err)
			}
			dc := codec.NewDecoder()
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := dc.Decode(codec.VLLM, raw); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*64/b.Elapsed().Seconds(), "blocks/s")
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	bt := benchBatch()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := codec.EncodeVLLM(bt, codec.ArrayForm, codec.MapForm); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*64/b.Elapsed().Seconds(), "blocks/s")
}

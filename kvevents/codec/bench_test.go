package codec

import (
	"testing"

	"github.com/kvroute/kvroute/routing/blocks"
)

// benchBatch is one BlockStored of 64 blocks of 16 tokens holding a video (pairs in extra_keys).
func benchBatch() *Batch {
	toks := make([]uint32, 64*16)
	for i := range toks {
		toks[i] = uint32(i * 7 % 150000)
		if i >= 100 && i < 900 && i%100 > 6 {
			toks[i] = 151656
		}
	}
	hashes := make([]uint64, 64)
	for i := range hashes {
		hashes[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	spans := []blocks.Span{{Start: 100, End: 900, Identity: 0x1234abcd, Kind: blocks.Video}}
	return &Batch{TS: 1.5, Events: []Event{{Type: BlockStored, BlockHashes: hashes, TokenIDs: toks, BlockSize: 16,
		Medium: "GPU", HasMedium: true, HasExtraKeys: true, ExtraKeys: ExtraKeysFor(16, len(toks), spans, "", "", PairKeys)}}}
}

func BenchmarkDecode(b *testing.B) {
	for _, tc := range []struct {
		name string
		form Form
	}{{"array", ArrayForm}, {"map", MapForm}} {
		b.Run(tc.name, func(b *testing.B) {
			raw, err := EncodeVLLM(benchBatch(), ArrayForm, tc.form)
			if err != nil {
				b.Fatal(err)
			}
			dc := NewDecoder()
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := dc.Decode(VLLM, raw); err != nil {
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
		if _, err := EncodeVLLM(bt, ArrayForm, MapForm); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*64/b.Elapsed().Seconds(), "blocks/s")
}

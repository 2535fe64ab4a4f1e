package normalize

import (
	"context"
	"errors"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/extrakeys"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/codec"
)

// BenchmarkApplyPipeline measures the whole events-applied path of one worker stream in one loop, as
// kvevents/subscriber runs it: decode a vLLM batch, normalize it (extra_keys, LocalBlockHash), and apply
// its events to a kv/index Index (Store, Remove, Clear). blocks/s counts stored blocks.
//
//   - golden-array, golden-map: the block-size-16 batches of vllm_events.jsonl in turn (text chains,
//     video pairs, bare strings, cache salts, image+video boundaries, removals, clears).
//   - chain16: new 16-block text chains (no extra_keys), each a new engine-hash chain; the worker's cap
//     of 4096 blocks makes every batch an insert that evicts the oldest leaves.
//   - video64: new 64-block chains holding a video (pair extra_keys), same cap.
//   - hybrid1056: a Qwen3.5-style hybrid worker's batches: per batch a new 4-block chain of 1056-token
//     blocks in the full-attention group 0 (with its kind) and the Mamba group 1's store (its kind,
//     the last hash only, the whole span: skipped by the group rule) and kind-less removal of the
//     previous chain's end (skipped as learned); blocks/s counts the attention blocks indexed.
func BenchmarkApplyPipeline(b *testing.B) {
	for _, form := range []string{"array", "map"} {
		b.Run("golden-"+form, func(b *testing.B) {
			runPipeline(b, goldenPayloads(b, form))
		})
	}
	b.Run("chain16", func(b *testing.B) { runPipeline(b, chainPayloads(b, 1024, 16, false)) })
	b.Run("video64", func(b *testing.B) { runPipeline(b, chainPayloads(b, 256, 64, true)) })
	b.Run("hybrid1056", func(b *testing.B) { runPipelineBS(b, hybridPayloads(b, 256, 4, 1056), 1056) })
}

// hybridPayloads encodes n hybrid batches (see BenchmarkApplyPipeline) of nb blocks of bs tokens.
func hybridPayloads(b *testing.B, n, nb, bs int) [][]byte {
	b.Helper()
	out := make([][]byte, n)
	for c := range out {
		toks := make([]uint32, nb*bs)
		for i := range toks {
			toks[i] = uint32((c*7919 + i*7) % 150000)
		}
		hashes := make([]kv.EngineHash, nb)
		for i := range hashes {
			hashes[i] = kv.EngineHash(uint64(c*nb+i+1) * 0x9e3779b97f4a7c15)
		}
		full := codec.Event{Type: codec.BlockStored, BlockHashes: hashes, TokenIDs: toks, BlockSize: bs, Medium: "GPU", HasMedium: true,
			GroupIdx: 0, HasGroupIdx: true, SpecKind: "full_attention", HasSpecKind: true}
		mamba := codec.Event{Type: codec.BlockStored, BlockHashes: hashes[nb-1:], TokenIDs: toks, BlockSize: bs, Medium: "GPU", HasMedium: true,
			GroupIdx: 1, HasGroupIdx: true, SpecKind: "mamba", HasSpecKind: true}
		evs := []codec.Event{full, mamba}
		if c > 0 {
			evs = append(evs, codec.Event{Type: codec.BlockRemoved, BlockHashes: []kv.EngineHash{kv.EngineHash(uint64(c*nb) * 0x9e3779b97f4a7c15)},
				Medium: "GPU", HasMedium: true, GroupIdx: 1, HasGroupIdx: true})
		}
		raw, err := codec.EncodeVLLM(&codec.Batch{TS: 1.5, Events: evs, HasDPRank: true}, codec.ArrayForm, codec.MapForm)
		if err != nil {
			b.Fatal(err)
		}
		out[c] = raw
	}
	return out
}

// chainPayloads encodes n batches of one BlockStored event each: a new chain of nb blocks of 16
// tokens with unique engine hashes, optionally holding a video (tokens 100..900, pair extra_keys).
func chainPayloads(b *testing.B, n, nb int, video bool) [][]byte {
	b.Helper()
	out := make([][]byte, n)
	for c := range out {
		toks := make([]uint32, nb*16)
		for i := range toks {
			toks[i] = uint32((c*7919 + i*7) % 150000)
			if video && i >= 100 && i < 900 && i%100 > 6 {
				toks[i] = 151656
			}
		}
		hashes := make([]kv.EngineHash, nb)
		for i := range hashes {
			hashes[i] = kv.EngineHash(uint64(c*nb+i+1) * 0x9e3779b97f4a7c15)
		}
		ev := codec.Event{Type: codec.BlockStored, BlockHashes: hashes, TokenIDs: toks, BlockSize: 16, Medium: "GPU", HasMedium: true}
		if video {
			spans := []blocks.Span{{Start: 100, End: 900, Identity: 0x1234abcd + kv.Identity(c), Kind: blocks.Video}}
			ev.ExtraKeys, ev.HasExtraKeys = extrakeys.For(16, len(toks), spans, "", "", codec.PairKeys), true
		}
		raw, err := codec.EncodeVLLM(&codec.Batch{TS: 1.5, Events: []codec.Event{ev}}, codec.ArrayForm, codec.ArrayForm)
		if err != nil {
			b.Fatal(err)
		}
		out[c] = raw
	}
	return out
}

func runPipeline(b *testing.B, payloads [][]byte) { runPipelineBS(b, payloads, qwen.BlockSize) }

// runPipelineBS runs the pipeline for a worker of block size bs.
func runPipelineBS(b *testing.B, payloads [][]byte, bs int) {
	ctx := context.Background()
	ix, err := index.New(&index.Config{MaxBlocksPerWorker: 4096, MaxBlocks: 1 << 20, MaxWorkers: 16})
	if err != nil {
		b.Fatal(err)
	}
	key := index.WorkerKey{ID: "w"}
	dc := codec.NewDecoder()
	cfg := qwen
	cfg.BlockSize = bs
	n, err := New(Config{Blocks: cfg, Encoding: codec.VLLM})
	if err != nil {
		b.Fatal(err)
	}
	var buf []index.StoredBlock
	stored, size := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := payloads[i%len(payloads)]
		bt, err := dc.Decode(codec.VLLM, p)
		if err != nil {
			b.Fatal(err)
		}
		res := n.Apply(bt)
		if res.Skipped != 0 {
			b.Fatal(res.FirstErr)
		}
		for j := range res.Ops {
			op := &res.Ops[j]
			switch op.Type {
			case codec.BlockStored:
				buf = buf[:0]
				for _, s := range op.Stored {
					buf = append(buf, index.StoredBlock{EngineHash: s.EngineHash, Parent: s.ParentEngineHash, HasParent: s.HasParent, LocalHash: s.LocalHash})
				}
				// A golden batch may continue a chain another batch cleared: the subscriber counts
				// that and goes on.
				if err := ix.Store(ctx, key, buf); err != nil && !errors.Is(err, index.ErrUnknownParent) {
					b.Fatal(err)
				}
				stored += len(op.Stored)
			case codec.BlockRemoved:
				ix.Remove(ctx, key, op.Removed)
			case codec.AllBlocksCleared:
				ix.Clear(ctx, key)
			}
		}
		size += len(p)
	}
	b.ReportMetric(float64(stored)/b.Elapsed().Seconds(), "blocks/s")
	b.ReportMetric(float64(size)/b.Elapsed().Seconds()/1e6, "MB/s")
}

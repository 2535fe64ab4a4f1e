package router

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/extrakeys"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/normalize"
)

// TestLargeBlockSizes routes a video request with a long text part to workers of the attention block
// sizes hybrid models use (528, 1056, 2096 tokens): what a worker's KV events index (its expansion
// published as one vLLM BlockStored of that block size, extra_keys as vLLM writes them, read back by
// kvevents/normalize) is exactly what the request side hashes. The worker holding every block gets the
// repeat with overlap = total blocks = floor(tokens / block size); the worker holding all but the last
// block is ranked with exactly one block less; a different clip is credited nothing.
func TestLargeBlockSizes(t *testing.T) {
	long := strings.Repeat("Describe every scene of this video in order, with the colours and the motion. ", 150)
	body := strings.Replace(chat000, "Describe this video.", long, 1)
	for _, bs := range []int{528, 1056, 2096} {
		t.Run(fmt.Sprint(bs), func(t *testing.T) {
			fm := &fakeMedia{identity: map[string]kv.Identity{"https://example.com/clip.mp4": 11, "https://example.com/other.webm": 22}}
			r := newTestRouter(t, fm)
			ws := testWorkers()
			for i := range ws {
				ws[i].BlockSize = bs
			}
			in := &Input{Path: "/v1/chat/completions", Body: []byte(body), Workers: ws}
			cold, err := r.Route(context.Background(), in)
			if err != nil || cold.Fallback != "" {
				t.Fatalf("cold: %v %v %s", err, cold.Fallback, cold.Detail)
			}
			e := r.verify.pending[verifyKey{"qwen", 11}]
			if e == nil {
				t.Fatal("no expansion recorded")
			}
			total := len(e.tokens) / bs
			if cold.TotalBlocks != total || total < 2 || cold.OverlapBlocks != 0 {
				t.Fatalf("cold: total %d (want %d ≥ 2), overlap %d", cold.TotalBlocks, total, cold.OverlapBlocks)
			}
			// The workers' events: sim-b stored every complete block, sim-a all but the last.
			spans := []blocks.Span{{Start: e.start, End: e.end, Identity: 11, Kind: blocks.Video}}
			store := func(id string, nb int) {
				toks := e.tokens[:nb*bs]
				ev := codec.Event{Type: codec.BlockStored, TokenIDs: toks, BlockSize: bs, Medium: "GPU", HasMedium: true,
					GroupIdx: 0, HasGroupIdx: true, SpecKind: "full_attention", HasSpecKind: true}
				for i := 0; i < nb; i++ {
					ev.BlockHashes = append(ev.BlockHashes, kv.EngineHash(uint64(len(id))<<32|uint64(i+1)))
				}
				ev.ExtraKeys, ev.HasExtraKeys = extrakeys.For(bs, len(toks), spans, "", "", codec.PairKeys), true
				raw, err := codec.EncodeVLLM(&codec.Batch{TS: 1, Events: []codec.Event{ev}}, codec.ArrayForm, codec.MapForm)
				if err != nil {
					t.Fatal(err)
				}
				bt, err := codec.Decode(codec.VLLM, raw)
				if err != nil {
					t.Fatal(err)
				}
				n, err := normalize.New(normalize.Config{Blocks: blocks.Config{BlockSize: bs, ImagePad: 151655, VideoPad: 151656}, Encoding: codec.VLLM})
				if err != nil {
					t.Fatal(err)
				}
				res := n.Apply(bt)
				if len(res.Ops) != 1 || len(res.Ops[0].Stored) != nb {
					t.Fatalf("%s: normalized %+v", id, res)
				}
				var sb []index.StoredBlock
				for _, s := range res.Ops[0].Stored {
					sb = append(sb, index.StoredBlock{EngineHash: s.EngineHash, Parent: s.ParentEngineHash, HasParent: s.HasParent, LocalHash: s.LocalHash})
				}
				if err := r.index.Store(context.Background(), index.WorkerKey{ID: id}, sb); err != nil {
					t.Fatal(err)
				}
			}
			store("sim-b", total)
			store("sim-a", total-1)
			warm, err := r.Route(context.Background(), in)
			if err != nil || warm.Fallback != "" {
				t.Fatalf("warm: %v %v", err, warm.Fallback)
			}
			if warm.Chosen == nil || warm.Chosen.WorkerID != "sim-b" || warm.OverlapBlocks != total || warm.TotalBlocks != total {
				t.Fatalf("warm: chosen %+v overlap %d/%d, want sim-b %d/%d", warm.Chosen, warm.OverlapBlocks, warm.TotalBlocks, total, total)
			}
			overlaps := map[string]int{}
			for _, c := range warm.Ranked {
				overlaps[c.WorkerID] = c.OverlapBlocks
			}
			if overlaps["sim-a"] != total-1 || overlaps["sim-b"] != total {
				t.Fatalf("ranked overlaps %v, want sim-a %d, sim-b %d", overlaps, total-1, total)
			}
			other, err := r.Route(context.Background(), &Input{Path: "/v1/chat/completions", Workers: ws,
				Body: []byte(strings.Replace(body, "clip.mp4", "other.webm", 1))})
			if err != nil || other.OverlapBlocks != 0 {
				t.Fatalf("different clip: %v, credited %d blocks", err, other.OverlapBlocks)
			}
		})
	}
}

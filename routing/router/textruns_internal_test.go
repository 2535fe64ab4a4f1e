package router

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/scheduler"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// TestTextChatRunsRouteExactly grows a text conversation by a turn per request through a router
// whose model has the template and segment caches (so from the third request on, earlier turns
// are replayed pieces, encoded by key and hashed from the block memo). After each request, the
// blocks a worker would hold for it, computed on the joined path (Render, EncodePrompt,
// HashBlocks, on a model without caches), are stored for sim-b; routing the same request again
// must credit sim-b with every block. A block hash off anywhere would cut the overlap there.
// Some requests carry a cache_salt (another seed), and workers use block sizes 16 and 7. A second
// conversation repeats the first one's turns after a longer system prompt, so the same keyed
// turns recur at other offsets modulo the block size.
func TestTextChatRunsRouteExactly(t *testing.T) {
	cached, err := model.Load(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	seg := tokenizer.NewSegmentCache(tokenizer.DefaultSegmentCacheBytes)
	cached.Tokenizer.SetSegmentCache(seg)
	cached.Template.SetMessageCache(chat.NewMessageCache(chat.DefaultMessageCacheBytes))
	plain, err := testModel()
	if err != nil {
		t.Fatal(err)
	}
	lm, err := layout.LoadModel(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Fields("the cache routes each block to the worker that holds it <|im_end|> é 数据 \n")
	rng := rand.New(rand.NewPCG(8, 1))
	text := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteString(words[rng.IntN(len(words))])
			sb.WriteByte(' ')
		}
		return sb.String()
	}
	for _, bs := range []int{16, 7} {
		ix, err := index.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := scheduler.New(nil, rand.NewPCG(1, 2))
		if err != nil {
			t.Fatal(err)
		}
		r, err := New(DefaultConfig(), cached, lm, ix, s, &fakeMedia{}, Hooks{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		workers := testWorkers()
		for i := range workers {
			workers[i].BlockSize = bs
		}
		var turns []string
		for range 24 {
			turns = append(turns, text(30+rng.IntN(60)))
		}
		engine := kv.EngineHash(1)
		for conv, system := range []string{text(40), text(43)} {
			msgs := []map[string]any{{"role": "system", "content": system}}
			for step := range 12 {
				msgs = append(msgs, map[string]any{"role": "user", "content": turns[2*step]})
				body := map[string]any{"model": "qwen", "messages": msgs}
				salt := ""
				if step%3 == 2 {
					salt = "tenant-a"
					body["cache_salt"] = salt
				}
				raw, err := json.Marshal(body)
				if err != nil {
					t.Fatal(err)
				}
				in := &Input{Path: "/v1/chat/completions", Body: raw, Workers: workers}
				first, err := r.Route(context.Background(), in)
				if err != nil || first.Fallback != "" {
					t.Fatalf("block size %d step %d: %v %s %s", bs, step, err, first.Fallback, first.Detail)
				}
				want := joinedHashes(t, plain, raw, bs, blocks.SeedFor("", salt))
				if first.TotalBlocks != len(want) {
					t.Fatalf("block size %d step %d: %d blocks, the joined path has %d", bs, step, first.TotalBlocks, len(want))
				}
				var sb []index.StoredBlock
				for i, h := range want {
					sb = append(sb, index.StoredBlock{EngineHash: engine + kv.EngineHash(i), Parent: engine + kv.EngineHash(i) - 1, HasParent: i > 0, LocalHash: h})
				}
				engine += kv.EngineHash(len(want)) + 1
				if err := ix.Store(context.Background(), index.WorkerKey{ID: "sim-b"}, sb); err != nil {
					t.Fatal(err)
				}
				again, err := r.Route(context.Background(), in)
				if err != nil || again.Chosen == nil {
					t.Fatalf("block size %d step %d: %v", bs, step, err)
				}
				// every block of the joined path matches; the engine reuses them all but the last
				// token's (ReuseCapBlocks: one block less when the prompt fills its last block)
				wantOverlap := min(len(want), ReuseCapBlocks("vllm", again.RequestTokens, bs))
				if again.Chosen.WorkerID != "sim-b" || again.OverlapBlocks != wantOverlap || again.RequestTokens < len(want)*bs {
					t.Fatalf("block size %d conversation %d step %d: chose %s with %d of %d blocks (%d tokens), want %d; every block of the joined path should match",
						bs, conv, step, again.Chosen.WorkerID, again.OverlapBlocks, len(want), again.RequestTokens, wantOverlap)
				}
				msgs = append(msgs, map[string]any{"role": "assistant", "content": turns[2*step+1]})
			}
		}
	}
	if st := seg.Stats(); st.Hits == 0 {
		t.Fatalf("the segment cache was not used: %+v", st)
	}
}

// joinedHashes is the block hashes of raw's prompt on the path that joins everything.
func joinedHashes(t *testing.T, m *model.Model, raw []byte, bs int, seed uint64) []kv.BlockHash {
	t.Helper()
	req, err := chat.ParseRequest(raw)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := m.Template.Render(req)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := m.EncodePrompt(prompt, model.AddSpecialTokens(req, false))
	if err != nil {
		t.Fatal(err)
	}
	h, err := blocks.HashBlocks(blocks.Config{BlockSize: bs}, seed, ids, nil)
	if err != nil {
		t.Fatal(fmt.Errorf("hashing: %w", err))
	}
	return h
}

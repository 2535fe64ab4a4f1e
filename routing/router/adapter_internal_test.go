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
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/chat"
)

// goldenTenantSeed is the seed of LoRA "tenant-42" in testdata/golden/block_hash.jsonl (bh_seed_006,
// computed by the golden generator as 1337 + xxh3_64("tenant-42", 0)).
const goldenTenantSeed = 17185577506994870600

func adapterWorkers() []Worker {
	return []Worker{
		{ID: "w-a", Endpoint: "127.0.0.1:9001", Model: "qwen", Engine: kv.EngineVLLM, BlockSize: 16,
			Adapters: []Adapter{{Name: "sql", BaseModel: "qwen"}, {Name: "tenant-42", BaseModel: "qwen"}}},
		{ID: "w-b", Endpoint: "127.0.0.1:9002", Model: "qwen", Engine: kv.EngineVLLM, BlockSize: 16},
		{ID: "w-c", Endpoint: "127.0.0.1:9003", Model: "qwen", Engine: kv.EngineVLLM, BlockSize: 16,
			Adapters: []Adapter{{Name: "tenant-42", BaseModel: "qwen"}}},
		{ID: "w-d", Endpoint: "127.0.0.1:9004", Model: "llama", Engine: kv.EngineVLLM, BlockSize: 16},
	}
}

func adapterChat(model string) []byte {
	var sb strings.Builder
	for i := range 40 {
		fmt.Fprintf(&sb, "line %d of the tool output the agent reads again each turn. ", i)
	}
	return fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"system","content":"You are a SQL agent."},{"role":"user","content":%q}]}`, model, sb.String())
}

// storeEvent indexes, for worker id, the BlockStored a vLLM worker publishes after serving body
// under LoRA lora ("" for the base model): extra_keys with the LoRA name first in every block and
// lora_name set, as vLLM's generate_block_hash_extra_keys and kv_events.BlockStored do, normalized
// the way the router's subscriber normalizes it. It returns the stored local hashes.
func storeEvent(t *testing.T, r *Router, id string, body []byte, lora string, engineBase kv.EngineHash) []kv.BlockHash {
	t.Helper()
	req, err := chat.ParseRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	_, toks, err := r.model.PromptTokens(req)
	if err != nil {
		t.Fatal(err)
	}
	nb := len(toks) / 16
	ev := codec.Event{Type: codec.BlockStored, TokenIDs: toks[:nb*16], BlockSize: 16, Medium: "GPU", HasMedium: true,
		ExtraKeys: extrakeys.For(16, len(toks), nil, lora, "", codec.PairKeys), HasExtraKeys: true,
		LoRAName: lora, HasLoRAName: lora != ""}
	for i := range nb {
		ev.BlockHashes = append(ev.BlockHashes, engineBase+kv.EngineHash(i))
	}
	n, err := normalize.New(normalize.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	out := n.Apply(&codec.Batch{Events: []codec.Event{ev}})
	if out.Skipped != 0 || len(out.Ops) != 1 {
		t.Fatalf("normalizing: %+v", out)
	}
	var sb []index.StoredBlock
	var hs []kv.BlockHash
	for _, s := range out.Ops[0].Stored {
		sb = append(sb, index.StoredBlock{EngineHash: s.EngineHash, Parent: s.ParentEngineHash, HasParent: s.HasParent, LocalHash: s.LocalHash})
		hs = append(hs, s.LocalHash)
	}
	if err := r.index.Store(context.Background(), index.WorkerKey{ID: id}, sb); err != nil {
		t.Fatal(err)
	}
	return hs
}

func candidateIDs(res *Result) []string {
	var ids []string
	for _, c := range res.Ranked {
		ids = append(ids, c.WorkerID)
	}
	return ids
}

// TestAdapterRequestHashedLikeVLLM: a request whose model names an adapter is hashed with the
// adapter's name (the golden seed of "tenant-42"), exactly as the worker's BlockStored events with
// lora_name normalize; it goes only to the workers listing the adapter and prefers the one holding
// its blocks; the same prompt on the base model shares no block with it.
func TestAdapterRequestHashedLikeVLLM(t *testing.T) {
	r := newTestRouter(t, nil)
	ws := adapterWorkers()
	r.SetWorkers(ws)
	ctx := context.Background()

	stored := storeEvent(t, r, "w-c", adapterChat("tenant-42"), "tenant-42", 1000)
	// The event side under the golden seed, hash for hash (block 0 also against the golden block hash's rule).
	req, _ := chat.ParseRequest(adapterChat("tenant-42"))
	_, toks, _ := r.model.PromptTokens(req)
	if len(stored) < 10 || len(stored) != len(toks)/16 {
		t.Fatalf("%d stored blocks for %d tokens", len(stored), len(toks))
	}
	for i, h := range stored {
		if want := blocks.HashTokens(toks[i*16:(i+1)*16], goldenTenantSeed); h != want {
			t.Fatalf("event block %d: local hash %016x, want %016x under the golden seed", i, uint64(h), uint64(want))
		}
	}

	res, err := r.Route(ctx, &Input{Path: "/v1/chat/completions", Body: adapterChat("tenant-42"), Workers: ws})
	if err != nil {
		t.Fatal(err)
	}
	if res.Fallback != "" || res.Adapter != "tenant-42" || res.AdapterBase != "qwen" {
		t.Fatalf("fallback %q (%s), adapter %q base %q", res.Fallback, res.Detail, res.Adapter, res.AdapterBase)
	}
	if got := strings.Join(candidateIDs(res), ","); got != "w-c,w-a" {
		t.Fatalf("candidates %s, want w-c (holder) then w-a: only the workers listing the adapter", got)
	}
	if res.TotalBlocks != len(stored) || res.OverlapBlocks != len(stored) || res.Chosen.WorkerID != "w-c" {
		t.Fatalf("chosen %s overlap %d/%d, want w-c with all %d", res.Chosen.WorkerID, res.OverlapBlocks, res.TotalBlocks, len(stored))
	}

	// The same prompt on the base model: every worker of qwen is a candidate, none holds a block
	// (w-c's blocks are the adapter's).
	base, err := r.Route(ctx, &Input{Path: "/v1/chat/completions", Body: adapterChat("qwen"), Workers: ws})
	if err != nil {
		t.Fatal(err)
	}
	if base.Fallback != "" || base.Adapter != "" || strings.Join(candidateIDs(base), ",") == "" || len(base.Ranked) != 3 {
		t.Fatalf("base: fallback %q adapter %q candidates %v", base.Fallback, base.Adapter, candidateIDs(base))
	}
	if base.OverlapOn("w-c") != 0 || base.TotalBlocks != len(stored) {
		t.Fatalf("base request credited %d adapter blocks on w-c (total %d)", base.OverlapOn("w-c"), base.TotalBlocks)
	}
	// Base blocks on w-b credit the base request fully and the adapter request nothing.
	storeEvent(t, r, "w-b", adapterChat("qwen"), "", 5000)
	base, _ = r.Route(ctx, &Input{Path: "/v1/chat/completions", Body: adapterChat("qwen"), Workers: ws})
	if base.Chosen.WorkerID != "w-b" || base.OverlapBlocks != len(stored) {
		t.Fatalf("base: chosen %s overlap %d, want w-b with %d", base.Chosen.WorkerID, base.OverlapBlocks, len(stored))
	}
	// Another adapter ("sql", on w-a only) shares nothing with tenant-42's blocks.
	sql, _ := r.Route(ctx, &Input{Path: "/v1/chat/completions", Body: adapterChat("sql"), Workers: ws})
	if sql.Fallback != "" || strings.Join(candidateIDs(sql), ",") != "w-a" || sql.OverlapBlocks != 0 {
		t.Fatalf("sql: fallback %q candidates %v overlap %d", sql.Fallback, candidateIDs(sql), sql.OverlapBlocks)
	}
}

// TestAdapterNotServed: an adapter an earlier worker list named and no worker lists now goes on
// load to the workers of its base model (adapter_not_served); when its base model has no worker,
// to all; a name never listed as an adapter keeps the unknown model's fallback.
func TestAdapterNotServed(t *testing.T) {
	r := newTestRouter(t, nil)
	ws := adapterWorkers()
	r.SetWorkers(ws)
	without := adapterWorkers()
	without[0].Adapters = without[0].Adapters[:1] // w-a unloads tenant-42
	without[2].Adapters = nil                     // w-c too
	r.SetWorkers(without)
	ctx := context.Background()
	res, err := r.Route(ctx, &Input{Path: "/v1/chat/completions", Body: adapterChat("tenant-42"), Workers: without})
	if err != nil {
		t.Fatal(err)
	}
	if res.Fallback != reason.AdapterNotServed || !res.Fallback.LoadOnly() || res.Adapter != "tenant-42" || res.AdapterBase != "qwen" {
		t.Fatalf("fallback %q adapter %q base %q", res.Fallback, res.Adapter, res.AdapterBase)
	}
	if got := strings.Join(candidateIDs(res), ","); len(res.Ranked) != 3 || strings.Contains(got, "w-d") {
		t.Fatalf("candidates %s, want the three workers of qwen", got)
	}
	// Its base model gone: every worker.
	llamaOnly := []Worker{ws[3]}
	res, _ = r.Route(ctx, &Input{Path: "/v1/chat/completions", Body: adapterChat("tenant-42"), Workers: llamaOnly})
	if res.Fallback != reason.AdapterNotServed || len(res.Ranked) != 1 {
		t.Fatalf("no qwen worker: fallback %q candidates %v", res.Fallback, candidateIDs(res))
	}
	// A name no list ever named.
	res, _ = r.Route(ctx, &Input{Path: "/v1/chat/completions", Body: adapterChat("nope"), Workers: without})
	if res.Fallback != reason.IndexUnavailable || res.Adapter != "" || len(res.Ranked) != 4 {
		t.Fatalf("unknown model: fallback %q adapter %q candidates %v", res.Fallback, res.Adapter, candidateIDs(res))
	}
}

// TestAdapterMemoryBounded: the adapters remembered from worker lists stay at most
// maxRememberedAdapters, the oldest forgotten first.
func TestAdapterMemoryBounded(t *testing.T) {
	var m adapterMemory
	n := maxRememberedAdapters + 100
	for i := range n {
		m.learn([]Worker{{ID: "w", Model: "qwen", Adapters: []Adapter{{Name: fmt.Sprintf("a%d", i), BaseModel: "qwen"}}}})
	}
	if len(m.bases) != maxRememberedAdapters || len(m.order) != maxRememberedAdapters {
		t.Fatalf("remembered %d (order %d), want %d", len(m.bases), len(m.order), maxRememberedAdapters)
	}
	if _, ok := m.base("a0"); ok {
		t.Error("the oldest adapter is still remembered")
	}
	if b, ok := m.base(fmt.Sprintf("a%d", n-1)); !ok || b != "qwen" {
		t.Errorf("the newest adapter: %q %v", b, ok)
	}
}

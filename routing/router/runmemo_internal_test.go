package router

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/kv"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// TestBlockMemoInNotes: the router's block memo lives in the notes of a prompt's keyed runs and
// is what HashTextRuns reads when a run recurs with the same key, alignment, block size and seed;
// with another seed, or ids of another tokenizer load (another RunKey), the blocks are hashed
// afresh. Every result is compared with HashBlocks over the joined ids. A memo entry is altered
// on purpose to show which hashes come from it.
func TestBlockMemoInNotes(t *testing.T) {
	m, err := model.Load(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	m.Tokenizer.SetSegmentCache(tokenizer.NewSegmentCache(tokenizer.DefaultSegmentCacheBytes))
	m.Template.SetMessageCache(chat.NewMessageCache(chat.DefaultMessageCacheBytes))
	msgs := []map[string]any{{"role": "system", "content": strings.Repeat("Route by the cache. ", 20)}}
	for i := range 5 {
		msgs = append(msgs, map[string]any{"role": "user", "content": strings.Repeat("Which worker holds block "+string(rune('a'+i))+"? ", 15)},
			map[string]any{"role": "assistant", "content": strings.Repeat("The one with the overlap. ", 12)})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": "And now?"})
	raw, err := json.Marshal(map[string]any{"model": "qwen", "messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	encode := func(m *model.Model) tokenizer.Runs {
		t.Helper()
		req, err := chat.ParseRequestLimited(raw, chat.Limits{MaxMessages: chat.DefaultMaxMessages, MaxParts: chat.DefaultMaxParts,
			Messages: m.Template.MessageCache()})
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Template.RenderPrompt(req)
		if err != nil {
			t.Fatal(err)
		}
		runs, err := m.EncodePromptRuns(p, false)
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	const bs = 16
	hashes := func(runs tokenizer.Runs, seed uint64) (got, want []kv.BlockHash) {
		t.Helper()
		got, n, err := HashTextRuns(blocks.Config{BlockSize: bs}, seed, runs)
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint32
		for _, r := range runs.IDs {
			ids = append(ids, r...)
		}
		if want, err = blocks.HashBlocks(blocks.Config{BlockSize: bs}, seed, ids, nil); err != nil || n != len(ids) {
			t.Fatalf("HashBlocks: %v; HashTextRuns counted %d ids of %d", err, n, len(ids))
		}
		return got, want
	}
	seed := blocks.SeedFor("", "")
	var runs tokenizer.Runs
	for range 3 { // recorded on the second request, replayed (noted, keyed) from the third
		runs = encode(m)
		if got, want := hashes(runs, seed); !slices.Equal(got, want) {
			t.Fatalf("hashes of the runs differ from HashBlocks of the joined ids")
		}
	}
	// The keyed runs' notes hold their block memo now; pick one with inner blocks and alter it.
	victim, first := -1, 0
	off := 0
	for i, r := range runs.IDs {
		k := runs.Keys[i]
		if k != (tokenizer.RunKey{}) {
			bm, _ := k.Note.Load(blockMemoKey).(*blockMemo)
			if len(r) >= 2*bs && (bm == nil || bm.key != k || bm.blockSize != bs || bm.seed != seed || len(bm.hashes) == 0) {
				t.Fatalf("run %d (%d ids) keeps no block memo for its key: %+v", i, len(r), bm)
			}
			if victim < 0 && bm != nil && len(bm.hashes) > 0 {
				victim, first = i, (off+bm.skip)/bs
				bm.hashes[0] ^= 1 // the memo is the router's own; only this test writes into it
			}
		}
		off += len(r)
	}
	if victim < 0 {
		t.Fatalf("no keyed run with a block memo among %d runs", len(runs.IDs))
	}
	got, want := hashes(encode(m), seed)
	for i := range want {
		if (got[i] != want[i]) != (i == first) {
			t.Fatalf("block %d: %x, joined %x; only block %d (the altered memo of run %d) should differ", i, got[i], want[i], first, victim)
		}
	}
	// Another seed (a cache_salt) is hashed afresh and replaces the entry.
	if got, want := hashes(encode(m), blocks.SeedFor("", "tenant")); !slices.Equal(got, want) {
		t.Fatal("another seed reused the memo")
	}
	// The same notes under another load of the tokenizer: other keys, hashed afresh.
	runs = encode(m)
	bm := runs.Keys[victim].Note.Load(blockMemoKey).(*blockMemo)
	bm.seed = seed
	bm.hashes[0] ^= 1
	other, err := tokenizer.Load(modelDir + "/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	other.SetSegmentCache(tokenizer.NewSegmentCache(tokenizer.DefaultSegmentCacheBytes))
	m2 := *m
	m2.Tokenizer = other
	runs2 := encode(&m2)
	if runs2.Keys[victim].Note != runs.Keys[victim].Note || runs2.Keys[victim] == runs.Keys[victim] {
		t.Fatalf("run %d: the second tokenizer's key should name the same note and differ", victim)
	}
	if got, want := hashes(runs2, seed); !slices.Equal(got, want) {
		t.Fatal("a run of another tokenizer load reused the first one's memo")
	}
}

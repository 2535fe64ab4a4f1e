package model_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// cachedModel loads dir with the caches caddymodule sets (template and segment cache).
func cachedModel(t *testing.T, dir string) *model.Model {
	t.Helper()
	m, err := model.Load(dir)
	if err != nil {
		t.Fatalf("%v (run `make deps` for the tokenizer folders)", err)
	}
	m.Tokenizer.SetSegmentCache(tokenizer.NewSegmentCache(tokenizer.DefaultSegmentCacheBytes))
	m.Template.SetMessageCache(chat.NewMessageCache(chat.DefaultMessageCacheBytes))
	return m
}

// piecesIDs is the router's text-chat path: the prompt rendered in pieces and encoded by them
// (EncodePromptRuns), the runs' ids joined.
func piecesIDs(m *model.Model, raw []byte) ([]uint32, error) {
	req, err := chat.ParseRequestLimited(raw, chat.Limits{MaxMessages: chat.DefaultMaxMessages, MaxParts: chat.DefaultMaxParts,
		Messages: m.Template.MessageCache()})
	if err != nil {
		return nil, err
	}
	p, err := m.Template.RenderPrompt(req)
	if err != nil {
		return nil, err
	}
	runs, err := m.EncodePromptRuns(p, model.AddSpecialTokens(req, false))
	if err != nil {
		return nil, err
	}
	var ids []uint32
	for _, r := range runs.IDs {
		ids = append(ids, r...)
	}
	return ids, nil
}

// TestGoldenChatPromptPieces: every chat case of chat_template.jsonl, three passes (the later
// ones replay recorded turns as keyed pieces), encodes to the ids of tokens.jsonl.
func TestGoldenChatPromptPieces(t *testing.T) {
	m := cachedModel(t, goldenDir+"qwen3vl-test-model")
	want := map[string][]uint32{}
	for _, line := range goldens.Lines(t, goldenDir+"tokens.jsonl") {
		var r struct {
			Kind   string          `json:"kind"`
			Source json.RawMessage `json:"source"`
			IDs    []uint32        `json:"ids"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		var src string
		if r.Kind != "chat_prompt" || json.Unmarshal(r.Source, &src) != nil {
			continue
		}
		want[src] = r.IDs
	}
	lines := goldens.Lines(t, goldenDir+"chat_template.jsonl")
	matched := 0
	for pass := range 3 {
		for _, line := range lines {
			var c struct {
				ID      string          `json:"id"`
				Request json.RawMessage `json:"request"`
			}
			if err := json.Unmarshal(line, &c); err != nil {
				t.Fatal(err)
			}
			ids, err := piecesIDs(m, c.Request)
			if err != nil {
				t.Fatalf("pass %d %s: %v", pass, c.ID, err)
			}
			if !slices.Equal(ids, want[c.ID]) {
				t.Fatalf("pass %d %s: ids\n got %v\nwant %v", pass, c.ID, ids, want[c.ID])
			}
			matched++
		}
	}
	if matched != 3*58 {
		t.Fatalf("%d of %d cases matched", matched, 3*58)
	}
}

// TestConversationPiecesMatchJoined grows conversations by a turn per request on every model
// folder with a chat template (the Qwen3-VL test model and the tokenizer folders `make deps`
// fetches), as a chat client does, and compares the pieces path with the joined prompt encoded
// by a model without caches: the ids must be identical on every request.
func TestConversationPiecesMatchJoined(t *testing.T) {
	dirs := []string{goldenDir + "qwen3vl-test-model"}
	for _, name := range []string{"qwen35_pretok", "llama3", "gemma3", "deepseek_v3"} {
		dirs = append(dirs, filepath.Join("../../testdata/tokenizers", name))
	}
	words := []string{"the", "cache", "routes", "<|im_end|>", "<think>", "</think>", "\n", "é", "数据", "<|", "<s>", "[INST]", "<start_of_turn>", "  "}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			m := cachedModel(t, dir)
			plain, err := model.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			text := func(n int) string {
				var sb strings.Builder
				for i := 0; i < n; i++ {
					sb.WriteString(words[rng.IntN(len(words))])
					sb.WriteByte(' ')
				}
				return sb.String()
			}
			for conv := range 3 {
				msgs := []map[string]any{{"role": "system", "content": text(30)}}
				for step := range 14 {
					msgs = append(msgs, map[string]any{"role": "user", "content": text(40 + rng.IntN(40))})
					raw, err := json.Marshal(map[string]any{"model": "m", "messages": msgs})
					if err != nil {
						t.Fatal(err)
					}
					got, gotErr := piecesIDs(m, raw)
					req, err := chat.ParseRequest(raw)
					if err != nil {
						t.Fatal(err)
					}
					prompt, err := plain.Template.Render(req)
					var want []uint32
					if err == nil {
						want, err = plain.EncodePrompt(prompt, model.AddSpecialTokens(req, false))
					}
					if fmt.Sprint(gotErr) != fmt.Sprint(err) || !slices.Equal(got, want) {
						t.Fatalf("conversation %d step %d: pieces %v (err %v), joined %v (err %v)", conv, step, got, gotErr, want, err)
					}
					msgs = append(msgs, map[string]any{"role": "assistant", "content": text(20 + rng.IntN(20))})
				}
			}
			if st := m.Tokenizer.SegmentCache().Stats(); st.Hits == 0 {
				t.Fatalf("nothing reused: %+v", st)
			}
		})
	}
}

// TestPieceNotesNameTheirTokenizer: a recorded turn's note keeps the ids of the tokenizer that
// encoded it. The same template (and so the same notes) used with another tokenizer must
// encode afresh, not reuse the first tokenizer's ids.
func TestPieceNotesNameTheirTokenizer(t *testing.T) {
	m := cachedModel(t, goldenDir+"qwen3vl-test-model")
	other, err := tokenizer.Load("../../testdata/tokenizers/llama3/tokenizer.json")
	if err != nil {
		t.Fatalf("%v (run `make deps`)", err)
	}
	other.SetSegmentCache(tokenizer.NewSegmentCache(tokenizer.DefaultSegmentCacheBytes))
	m2 := *m
	m2.Tokenizer = other
	msgs := []map[string]any{{"role": "system", "content": strings.Repeat("Route by the cache. ", 20)}}
	for i := range 4 {
		msgs = append(msgs, map[string]any{"role": "user", "content": strings.Repeat(fmt.Sprintf("Question %d about blocks. ", i), 20)},
			map[string]any{"role": "assistant", "content": strings.Repeat("An answer. ", 20)})
	}
	raw, err := json.Marshal(map[string]any{"model": "m", "messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // recorded on the second request, replayed (and noted) on the third
		if _, err := piecesIDs(m, raw); err != nil {
			t.Fatal(err)
		}
	}
	got, err := piecesIDs(&m2, raw)
	if err != nil {
		t.Fatal(err)
	}
	req, err := chat.ParseRequest(raw)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := m.Template.Render(req)
	if err != nil {
		t.Fatal(err)
	}
	if want := other.Encode(prompt); !slices.Equal(got, want) {
		t.Fatalf("the second tokenizer reused the first one's ids:\n got %v\nwant %v", got, want)
	}
}

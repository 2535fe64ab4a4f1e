package chat_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/memtest"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/internal/jinja"
	"github.com/kvroute/kvroute/routing/chat"
)

// TestMessageCacheGoldens renders the 58 golden chat requests (Jinja2 under vLLM's conversion,
// chat_template.jsonl) through a template with a message cache, three passes in different
// orders: the later passes convert nothing and replay recorded iterations, and every render
// must still be byte-identical to the golden text.
func TestMessageCacheGoldens(t *testing.T) {
	tmpl, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		t.Fatal(err)
	}
	mc := chat.NewMessageCache(chat.DefaultMessageCacheBytes)
	tmpl.SetMessageCache(mc)
	var cases []chatCase
	for _, line := range goldens.Lines(t, goldenDir+"chat_template.jsonl") {
		var c chatCase
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	replays0, _ := jinja.MemoCounts()
	for pass := range 3 {
		for i := range cases {
			c := cases[i]
			if pass == 1 {
				c = cases[len(cases)-1-i]
			}
			req, err := chat.ParseRequest(c.Request)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(req)
			if err != nil || got != c.Rendered {
				t.Fatalf("pass %d, %s: err %v\n got %q\nwant %q", pass, c.ID, err, got, c.Rendered)
			}
		}
	}
	replays, _ := jinja.MemoCounts()
	st := mc.Stats()
	if st.Hits == 0 || replays == replays0 {
		t.Fatalf("the cache was not used: %+v, %d replays", st, replays-replays0)
	}
	t.Logf("cache %+v; %d iterations replayed", st, replays-replays0)
}

// templateUnderTest is one chat template the differential test renders.
type templateUnderTest struct {
	name string
	load func() (*chat.Template, error)
}

func templatesUnderTest(t *testing.T) []templateUnderTest {
	qwen3Text := func() (*chat.Template, error) {
		src, err := os.ReadFile(goldenDir + "qwen3-text-chat-template.jinja")
		if err != nil {
			return nil, err
		}
		return chat.NewTemplate(string(src), map[string]any{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
	}
	dir := func(d string) func() (*chat.Template, error) {
		return func() (*chat.Template, error) { return chat.LoadTemplate(d) }
	}
	out := []templateUnderTest{
		{"qwen3vl", dir(goldenDir + "qwen3vl-test-model")},
		{"qwen3-text", qwen3Text},
		{"nemotron", dir("../../testdata/nemotron-test-model")},
	}
	// The tokenizer folders `make deps` fetches carry their models' chat templates (Qwen3.5,
	// Llama 3, Gemma 3, DeepSeek-V3; gpt-oss's has none).
	for _, name := range []string{"qwen35_pretok", "llama3", "gemma3", "deepseek_v3"} {
		d := filepath.Join("../../testdata/tokenizers", name)
		if _, err := os.Stat(filepath.Join(d, "tokenizer_config.json")); err != nil {
			t.Fatalf("%s: %v (run `make deps`)", d, err)
		}
		out = append(out, templateUnderTest{name, dir(d)})
	}
	return out
}

// conversationGen builds random chat conversations with the shapes chat templates branch on:
// system turns, user text and part lists (text, image, video), assistant turns with <think>
// blocks, reasoning fields and tool calls, tool results.
type conversationGen struct {
	r     *rand.Rand
	parts bool // user turns may carry media parts
}

func (g *conversationGen) words(n int) string {
	w := []string{"the", "clip", "shows", "a", "red", "car", "turning", "left", "at", "dusk", "why", "tool", "answer", "\n", "é", "数据"}
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w[g.r.IntN(len(w))])
	}
	return b.String()
}

func (g *conversationGen) message(prev string) map[string]any {
	switch {
	case prev == "assistant-call":
		return map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "{\"result\": \"" + g.words(3) + "\"}"}
	case prev == "" && g.r.IntN(2) == 0:
		return map[string]any{"role": "system", "content": "You are careful. " + g.words(8)}
	case prev == "user":
		m := map[string]any{"role": "assistant", "content": g.words(10 + g.r.IntN(30))}
		switch g.r.IntN(5) {
		case 0:
			m["content"] = "<think>\n" + g.words(6) + "\n</think>\n\n" + g.words(8)
		case 1:
			m["reasoning"] = g.words(6)
		case 2:
			m["content"] = ""
			m["tool_calls"] = []any{map[string]any{"id": "call_1", "type": "function",
				"function": map[string]any{"name": "search_video", "arguments": `{"query": "` + g.words(2) + `"}`}}}
		}
		return m
	default:
		if g.parts && g.r.IntN(3) == 0 {
			parts := []any{map[string]any{"type": "text", "text": g.words(5)}}
			switch g.r.IntN(2) {
			case 0:
				parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/a.png"}})
			default:
				parts = append(parts, map[string]any{"type": "video_url", "video_url": map[string]any{"url": "https://example.com/a.mp4"}})
			}
			return map[string]any{"role": "user", "content": parts}
		}
		return map[string]any{"role": "user", "content": g.words(5 + g.r.IntN(40))}
	}
}

func roleOf(m map[string]any) string {
	if m["role"] == "assistant" && m["tool_calls"] != nil {
		return "assistant-call"
	}
	return m["role"].(string)
}

var testTools = []any{map[string]any{"type": "function", "function": map[string]any{"name": "search_video",
	"description": "Find an event.", "parameters": map[string]any{"type": "object",
		"properties": map[string]any{"query": map[string]any{"type": "string"}}}}}}

// TestMessageCacheMatchesUncached grows random conversations by one to three turns per request,
// as a chat client does, and renders every request with a template that has a message cache
// (earlier turns hit, the engine replays their iterations) and with one that has none. The
// outputs (or the errors) must be identical on every template the project carries, across
// changing chat_template_kwargs, tools and add_generation_prompt.
func TestMessageCacheMatchesUncached(t *testing.T) {
	for _, tut := range templatesUnderTest(t) {
		t.Run(tut.name, func(t *testing.T) {
			cached, err := tut.load()
			if err != nil {
				t.Fatal(err)
			}
			plain, err := tut.load()
			if err != nil {
				t.Fatal(err)
			}
			mc := chat.NewMessageCache(chat.DefaultMessageCacheBytes)
			cached.SetMessageCache(mc)
			replays0, _ := jinja.MemoCounts()
			renders, rendered, replayedPieces := 0, 0, 0
			for conv := range 8 {
				g := &conversationGen{r: rand.New(rand.NewPCG(uint64(conv), 7)), parts: conv%2 == 1}
				var msgs []map[string]any
				prev := ""
				for step := range 12 {
					for range 1 + g.r.IntN(3) {
						m := g.message(prev)
						msgs = append(msgs, m)
						prev = roleOf(m)
					}
					body := map[string]any{"model": "m", "messages": msgs}
					if g.r.IntN(3) == 0 {
						body["tools"] = testTools
					}
					kw := map[string]any{}
					switch g.r.IntN(3) {
					case 0:
						kw["enable_thinking"] = false
					case 1:
						kw["enable_thinking"] = true
					}
					if g.r.IntN(4) == 0 {
						kw["add_vision_id"] = true
					}
					body["chat_template_kwargs"] = kw
					if prev == "assistant" && g.r.IntN(2) == 0 {
						body["add_generation_prompt"] = false
					}
					raw, err := json.Marshal(body)
					if err != nil {
						t.Fatal(err)
					}
					req, err := chat.ParseRequest(raw)
					if err != nil {
						t.Fatal(err)
					}
					creq, err := chat.ParseRequestLimited(raw, chat.Limits{MaxMessages: chat.DefaultMaxMessages,
						MaxParts: chat.DefaultMaxParts, Messages: mc}) // earlier messages: decoded nodes from the cache
					if err != nil {
						t.Fatal(err)
					}
					want, wantErr := plain.Render(req)
					got, gotErr := cached.Render(creq)
					renders++
					if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
						t.Fatalf("conversation %d step %d (%d messages): cached %q (err %v)\nuncached %q (err %v)\nbody %s",
							conv, step, len(msgs), got, gotErr, want, wantErr, raw)
					}
					// The same render in pieces: the texts join to the same prompt, and each
					// replayed piece carries a note.
					p, pErr := cached.RenderPrompt(creq)
					if p.String() != want || fmt.Sprint(pErr) != fmt.Sprint(wantErr) {
						t.Fatalf("conversation %d step %d: pieces join to %q (err %v), want %q (err %v)", conv, step, p.String(), pErr, want, wantErr)
					}
					for _, x := range p {
						if x.Replayed {
							replayedPieces++
							if x.Note == nil {
								t.Fatalf("conversation %d step %d: replayed piece %q has no note", conv, step, x.Text)
							}
						}
					}
					if wantErr == nil {
						rendered++
					}
				}
			}
			replays, _ := jinja.MemoCounts()
			st := mc.Stats()
			t.Logf("%d requests (%d rendered), cache %+v, %d iterations replayed, %d replayed pieces", renders, rendered, st, replays-replays0, replayedPieces)
			if rendered > 0 && (st.Hits == 0 || replayedPieces == 0) {
				t.Fatalf("no cache hits (%d) or replayed pieces (%d) over %d rendered requests", st.Hits, replayedPieces, rendered)
			}
		})
	}
}

// TestMessageCacheBound: a cache of B bytes holds at most B bytes of charges however many
// distinct messages pass through it, and the live heap after GC stays within that charge plus
// a fixed allowance (measured, not a peak: runtime.GC then HeapAlloc, after N requests).
func TestMessageCacheBound(t *testing.T) {
	tmpl, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		t.Fatal(err)
	}
	const budget = 4 << 20
	mc := chat.NewMessageCache(budget)
	tmpl.SetMessageCache(mc)
	heap := memtest.LiveHeap
	base := heap()
	g := &conversationGen{r: rand.New(rand.NewPCG(1, 2))}
	var peak int64
	for i := range 3000 {
		body, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{
			map[string]any{"role": "user", "content": fmt.Sprintf("%d ", i) + g.words(400)},
			map[string]any{"role": "assistant", "content": g.words(200)},
			map[string]any{"role": "user", "content": "again " + g.words(300)},
		}})
		req, err := chat.ParseRequestLimited(body, chat.Limits{Messages: mc}) // decoded nodes are kept too
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tmpl.Render(req); err != nil {
			t.Fatal(err)
		}
		if i%500 == 499 {
			st := mc.Stats()
			if st.Bytes > budget {
				t.Fatalf("after %d requests the cache charges %d bytes over a %d budget", i+1, st.Bytes, budget)
			}
			peak = max(peak, heap()-min(base, heap()))
		}
	}
	st := mc.Stats()
	if st.Entries < 100 || st.Misses < 3000 {
		t.Fatalf("cache did not fill: %+v", st)
	}
	// The charge over-estimates what an entry holds; the allowance covers the engine's and
	// the test's own garbage-free state (templates, tokenizer-free), measured at ~1 MiB.
	if limit := int64(budget) + 2<<20; peak > limit {
		t.Fatalf("live heap grew by %d bytes with a %d-byte cache (limit %d)", peak, budget, limit)
	}
	t.Logf("cache %+v; live heap growth %d bytes", st, peak)
}

// TestMessageCacheConcurrentRenders renders one growing conversation from several goroutines at
// once through one cached template (run under -race): shared values are only read, recorded
// iterations are published whole, and every render equals the uncached one.
func TestMessageCacheConcurrentRenders(t *testing.T) {
	cached, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		t.Fatal(err)
	}
	cached.SetMessageCache(chat.NewMessageCache(chat.DefaultMessageCacheBytes))
	g := &conversationGen{r: rand.New(rand.NewPCG(5, 5)), parts: true}
	var bodies [][]byte
	var msgs []map[string]any
	prev := ""
	for range 10 {
		m := g.message(prev)
		msgs, prev = append(msgs, m), roleOf(m)
		b, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
		bodies = append(bodies, b)
	}
	want := make([]string, len(bodies))
	for i, b := range bodies {
		req, _ := chat.ParseRequest(b)
		want[i], _ = plain.Render(req)
	}
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			for round := range 5 {
				for i := range bodies {
					k := (i + w + round) % len(bodies)
					req, err := chat.ParseRequestLimited(bodies[k], chat.Limits{Messages: cached.MessageCache()})
					if err == nil {
						var got string
						got, err = cached.Render(req)
						if err == nil && got != want[k] {
							err = fmt.Errorf("body %d: got %q, want %q", k, got, want[k])
						}
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestToolCacheReplays: an agent's tools, sent again with every request, are converted once and
// the template's loop over them (tool | tojson) is replayed; a changed tool is converted and
// rendered again. Every render equals the uncached one.
func TestToolCacheReplays(t *testing.T) {
	for _, tut := range templatesUnderTest(t) {
		t.Run(tut.name, func(t *testing.T) {
			cached, err := tut.load()
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := tut.load()
			cached.SetMessageCache(chat.NewMessageCache(chat.DefaultMessageCacheBytes))
			tool := func(name, desc string) any {
				return map[string]any{"type": "function", "function": map[string]any{"name": name, "description": desc,
					"parameters": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string", "description": strings.Repeat("x ", 50)}}}}}
			}
			var replays []uint64
			first := []any{tool("a", "one"), tool("b", "two"), tool("c", "three")}
			changed := []any{tool("a", "one"), tool("b", "CHANGED"), tool("c", "three")}
			for i, tools := range [][]any{first, first, changed, changed, changed} {
				body, _ := json.Marshal(map[string]any{"model": "m", "tools": tools,
					"messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("question %d", i)}}})
				req, err := chat.ParseRequest(body)
				if err != nil {
					t.Fatal(err)
				}
				r0, _ := jinja.MemoCounts()
				got, gotErr := cached.Render(req)
				r1, _ := jinja.MemoCounts()
				want, wantErr := plain.Render(req)
				if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Fatalf("request %d: cached %q (%v)\nuncached %q (%v)", i, got, gotErr, want, wantErr)
				}
				replays = append(replays, r1-r0)
			}
			t.Logf("replays per request: %v", replays)
			// A tool is recorded on its second request and replayed from its third (the first
			// sight of a message or tool is not recorded: a cold document costs no copy).
			if tut.name == "qwen3vl" && fmt.Sprint(replays) != "[0 0 2 2 3]" {
				t.Fatalf("qwen3vl: replayed %v iterations, want [0 0 2 2 3] (the tools loop)", replays)
			}
		})
	}
}

// TestMessageCacheBoundManyValues: messages whose tool call arguments decode to many small values
// (the operator test sent 100 000 empty objects per message and measured 14× the budget live) are
// charged for their values, so the live heap after GC stays within the budget plus a fixed
// allowance for every shape.
func TestMessageCacheBoundManyValues(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: caches messages whose tool calls decode to 5 000-10 000 values, four shapes, and measures the live heap after GC, ~2 s")
	}
	heap := memtest.LiveHeap
	shapes := map[string]func(i int) string{
		"empty objects": func(i int) string { return "[" + strings.Repeat("{},", 5000) + fmt.Sprintf("{\"i\":%d}]", i) },
		"empty lists":   func(i int) string { return "[" + strings.Repeat("[],", 5000) + fmt.Sprintf("[%d]]", i) },
		"numbers":       func(i int) string { return "[" + strings.Repeat("1,", 5000) + fmt.Sprintf("%d]", i) },
		"object keys": func(i int) string {
			var b strings.Builder
			b.WriteString("{")
			for k := range 10000 {
				fmt.Fprintf(&b, "\"k%d\":%d,", k, k)
			}
			fmt.Fprintf(&b, "\"i\":%d}", i)
			return b.String()
		},
	}
	const budget = 8 << 20
	for name, args := range shapes {
		t.Run(name, func(t *testing.T) {
			tmpl, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
			if err != nil {
				t.Fatal(err)
			}
			mc := chat.NewMessageCache(budget)
			tmpl.SetMessageCache(mc)
			base := heap()
			var peak int64
			for i := range 60 {
				body, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{
					map[string]any{"role": "user", "content": "call it"},
					map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "c", "type": "function",
						"function": map[string]any{"name": "f", "arguments": args(i)}}}},
					map[string]any{"role": "tool", "tool_call_id": "c", "content": "done"},
				}})
				req, err := chat.ParseRequestLimited(body, chat.Limits{Messages: mc})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tmpl.Render(req); err != nil {
					t.Fatal(err)
				}
				if i%10 == 9 {
					peak = max(peak, heap()-base)
				}
			}
			st := mc.Stats()
			if st.Bytes > budget {
				t.Fatalf("charged %d bytes over a %d budget", st.Bytes, budget)
			}
			if limit := int64(budget) + 4<<20; peak > limit {
				t.Fatalf("live heap grew by %d bytes with a %d-byte cache (limit %d); cache %+v", peak, budget, limit, st)
			}
			t.Logf("cache %+v; live heap growth %d bytes", st, peak)
		})
	}
}

// TestRecordedIterationsKeepNoConversation: the recorded iteration of a tool message, whose
// template condition reads the previous message through messages[loop.index0 - 1], keeps none
// of that render's messages alive (the fresh operator test saw ~6 MB per conversation retained:
// the condition's replaced reads stayed in the spare capacity of the stored dependency slice).
// 20 conversations, each with a tool call whose arguments decode to 50 000 values, are rendered
// twice (the second time records); the live heap after GC stays within the cache budget.
func TestRecordedIterationsKeepNoConversation(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: renders 20 conversations with 50 000-value tool calls twice and measures the live heap after GC, ~3 s")
	}
	tmpl, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		t.Fatal(err)
	}
	const budget = 8 << 20
	mc := chat.NewMessageCache(budget)
	tmpl.SetMessageCache(mc)
	h0 := memtest.LiveHeap()
	for pass := range 2 {
		for i := range 20 {
			args := fmt.Sprintf(`{"n":%d,"a":[`, i) + strings.Repeat("{},", 49999) + "{}]}"
			body, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{
				map[string]any{"role": "user", "content": fmt.Sprintf("call the tool %d", i)},
				map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": fmt.Sprintf("c%d", i),
					"type": "function", "function": map[string]any{"name": "f", "arguments": args}}}},
				map[string]any{"role": "tool", "tool_call_id": fmt.Sprintf("c%d", i), "content": "ok"},
				map[string]any{"role": "user", "content": "thanks"},
			}})
			req, err := chat.ParseRequestLimited(body, chat.Limits{Messages: mc})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tmpl.Render(req); err != nil {
				t.Fatal(err)
			}
		}
		if grew := memtest.LiveHeap() - h0; grew > budget+4<<20 {
			t.Fatalf("pass %d: live heap grew by %d KiB with a %d KiB cache", pass, grew>>10, budget>>10)
		}
	}
}

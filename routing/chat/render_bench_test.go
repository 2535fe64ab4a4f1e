package chat_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/routing/chat"
)

// chatBody4k builds a multi-turn chat request with a video, tools and a tool call whose
// rendered Qwen3-VL prompt is about 4,000 tokens (about 17,000 bytes of English text).
func chatBody4k() []byte {
	sentence := "The quick brown fox jumps over the lazy dog while the camera pans slowly across the field. "
	var msgs []map[string]any
	msgs = append(msgs, map[string]any{"role": "system", "content": "You are a careful video analyst."})
	for i := 0; i < 13; i++ {
		msgs = append(msgs, map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": fmt.Sprintf("Turn %d. ", i) + strings.Repeat(sentence, 8)},
		}})
		msgs = append(msgs, map[string]any{"role": "assistant", "content": strings.Repeat(sentence, 8)})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "video_url", "video_url": map[string]any{"url": "https://example.com/clip.mp4"}},
		map[string]any{"type": "text", "text": "What happens at the end?"},
	}})
	body, _ := json.Marshal(map[string]any{"model": "qwen3-vl", "messages": msgs, "tools": []any{
		map[string]any{"type": "function", "function": map[string]any{"name": "search_video", "description": "Find an event.",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}}}},
	}})
	return body
}

func BenchmarkRender4k(b *testing.B) {
	tmpl, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		b.Fatal(err)
	}
	body := chatBody4k()
	req, err := chat.ParseRequest(body)
	if err != nil || req.SchemaErr != nil {
		b.Fatal(err, req.SchemaErr)
	}
	out, err := tmpl.Render(req)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(out)), "prompt_bytes")
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tmpl.Render(req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseRequest4k(b *testing.B) {
	body := chatBody4k()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := chat.ParseRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// chatBodyLong builds the bench/proxy multiturn100k shape: a system prompt and 80 turns (user
// ~1,500 tokens, assistant ~500 tokens of common words, a newline every 17 words), about
// 160k tokens and 900 kB of body.
func chatBodyLong() []byte {
	words := strings.Fields("the of and to in is was for on that with as by at from his her an which are or be this had not but have they were one all their has more")
	doc := func(seed, n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				if i%17 == 0 {
					b.WriteString(".\n")
				} else {
					b.WriteByte(' ')
				}
			}
			b.WriteString(words[(seed*7919+i*31+i*i)%len(words)])
		}
		return b.String()
	}
	msgs := []map[string]any{{"role": "system", "content": "You are a careful assistant.\n" + doc(1, 1000)}}
	for i := range 80 {
		msgs = append(msgs, map[string]any{"role": "user", "content": doc(2*i+2, 1500)})
		msgs = append(msgs, map[string]any{"role": "assistant", "content": doc(2*i+3, 500)})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": doc(999, 1500)})
	body, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 1, "messages": msgs})
	return body
}

func BenchmarkRenderLong(b *testing.B) { benchRenderLong(b, false) }

func BenchmarkParseRequestConversation(b *testing.B) {
	body := chatBodyLong()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := chat.ParseRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderLongCached is BenchmarkRenderLong through a message cache: after the first
// renders every message is a cache hit and every loop iteration a replay, so this is what the
// earlier turns of a growing conversation cost.
func BenchmarkRenderLongCached(b *testing.B) { benchRenderLong(b, true) }

// BenchmarkRenderLongPieces is BenchmarkRenderLongCached rendering in pieces (RenderPrompt), as
// the router renders a text chat: the replayed turns are not copied.
func BenchmarkRenderLongPieces(b *testing.B) { benchRenderLong(b, true, true) }

// benchRenderLong renders chatBodyLong's request once per op, with or without a message cache,
// joined (Render) or in pieces (RenderPrompt).
func benchRenderLong(b *testing.B, cached bool, pieces ...bool) {
	tmpl, err := chat.LoadTemplate(goldenDir + "qwen3vl-test-model")
	if err != nil {
		b.Fatal(err)
	}
	if cached {
		tmpl.SetMessageCache(chat.NewMessageCache(chat.DefaultMessageCacheBytes))
	}
	req, err := chat.ParseRequest(chatBodyLong())
	if err != nil || req.SchemaErr != nil {
		b.Fatal(err, req.SchemaErr)
	}
	out, err := tmpl.Render(req)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if len(pieces) > 0 {
			_, err = tmpl.RenderPrompt(req)
		} else {
			_, err = tmpl.Render(req)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

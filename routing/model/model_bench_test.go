package model_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit"
	"github.com/kvroute/kvroute/routing/chat"
)

// body4k is a multi-turn chat with a video and a tool whose prompt is about 4,000 tokens.
func body4k() []byte {
	sentence := "The quick brown fox jumps over the lazy dog while the camera pans slowly across the field. "
	msgs := []map[string]any{{"role": "system", "content": "You are a careful video analyst."}}
	for i := 0; i < 13; i++ {
		msgs = append(msgs,
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("Turn %d. ", i) + strings.Repeat(sentence, 8)}}},
			map[string]any{"role": "assistant", "content": strings.Repeat(sentence, 8)})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "video_url", "video_url": map[string]any{"url": "https://example.com/clip.mp4"}},
		map[string]any{"type": "text", "text": "What happens at the end?"},
	}})
	body, _ := json.Marshal(map[string]any{"model": "qwen3-vl", "messages": msgs})
	return body
}

// BenchmarkPromptTokens4k measures parse + render + tokenize of a ~4k-token chat request.
func BenchmarkPromptTokens4k(b *testing.B) {
	m := testModel(b)
	body := body4k()
	_, _, ids := testkit.Prompt(b, m, body)
	b.ReportAllocs()
	for b.Loop() {
		req, _ := chat.ParseRequest(body)
		if _, _, err := m.PromptTokens(req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ids)), "tokens")
}

package apis_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/routing/apis"
)

// agentBody is a Responses request of n turns (a ~1.5k-word user message, the assistant's text, a
// function call and its output per turn), about 100k tokens at n = 40.
func agentBody(n int) []byte {
	doc := func(i, words int) string {
		var b strings.Builder
		for w := 0; w < words; w++ {
			fmt.Fprintf(&b, "word%d ", (i*31+w)%997)
		}
		return b.String()
	}
	var input []any
	for i := 0; i < n; i++ {
		input = append(input, map[string]any{"role": "user", "content": doc(i, 1500)},
			map[string]any{"type": "message", "role": "assistant", "status": "completed", "id": "m",
				"content": []any{map[string]any{"type": "output_text", "text": doc(i+1, 200), "annotations": []any{}}}},
			map[string]any{"type": "function_call", "call_id": fmt.Sprint("c", i), "name": "read_file", "arguments": `{"path":"a.go"}`},
			map[string]any{"type": "function_call_output", "call_id": fmt.Sprint("c", i), "output": doc(i+2, 500)})
	}
	b, _ := json.Marshal(map[string]any{"model": "m", "instructions": "Be brief.", "input": input})
	return b
}

// BenchmarkFromResponses: the conversion of a ~100k-token agent turn (parse, convert, chat body).
func BenchmarkFromResponses(b *testing.B) {
	body := agentBody(40)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r, err := apis.FromResponses(body, apis.ResponsesOptions{})
		if err != nil {
			b.Fatal(err)
		}
		_ = r.Form.Body()
	}
}

func BenchmarkParse(b *testing.B) {
	body := agentBody(40)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := apis.Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConverterResponses: the cached conversion of the same ~100k-token agent turn (every
// item seen before: the cost of a replayed conversation).
func BenchmarkConverterResponses(b *testing.B) {
	body := agentBody(40)
	c := apis.NewConverter(64 << 20)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		_, chat, err := c.ResponsesChat(body, apis.ResponsesOptions{})
		if err != nil {
			b.Fatal(err)
		}
		apis.ReleaseChatBody(chat) // as the router does

	}
}

// BenchmarkConverterGrowing: the cached conversion of an agent conversation growing by one turn
// (four new items) per op from ~100k tokens, as bench/proxy's responses100k sends it; one warm-up
// turn first. Run with a fixed count (-benchtime 60x): the bodies are built up front.
func BenchmarkConverterGrowing(b *testing.B) {
	// A fixed conversation of growingTurns turns, replayed from a fresh converter every
	// growingTurns iterations (untimed), so the cost per op does not grow with b.N.
	const growingTurns = 64
	bodies := make([][]byte, growingTurns+1)
	for i := range bodies {
		bodies[i] = agentBody(40 + i)
	}
	var c *apis.Converter
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % growingTurns
		if k == 0 {
			b.StopTimer()
			c = apis.NewConverter(64 << 20)
			if _, _, err := c.ResponsesChat(bodies[0], apis.ResponsesOptions{}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		_, chat, err := c.ResponsesChat(bodies[k+1], apis.ResponsesOptions{})
		if err != nil {
			b.Fatal(err)
		}
		apis.ReleaseChatBody(chat)
	}
}

package router

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/routing/apis"
	"github.com/kvroute/kvroute/routing/chat"
)

// agentTurn is a Responses request of n agent turns and the chat body vLLM builds from it.
func agentTurn(tb testing.TB, n int) (responses, chatBody []byte) {
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
			map[string]any{"type": "function_call", "call_id": fmt.Sprint("c", i), "name": "read_file", "arguments": `{"path":"a.go"}`},
			map[string]any{"type": "function_call_output", "call_id": fmt.Sprint("c", i), "output": doc(i+2, 500)})
	}
	responses, _ = json.Marshal(map[string]any{"model": "qwen", "instructions": "Be brief.", "input": input})
	r, err := apis.FromResponses(responses, apis.ResponsesOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return responses, r.Form.Body()
}

// BenchmarkRouteAgentTurn routes a ~100k-token agent turn on /v1/responses and its chat form on
// /v1/chat/completions: the difference is the conversion's cost on the request path.
func BenchmarkRouteAgentTurn(b *testing.B) {
	resp, chatBody := agentTurn(b, 40)
	for _, c := range []struct {
		name, path string
		body       []byte
	}{{"responses", "/v1/responses", resp}, {"chat", "/v1/chat/completions", chatBody}} {
		b.Run(c.name, func(b *testing.B) {
			r := newTestRouter(b, &fakeMedia{})
			if r.model.Template.MessageCache() == nil {
				r.model.Template.SetMessageCache(chat.NewMessageCache(256 << 20)) // as Caddy runs it
			}
			in := &Input{Path: c.path, Body: c.body, Workers: testWorkers()}
			for i := range in.Workers {
				in.Workers[i].Model = "qwen"
			}
			for b.Loop() {
				if res, err := r.Route(context.Background(), in); err != nil || res.Fallback != "" {
					b.Fatal(err, res.Fallback, res.Detail)
				}
			}
		})
	}
}

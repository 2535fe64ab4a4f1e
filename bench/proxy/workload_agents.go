package main

import (
	"encoding/json"
	"fmt"
)

// The agent loops of issue 25: a ~100k-token conversation with tools on /v1/responses (the whole
// conversation each turn, as agents without previous_response_id send it) and on /v1/messages,
// growing by one turn (a ~1.5k-token user message, the assistant's text and a tool call, a ~500-token
// tool result) per request, one conversation per client.

var agentWorkloads = []workload{
	{
		name:  "responses100k",
		path:  "/v1/responses",
		about: "100k-token Responses agent loop with tools (function_call / function_call_output items), the whole input each turn",
		build: func(g *docGen, clients, per int, _ string) [][][]byte {
			tools := []any{map[string]any{"type": "function", "name": "read_file", "description": "Read a file.",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}}
			return agentLoop(clients, func(c int) [][]byte {
				var input []any
				var out [][]byte
				seed := uint64(3<<32) + uint64(c)<<20
				body := func() []byte {
					return mustMarshal(map[string]any{"model": "m", "instructions": systemPrompt, "input": input, "tools": tools})
				}
				for n := 0; ; n++ {
					seed += 4
					call := fmt.Sprintf("call_%d", n)
					input = append(input, map[string]any{"role": "user", "content": g.doc(seed, 1500)})
					if n >= 40 {
						out = append(out, body())
						if len(out) == per {
							return out
						}
					}
					input = append(input,
						map[string]any{"type": "message", "role": "assistant", "status": "completed", "id": fmt.Sprintf("msg_%d", n),
							"content": []any{map[string]any{"type": "output_text", "text": g.doc(seed+1, 200), "annotations": []any{}}}},
						map[string]any{"type": "function_call", "call_id": call, "name": "read_file", "arguments": `{"path":"a.go"}`},
						map[string]any{"type": "function_call_output", "call_id": call, "output": g.doc(seed+2, 500)})
				}
			})
		},
	},
	{
		name:  "messages100k",
		path:  "/v1/messages",
		about: "100k-token Anthropic Messages agent loop with tool_use / tool_result blocks",
		build: func(g *docGen, clients, per int, _ string) [][][]byte {
			tools := []any{map[string]any{"name": "read_file", "description": "Read a file.",
				"input_schema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}}
			return agentLoop(clients, func(c int) [][]byte {
				var msgs []any
				var out [][]byte
				seed := uint64(4<<32) + uint64(c)<<20
				for n := 0; ; n++ {
					seed += 4
					id := fmt.Sprintf("toolu_%d", n)
					msgs = append(msgs, map[string]any{"role": "user", "content": g.doc(seed, 1500)})
					if n >= 40 {
						out = append(out, mustMarshal(map[string]any{"model": "m", "max_tokens": 1, "system": systemPrompt, "messages": msgs, "tools": tools}))
						if len(out) == per {
							return out
						}
					}
					msgs = append(msgs,
						map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": g.doc(seed+1, 200)},
							map[string]any{"type": "tool_use", "id": id, "name": "read_file", "input": map[string]any{"path": "a.go"}}}},
						map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": g.doc(seed+2, 500)}}})
				}
			})
		},
	},
}

// agentLoop builds each client's requests with conv.
func agentLoop(clients int, conv func(c int) [][]byte) [][][]byte {
	out := make([][][]byte, clients)
	for c := range out {
		out[c] = conv(c)
	}
	return out
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

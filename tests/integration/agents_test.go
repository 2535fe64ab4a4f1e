package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/kvevents/respmap"
)

// The agent APIs through Caddy (issue 25): /v1/responses and /v1/messages agent loops with tools
// routed by the chat form vLLM builds, and stored responses pinned to their worker.

var agentTools = []map[string]any{{"type": "function", "name": "read_file", "description": "Read a file of the repository.",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []string{"path"}}}}

var anthropicTools = []map[string]any{{"name": "read_file", "description": "Read a file of the repository.",
	"input_schema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []string{"path"}}}}

// outputText is the text of a Responses answer's first output message, and its id.
func outputText(t *testing.T, a answer) (id, text string) {
	t.Helper()
	var r struct {
		ID     string `json:"id"`
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(a.body, &r); err != nil || r.ID == "" || len(r.Output) == 0 || len(r.Output[0].Content) == 0 {
		t.Fatalf("not a Responses answer (%v): %.300s", err, a.body)
	}
	return r.ID, r.Output[0].Content[0].Text
}

// checkTurn asserts, from turn 2 on, that kvroute's predicted overlap equals the blocks the
// simulator found cached and grows turn by turn.
func checkTurn(t *testing.T, turn int, a answer, prev *int) {
	t.Helper()
	a.mustOK(t)
	if a.fallback != "" {
		t.Fatalf("turn %d: fallback %q", turn, a.fallback)
	}
	if turn >= 2 {
		if a.overlap != a.hitBlocks {
			t.Fatalf("turn %d: predicted overlap %d, the worker hit %d blocks", turn, a.overlap, a.hitBlocks)
		}
		if a.overlap <= *prev {
			t.Fatalf("turn %d: overlap %d did not grow from %d", turn, a.overlap, *prev)
		}
	}
	*prev = a.overlap
}

func TestAgentLoops(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: runs Responses and Messages agent loops of several turns through Caddy with a reload, ~2 s")
	}
	h := startHarness(t, []simSpec{{ID: "ag-a", Model: "qwen"}, {ID: "ag-b", Model: "qwen"}, {ID: "ag-c", Model: "qwen"}},
		harnessOpts{})
	const instructions = "You are a coding agent. Use the tools to read files before answering."

	t.Run("responses, whole conversation each turn", func(t *testing.T) {
		input := []any{}
		prev := 0
		for turn := 1; turn <= 20; turn++ {
			input = append(input, map[string]any{"role": "user", "content": longText(fmt.Sprintf("Turn %d of the task.", turn), 40)})
			body := mustJSON(t, map[string]any{"model": "qwen", "instructions": instructions, "input": input, "tools": agentTools, "store": false})
			a := h.post(t, "/v1/responses", body)
			checkTurn(t, turn, a, &prev)
			_, text := outputText(t, a)
			call := fmt.Sprintf("call_%d", turn)
			input = append(input,
				map[string]any{"type": "message", "role": "assistant", "status": "completed", "id": fmt.Sprintf("msg_%d", turn),
					"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}},
				map[string]any{"type": "function_call", "call_id": call, "name": "read_file", "arguments": fmt.Sprintf(`{"path":"src/file%d.go"}`, turn)},
				map[string]any{"type": "function_call_output", "call_id": call, "output": longText(fmt.Sprintf("package file%d", turn), 30)})
			h.waitEvents(t)
		}
		t.Logf("20 turns: final overlap %d blocks", prev)
	})

	t.Run("messages with tool_use and tool_result", func(t *testing.T) {
		msgs := []any{}
		prev := 0
		for turn := 1; turn <= 20; turn++ {
			msgs = append(msgs, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": longText(fmt.Sprintf("Step %d.", turn), 40)}}})
			body := mustJSON(t, map[string]any{"model": "qwen", "max_tokens": 8, "system": instructions, "messages": msgs, "tools": anthropicTools})
			a := h.post(t, "/v1/messages", body)
			checkTurn(t, turn, a, &prev)
			var r struct {
				Content []struct{ Text string } `json:"content"`
				Usage   struct {
					CacheRead int `json:"cache_read_input_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(a.body, &r); err != nil || len(r.Content) == 0 {
				t.Fatalf("turn %d: %v %.200s", turn, err, a.body)
			}
			if r.Usage.CacheRead != a.hitBlocks*blockSize {
				t.Fatalf("turn %d: cache_read_input_tokens %d, hit %d blocks", turn, r.Usage.CacheRead, a.hitBlocks)
			}
			id := fmt.Sprintf("toolu_%02d", turn)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": r.Content[0].Text},
					map[string]any{"type": "tool_use", "id": id, "name": "read_file", "input": map[string]any{"path": fmt.Sprintf("src/é%d.go", turn)}}}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": longText("contents", 20)}}})
			h.waitEvents(t)
		}
		t.Logf("20 turns: final overlap %d blocks", prev)
	})

	var stored, storedWorker string
	t.Run("responses with previous_response_id stay on the storing worker", func(t *testing.T) {
		a := h.post(t, "/v1/responses", mustJSON(t, map[string]any{"model": "qwen", "instructions": instructions, "tools": agentTools,
			"input": longText("Start the refactoring task.", 60)})).mustOK(t)
		id, _ := outputText(t, a)
		storedWorker, stored = a.worker, id
		lastHit := -1
		for turn := 2; turn <= 20; turn++ {
			call := fmt.Sprintf("pcall_%d", turn)
			body := mustJSON(t, map[string]any{"model": "qwen", "instructions": instructions, "tools": agentTools, "previous_response_id": id,
				"input": []any{
					map[string]any{"type": "function_call", "call_id": call, "name": "read_file", "arguments": `{"path":"main.go"}`},
					map[string]any{"type": "function_call_output", "call_id": call, "output": longText("file", 20)},
					map[string]any{"role": "user", "content": fmt.Sprintf("Continue with step %d.", turn)}}})
			a := h.post(t, "/v1/responses", body)
			if a.status != 200 || a.worker != storedWorker {
				t.Fatalf("turn %d: status %d on %q, the chain is stored on %s: %.200s", turn, a.status, a.worker, storedWorker, a.body)
			}
			if a.hitBlocks <= lastHit {
				t.Fatalf("turn %d: the worker's hit %d did not grow from %d", turn, a.hitBlocks, lastHit)
			}
			lastHit = a.hitBlocks
			id, _ = outputText(t, a)
			stored = id
		}
		// GET, cancel and DELETE of the stored response go to the same worker
		for _, c := range []struct {
			method, path string
			want         int
		}{{http.MethodGet, "/v1/responses/" + id, 200}, {http.MethodPost, "/v1/responses/" + id + "/cancel", 400}} {
			res := h.do(t, c.method, c.path)
			if res.status != c.want || res.worker != storedWorker {
				t.Fatalf("%s %s: %d on %q, want %d on %s: %.200s", c.method, c.path, res.status, res.worker, c.want, storedWorker, res.body)
			}
		}
	})

	t.Run("the bucket holds it for a replica started later", func(t *testing.T) {
		st := runningApp(t).NATS()
		kv, err := respmap.OpenBucket(context.Background(), st.JetStream(), 1, respmap.DefaultTTL, nil)
		if err != nil {
			t.Fatal(err)
		}
		late := respmap.New(0, 0, nil) // a new replica: empty local map
		defer late.Close()
		late.Attach(kv)
		w, src, ok, err := late.Lookup(context.Background(), stored)
		if err != nil || !ok || w != storedWorker || src != respmap.SourceBucket {
			t.Fatalf("late replica: %q %q %v %v, want %s from the bucket", w, src, ok, err, storedWorker)
		}
	})

	t.Run("after a Caddy reload the follow-up still reaches its worker", func(t *testing.T) {
		h.reload(t, harnessOpts{appOpts: "\t\tapis {\n\t\t\tresponse_ttl 2h\n\t\t}\n"})
		a := h.post(t, "/v1/responses", mustJSON(t, map[string]any{"model": "qwen", "previous_response_id": stored, "input": "One more step."}))
		if a.status != 200 || a.worker != storedWorker {
			t.Fatalf("after reload: %d on %q, want %s: %.200s", a.status, a.worker, storedWorker, a.body)
		}
		stored, _ = outputText(t, a)
	})

	t.Run("unknown and lost responses get response_worker_unavailable", func(t *testing.T) {
		for _, a := range []answer{
			h.post(t, "/v1/responses", mustJSON(t, map[string]any{"model": "qwen", "previous_response_id": "resp_never_seen", "input": "x"})),
			h.do(t, http.MethodGet, "/v1/responses/resp_never_seen"),
		} {
			wantWorkerUnavailable(t, a)
		}
		// the worker holding the chain dies (its registry record still there): the follow-up is
		// answered by kvroute, not sent to another worker, which would answer 404
		h.sims[storedWorker].ts.Close()
		others := map[string]int64{}
		for id, w := range h.sims {
			others[id] = w.srv.Requests()
		}
		a := h.post(t, "/v1/responses", mustJSON(t, map[string]any{"model": "qwen", "previous_response_id": stored, "input": "Still there?"}))
		wantWorkerUnavailable(t, a)
		a = h.post(t, "/v1/responses", mustJSON(t, map[string]any{"model": "qwen", "previous_response_id": stored, "input": "Still there?"}))
		wantWorkerUnavailable(t, a)
		for id, w := range h.sims {
			if id != storedWorker && w.srv.Requests() != others[id] {
				t.Fatalf("worker %s got the follow-up of a response stored on %s", id, storedWorker)
			}
		}
	})
}

func wantWorkerUnavailable(t *testing.T, a answer) {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &e); err != nil || a.status != http.StatusNotFound || e.Error.Code != "response_worker_unavailable" || e.Error.Message == "" {
		t.Fatalf("status %d body %.300s: want 404 response_worker_unavailable", a.status, a.body)
	}
}

// do sends a bodyless request through Caddy.
func (h *harness) do(t *testing.T, method, path string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, h.base+path, nil)
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, body: b, worker: res.Header.Get("X-Kvroute-Worker"), header: res.Header,
		fallback: strings.TrimSpace(res.Header.Get("X-Kvroute-Fallback"))}
}

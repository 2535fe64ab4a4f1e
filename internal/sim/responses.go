package sim

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/kvroute/kvroute/routing/apis"
)

// handleResponses serves POST /v1/responses like vLLM's OpenAIServingResponses with the store on:
// a previous_response_id turn gets the stored conversation inserted after the instructions (the
// stored messages without system ones, then the stored output), an unknown id is a 404.
func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	body, info, ok := s.readAPIBody(w, r)
	if !ok {
		return
	}
	rr, err := apis.FromResponses(body, apis.ResponsesOptions{StoreEnabled: true})
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	var top struct {
		Instructions    string `json:"instructions"`
		Stream          bool   `json:"stream"`
		MaxOutputTokens int    `json:"max_output_tokens"`
	}
	_ = json.Unmarshal(body, &top)
	f := rr.Form
	if rr.PreviousResponseID != "" {
		prev, ok := s.store.get(rr.PreviousResponseID)
		if !ok {
			writeAPIError(w, http.StatusNotFound, "invalid_request_error", "Response with id '"+rr.PreviousResponseID+"' not found.")
			return
		}
		at := 0
		if top.Instructions != "" {
			at = 1
		}
		var hist []*apis.Value
		for _, m := range prev.messages {
			if m.Get("role").StrOr("") != "system" {
				hist = append(hist, m)
			}
		}
		hist = append(hist, apis.Obj(apis.M("role", apis.Str("assistant")), apis.M("content", apis.Str(prev.output))))
		f.Messages = append(append(append([]*apis.Value{}, f.Messages[:at]...), hist...), f.Messages[at:]...)
	}
	id := newID("resp_", info.RequestID)
	msgID := newID("msg_", info.RequestID)
	created := time.Now().Unix()
	object := func(status, text string, g *generation, tokens int) map[string]any {
		var content []any
		if status == "completed" {
			content = []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}
		}
		o := map[string]any{"id": id, "object": "response", "created_at": created, "model": s.cfg.Model,
			"status": status, "store": rr.Store, "previous_response_id": nullable(rr.PreviousResponseID),
			"output": []any{}, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}}
		if content != nil {
			o["output"] = []any{map[string]any{"id": msgID, "type": "message", "role": "assistant", "status": "completed", "content": content}}
		}
		if g != nil {
			o["usage"] = map[string]any{"input_tokens": g.promptTokens, "input_tokens_details": map[string]any{"cached_tokens": g.cachedTokens},
				"output_tokens": tokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": g.promptTokens + tokens}
		}
		return o
	}
	seq := 0
	ev := func(typ string, fields map[string]any) bool {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		return sse(w, typ, fields)
	}
	start := func(g *generation) bool {
		return ev("response.created", map[string]any{"response": object("in_progress", "", nil, 0)}) &&
			ev("response.in_progress", map[string]any{"response": object("in_progress", "", nil, 0)}) &&
			ev("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"id": msgID, "type": "message", "role": "assistant", "status": "in_progress", "content": []any{}}}) &&
			ev("response.content_part.added", map[string]any{"output_index": 0, "content_index": 0, "item_id": msgID, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	}
	delta := func(_ int, t string) bool {
		return ev("response.output_text.delta", map[string]any{"output_index": 0, "content_index": 0, "item_id": msgID, "delta": t, "logprobs": []any{}})
	}
	run, ok := s.runAPI(r.Context(), w, info, f.Body(), top.MaxOutputTokens, top.Stream, start, delta)
	if !ok {
		return
	}
	final := object("completed", run.text, run.g, run.tokens)
	b, _ := json.Marshal(final)
	if rr.Store {
		s.store.put(id, &storedResponse{messages: f.Messages, output: run.text, object: b})
	}
	if !top.Stream {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
		return
	}
	part := map[string]any{"type": "output_text", "text": run.text, "annotations": []any{}}
	_ = ev("response.output_text.done", map[string]any{"output_index": 0, "content_index": 0, "item_id": msgID, "text": run.text, "logprobs": []any{}}) &&
		ev("response.content_part.done", map[string]any{"output_index": 0, "content_index": 0, "item_id": msgID, "part": part}) &&
		ev("response.output_item.done", map[string]any{"output_index": 0, "item": final["output"].([]any)[0]}) &&
		ev("response.completed", map[string]any{"response": final})
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// handleResponseGet serves GET /v1/responses/{id}.
func (s *Server) handleResponseGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, ok := s.store.get(id)
	if !ok {
		writeAPIError(w, http.StatusNotFound, "invalid_request_error", "Response with id '"+id+"' not found.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(st.object)
}

// handleResponseDelete serves DELETE /v1/responses/{id}.
func (s *Server) handleResponseDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !s.store.del(id) {
		writeAPIError(w, http.StatusNotFound, "invalid_request_error", "Response with id '"+id+"' not found.")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response.deleted", "deleted": true})
}

// handleResponseCancel serves POST /v1/responses/{id}/cancel: the simulator makes no background
// responses, so a known one is refused as vLLM refuses a synchronous response.
func (s *Server) handleResponseCancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, ok := s.store.get(id); !ok {
		writeAPIError(w, http.StatusNotFound, "invalid_request_error", "Response with id '"+id+"' not found.")
		return
	}
	writeAPIError(w, http.StatusBadRequest, "invalid_request_error", "Cannot cancel a synchronous response.")
}

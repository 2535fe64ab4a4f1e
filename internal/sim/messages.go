package sim

import (
	"encoding/json"
	"net/http"

	"github.com/kvroute/kvroute/routing/apis"
)

// handleMessages serves POST /v1/messages like vLLM's AnthropicServingMessages (the request
// converted to its chat form with the simulator's apis.AnthropicOptions), answering in the
// Anthropic shape: usage.input_tokens are the uncached prompt tokens, cache_read_input_tokens the
// cached ones (vLLM's _build_anthropic_usage).
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	body, info, ok := s.readAPIBody(w, r)
	if !ok {
		return
	}
	f, err := apis.FromAnthropic(body, s.cfg.APIs.Anthropic)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
		return
	}
	var top struct {
		Stream    bool `json:"stream"`
		MaxTokens int  `json:"max_tokens"`
	}
	_ = json.Unmarshal(body, &top)
	id := newID("msg_", info.RequestID)
	usage := func(g *generation, out int) map[string]any {
		return map[string]any{"input_tokens": g.promptTokens - g.cachedTokens, "output_tokens": out,
			"cache_read_input_tokens": g.cachedTokens, "cache_creation_input_tokens": 0}
	}
	start := func(g *generation) bool {
		return sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": s.cfg.Model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": usage(g, 0)}}) &&
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	}
	delta := func(_ int, t string) bool {
		return sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": t}})
	}
	run, ok := s.runAPI(r.Context(), w, info, f.Body(), top.MaxTokens, top.Stream, start, delta)
	if !ok {
		return
	}
	if !top.Stream {
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "type": "message", "role": "assistant", "model": s.cfg.Model,
			"content": []any{map[string]any{"type": "text", "text": run.text}}, "stop_reason": "max_tokens", "stop_sequence": nil,
			"usage": usage(run.g, run.tokens)})
		return
	}
	_ = sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}) &&
		sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "max_tokens", "stop_sequence": nil},
			"usage": usage(run.g, run.tokens)}) &&
		sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// handleCountTokens serves POST /v1/messages/count_tokens: the prompt's token count, no generation.
func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) {
	body, info, ok := s.readAPIBody(w, r)
	if !ok {
		return
	}
	f, err := apis.FromAnthropic(withMaxTokens(body), s.cfg.APIs.Anthropic)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
		return
	}
	var req chatRequest
	_ = json.Unmarshal(f.Body(), &req)
	g, status, err := s.newGeneration(r.Context(), "/v1/chat/completions", info.RequestID, f.Body(), &req)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"input_tokens": g.promptTokens})
}

// withMaxTokens adds max_tokens to a count_tokens body (which has none) so the Messages
// conversion accepts it.
func withMaxTokens(body []byte) []byte {
	v, err := apis.Parse(body)
	if err != nil || !v.IsObj() {
		return body
	}
	if !v.Has("max_tokens") {
		v.Set("max_tokens", &apis.Value{Kind: apis.KindNumber, Str: "1"})
	}
	b, _ := v.MarshalJSON()
	return b
}

package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvroute/kvroute/routing/apis"
)

// The agent APIs of a vLLM worker: POST /v1/responses (with vLLM's in-memory store, as with
// VLLM_ENABLE_RESPONSES_API_STORE=1: previous_response_id, GET/DELETE /v1/responses/{id},
// POST /v1/responses/{id}/cancel) and POST /v1/messages (Anthropic, plus /count_tokens). Each is
// converted to the chat form the way vLLM does (routing/apis, the vLLM version named there), then
// served by the chat path: the same prompt, block cache and KV events, and the real cached tokens
// in each API's usage shape (Responses: usage.input_tokens_details.cached_tokens; Messages:
// usage.cache_read_input_tokens) and in HitBlocksHeader.

// maxStored bounds the simulator's response store (oldest out).
const maxStored = 10000

// storedResponse is one stored response: the conversation its prompt was built from (chat
// messages) and its output text, as vLLM's store keeps them (msg_store and response_store).
type storedResponse struct {
	messages []*apis.Value
	output   string
	object   []byte // the response object JSON, for GET
}

type responseStore struct {
	mu    sync.Mutex
	m     map[string]*storedResponse
	order []string
}

func (st *responseStore) get(id string) (*storedResponse, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.m[id]
	return r, ok
}

func (st *responseStore) put(id string, r *storedResponse) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.m == nil {
		st.m = map[string]*storedResponse{}
	}
	st.m[id] = r
	st.order = append(st.order, id)
	for len(st.order) > maxStored {
		delete(st.m, st.order[0])
		st.order = st.order[1:]
	}
}

func (st *responseStore) del(id string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	_, ok := st.m[id]
	delete(st.m, id)
	return ok
}

// StoredResponses returns how many responses the worker holds.
func (s *Server) StoredResponses() int {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	return len(s.store.m)
}

func (s *Server) readAPIBody(w http.ResponseWriter, r *http.Request) ([]byte, RequestInfo, bool) {
	s.requests.Add(1)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodySize))
	info := RequestInfo{RequestID: r.Header.Get("X-Request-Id"), Path: r.URL.Path, ContentLength: contentLength(r), BodyLen: len(body), Received: time.Now()}
	if err != nil {
		writeError(w, http.StatusBadRequest, "reading request body: "+err.Error())
		return nil, info, false
	}
	if s.cfg.OnRequest != nil {
		s.cfg.OnRequest(info)
	}
	return body, info, true
}

// apiRun is one converted request run on the chat path; emit writes the API's answer.
type apiRun struct {
	g      *generation
	text   string
	tokens int
}

// runAPI prepares the chat body, waits for admission, prefills and generates; it returns false
// when the request was answered with an error or the client went away.
func (s *Server) runAPI(ctx context.Context, w http.ResponseWriter, info RequestInfo, chatBody []byte, maxTokens int, stream bool, start func(g *generation) bool, delta func(i int, t string) bool) (*apiRun, bool) {
	s.active.Add(1)
	defer s.active.Add(-1)
	var req chatRequest
	if err := json.Unmarshal(chatBody, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid request")
		return nil, false
	}
	if req.Model != "" && req.Model != s.cfg.Model {
		writeError(w, http.StatusNotFound, fmt.Sprintf("the model %q does not exist", req.Model))
		return nil, false
	}
	if maxTokens > 0 {
		req.MaxTokens = &maxTokens
	}
	g, status, err := s.newGeneration(ctx, "/v1/chat/completions", info.RequestID, chatBody, &req)
	if err != nil {
		writeError(w, status, err.Error())
		return nil, false
	}
	s.waiting.Add(1)
	release, ok := s.engine.admit(ctx)
	s.waiting.Add(-1)
	if !ok {
		return nil, false
	}
	defer release()
	if !g.prefill(ctx, w) {
		return nil, false
	}
	run := &apiRun{g: g}
	if stream {
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		if !start(g) {
			return nil, false
		}
	}
	var text strings.Builder
	for i := 0; i < g.maxTokens; i++ {
		t, ok := g.token(ctx, i)
		if !ok {
			return nil, false
		}
		text.WriteString(t)
		if stream && !delta(i, t) {
			return nil, false
		}
	}
	run.text, run.tokens = text.String(), g.maxTokens
	if s.cfg.OnDone != nil {
		s.cfg.OnDone(info, DoneInfo{At: time.Now(), Tokens: g.maxTokens})
	}
	return run, true
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return false
	}
	return http.NewResponseController(w).Flush() == nil
}

func newID(prefix, reqID string) string {
	id := completionID(reqID)
	return prefix + strings.TrimPrefix(id, "chatcmpl-") + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
}

func writeAPIError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": status}})
}

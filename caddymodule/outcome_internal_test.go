package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/router"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// The outcome chain (router.Result → Decision → the [ROUTING] line and request vars; router.Result
// → the explain JSON) is what an operator reads. These tests pin it byte for byte.

// explainJSON returns what POST /kvroute/explain writes for v (writeJSON).
func explainJSON(t *testing.T, v any) string {
	t.Helper()
	rec := httptest.NewRecorder()
	if err := writeJSON(rec, v); err != nil {
		t.Fatal(err)
	}
	return rec.Body.String()
}

// TestExplainJSONShape pins every key of the explain answer (DESIGN.md §10 plus the cost terms and
// load kvroute added), its order and its null and empty-list rules, for a result with every field
// set and for one without a choice.
func TestExplainJSONShape(t *testing.T) {
	ranked := []router.Candidate{
		{WorkerID: "w1", Endpoint: "10.0.0.1:8000", OverlapBlocks: 7, Cost: 12.5, Available: true,
			Terms: scheduler.Terms{UncachedTokens: 1, QueuedPrefillTokens: 2, WaitingSequences: 3, QueueTokens: 4.5, PrefillBlocks: 5.5, DecodeBlocks: 6.5, Affinity: 7.5},
			Load:  scheduler.Load{PrefillTokens: 8, DecodeBlocks: 9, Requests: 10}, Busy: true, OverBalance: true, RecentRequests: 2.25},
		{WorkerID: "w<2>", Endpoint: "10.0.0.2:8000", Cost: 20},
	}
	full := &router.Result{Model: "qwen", Fallback: reason.ClientUUID, Detail: "a & b", TotalBlocks: 143, OverlapBlocks: 7,
		RequestTokens: 2288, Chosen: &ranked[0], Ranked: ranked, Costs: map[string]float64{"w1": 12.5, "w<2>": 20},
		CostModel: scheduler.CostTTFT, MediaItems: 1, Forwarded: true, Body: []byte(`{}`),
		Affinity: &router.Affinity{Key: "00112233445566778899aabbccddeeff", Source: "bytes", WorkerID: "w1", Tokens: 1024},
		Media:    []router.MediaSummary{{Kind: "video", Identity: "0123456789abcdef", Frames: 24, Width: 640, Height: 360, GridTHW: [3]int{12, 22, 40}, Tokens: 2640}}}
	want := `{"model":"qwen","fallback":"client_uuid","detail":"a & b","total_blocks":143,` +
		`"media":[{"kind":"video","identity":"0123456789abcdef","frames":24,"width":640,"height":360,"grid_thw":[12,22,40],"tokens":2640}],` +
		`"candidates":[{"worker_id":"w1","endpoint":"10.0.0.1:8000","overlap_blocks":7,"cost":12.5,"available":true,` +
		`"terms":{"uncached_tokens":1,"queued_prefill_tokens":2,"waiting_sequences":3,"queue_tokens":4.5,"prefill_blocks":5.5,"decode_blocks":6.5,"affinity":7.5},` +
		`"active_prefill_tokens":8,"active_decode_blocks":9,"active_requests":10,"busy":true,"recent_requests":2.25,"over_balance":true},` +
		`{"worker_id":"w<2>","endpoint":"10.0.0.2:8000","overlap_blocks":0,"cost":20,"available":false,` +
		`"terms":{"uncached_tokens":0,"queued_prefill_tokens":0,"waiting_sequences":0,"queue_tokens":0,"prefill_blocks":0,"decode_blocks":0,"affinity":0},` +
		`"active_prefill_tokens":0,"active_decode_blocks":0,"active_requests":0,"busy":false,"recent_requests":0,"over_balance":false}],` +
		`"decision":{"worker_id":"w1","endpoint":"10.0.0.1:8000"},"cost_model":"ttft","request_tokens":2288,` +
		`"affinity":{"key":"00112233445566778899aabbccddeeff","source":"bytes","worker_id":"w1","tokens":1024}}` + "\n"
	if got := explainJSON(t, explainResponse(full)); got != want {
		t.Errorf("full result:\n got %s\nwant %s", got, want)
	}
	none := &router.Result{Model: "", Fallback: reason.NotRouted, Detail: ""}
	want = `{"model":"","fallback":"not_routed","total_blocks":0,"media":[],"candidates":[],"decision":{"worker_id":"","endpoint":""},"cost_model":"","request_tokens":0}` + "\n"
	if got := explainJSON(t, explainResponse(none)); got != want {
		t.Errorf("no choice:\n got %s\nwant %s", got, want)
	}
	exact := &router.Result{Model: "m"}
	want = `{"model":"m","fallback":null,"total_blocks":0,"media":[],"candidates":[],"decision":{"worker_id":"","endpoint":""},"cost_model":"","request_tokens":0}` + "\n"
	if got := explainJSON(t, explainResponse(exact)); got != want {
		t.Errorf("exact, empty:\n got %s\nwant %s", got, want)
	}
}

// outcomeRouter is a router over the text-only Qwen3 test model with an empty index and a seeded
// scheduler, so costs and the tie-break are reproducible.
func outcomeRouter(t *testing.T) *router.Router {
	t.Helper()
	m, errM := model.Load("../testdata/golden/qwen3vl-test-model")
	ix, errI := index.New(nil)
	s, errS := scheduler.New(nil, rand.NewPCG(1, 2))
	if err := errors.Join(errM, errI, errS); err != nil {
		t.Fatal(err)
	}
	r, err := router.New(router.DefaultConfig(), m, nil, ix, s, nil, router.Hooks{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestOutcomeChainPinned routes one chat body with the routing core's Decider and pins what the
// handler makes of the decision (the [ROUTING] line's fields, the request vars, the next-best
// endpoints the selection policy tries) and what explain answers for the same body, byte for byte.
func TestOutcomeChainPinned(t *testing.T) {
	r := outcomeRouter(t)
	ws := []registry.Worker{
		{WorkerID: "w1", Endpoint: "127.0.0.1:9001", Model: "qwen", Engine: "vllm", BlockSize: 16, DPSize: 1},
		{WorkerID: "w2", Endpoint: "127.0.0.1:9002", Model: "qwen", Engine: "vllm", BlockSize: 16, DPSize: 1},
		{WorkerID: "w3", Endpoint: "127.0.0.1:9003", Model: "qwen", Engine: "vllm", BlockSize: 16, DPSize: 1},
	}
	body := `{"model":"qwen","messages":[{"role":"user","content":"` + strings.Repeat("route me by overlap ", 20) + `"}]}`

	// explain first: it accounts no load, so the Decider below sees the same idle workers
	res, err := r.Route(context.Background(), &router.Input{Path: "/v1/chat/completions", Body: []byte(body), Workers: routerWorkers(ws)})
	if err != nil {
		t.Fatal(err)
	}
	// The default model (ttft2) on idle workers: its in-flight bound ceil(1.5 · (0 + 1) / 3) = 1.
	const terms = `"terms":{"uncached_tokens":89,"queued_prefill_tokens":0,"waiting_sequences":0,"queue_tokens":0,"prefill_blocks":0,"decode_blocks":0,"affinity":0,"in_flight_bound":1},` +
		`"active_prefill_tokens":0,"active_decode_blocks":0,"active_requests":0,"busy":false,"recent_requests":0,"over_balance":false}`
	want := `{"model":"qwen","fallback":null,"total_blocks":5,"media":[],"candidates":[` +
		`{"worker_id":"w3","endpoint":"127.0.0.1:9003","overlap_blocks":0,"cost":89,"available":true,` + terms + `,` +
		`{"worker_id":"w1","endpoint":"127.0.0.1:9001","overlap_blocks":0,"cost":89,"available":true,` + terms + `,` +
		`{"worker_id":"w2","endpoint":"127.0.0.1:9002","overlap_blocks":0,"cost":89,"available":true,` + terms + `],` +
		`"decision":{"worker_id":"w3","endpoint":"127.0.0.1:9003"},"cost_model":"ttft2","request_tokens":89}` + "\n"
	if got := explainJSON(t, explainResponse(res)); got != want {
		t.Errorf("explain:\n got %s\nwant %s", got, want)
	}

	a := testApp(t, nil)
	core, logs := observer.New(zapcore.InfoLevel)
	h := &Handler{app: a, logger: zap.New(core), metrics: kvMetrics}
	dec := &routerDecider{app: a, core: &routingCore{router: outcomeRouter(t)}}
	req := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	req = req.WithContext(context.WithValue(req.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	d, err := dec.Decide(req.Context(), &RouteInput{Request: req, RequestID: "req-1", Body: []byte(body), Workers: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer d.handle.Done()
	d.RequestID = "req-1"
	h.record(req, d)
	entries := logs.FilterMessage("[ROUTING]").All()
	if len(entries) != 1 {
		t.Fatalf("%d [ROUTING] lines", len(entries))
	}
	got := fmt.Sprint(entries[0].ContextMap())
	if want := `map[costs:map[w1:89 w2:89 w3:89] endpoint:127.0.0.1:9003 fallback: model:qwen overlap_blocks:0 request_id:req-1 total_blocks:5 worker_id:w3]`; got != want {
		t.Errorf("[ROUTING] fields:\n got %s\nwant %s", got, want)
	}
	vars := req.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
	if got := fmt.Sprint(vars["kvroute.worker"], " ", vars["kvroute.overlap_blocks"], " ", vars["kvroute.total_blocks"], " ", vars["kvroute.fallback"], "|"); got != "w3 0 5 |" {
		t.Errorf("vars %q", got)
	}
	if got := strings.Join(d.ranked(), ","); got != "127.0.0.1:9003,127.0.0.1:9001,127.0.0.1:9002" {
		t.Errorf("endpoints the policy tries: %s", got)
	}
	// a text body is forwarded as the client sent it; the load is accounted, and moves with the
	// full prompt (no overlap anywhere) when an attempt goes to another worker
	if d.Body != nil && string(d.Body) != body || d.handle == nil || d.PrefillOn("w1") != 89 {
		t.Errorf("body %q, handle %v, prefill on w1 %d", d.Body, d.handle, d.PrefillOn("w1"))
	}
}

// TestHandlerAndRouterShareThePathRule sends one chat body to each path through the handler with
// the routing core's Decider: the handler reads the body exactly when the router routes the path
// (not not_routed), so no path is buffered and then left unrouted, nor routed unread.
func TestHandlerAndRouterShareThePathRule(t *testing.T) {
	h := testHandler(testApp(t, nil), 1<<20)
	h.app.SetDecider(&routerDecider{app: h.app, core: &routingCore{router: outcomeRouter(t)}})
	body := `{"model":"m","prompt":"route me","messages":[{"role":"user","content":"route me"}]}`
	for path, routed := range map[string]bool{
		"/v1/chat/completions": true, "/openai/v1/chat/completions": true, "/v1/completions": true,
		"/v1/chat/completions/": false, "/v1/completions/": false, "/v1/embeddings": false,
	} {
		_, s := serve(t, h, "POST", path, body, nil)
		if !s.called || s.body != body {
			t.Fatalf("%s: forwarded %v, body %q", path, s.called, s.body)
		}
		read := s.decision.attempts.body != nil
		notRouted := s.decision.Fallback == reason.NotRouted
		if read != routed || notRouted == routed {
			t.Errorf("%s: body read %v, fallback %q; want read and routed %v", path, read, s.decision.Fallback, routed)
		}
	}
}

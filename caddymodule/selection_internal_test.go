package caddymodule

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/routing/router"
)

func testPool() reverseproxy.UpstreamPool {
	return reverseproxy.UpstreamPool{
		{Host: new(reverseproxy.Host), Dial: "127.0.0.1:9000"},
		{Host: new(reverseproxy.Host), Dial: "127.0.0.1:9001"},
		{Host: new(reverseproxy.Host), Dial: "http://127.0.0.1:9002"},
	}
}

func selectWith(t *testing.T, d *Decision) (*reverseproxy.Upstream, map[string]any) {
	t.Helper()
	s := &Selection{fallback: reverseproxy.FirstSelection{}, app: testApp(t, nil)}
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	vars := map[string]any{}
	ctx := context.WithValue(req.Context(), caddyhttp.VarsCtxKey, vars)
	req = req.WithContext(ctx)
	if d != nil {
		req = req.WithContext(WithDecision(ctx, d))
		setDecisionVars(req, d) // as the handler does before the proxy runs
	}
	up := s.Select(testPool(), req, nil)
	renderServedVars(vars)
	return up, vars
}

// renderServedVars renders the vars that follow the proxy's attempts as a placeholder does, after
// the attempt.
func renderServedVars(vars map[string]any) {
	for _, k := range []string{"kvroute.worker", "kvroute.overlap_blocks"} {
		if v, ok := vars[k]; ok {
			vars[k] = caddy.ToString(v)
		}
	}
}

// TestServedVarsFollowRetry: a retry on another worker changes both the worker var and the
// overlap var to that worker's (the operator's X-Kvroute-* headers and access-log fields must not
// pair one worker's id with another's overlap).
func TestServedVarsFollowRetry(t *testing.T) {
	d := &Decision{Result: router.Result{Chosen: &router.Candidate{WorkerID: "w2", Endpoint: "127.0.0.1:9002", OverlapBlocks: 7},
		Ranked: []router.Candidate{
			{WorkerID: "w2", Endpoint: "127.0.0.1:9002", OverlapBlocks: 7, Available: true},
			{WorkerID: "w1", Endpoint: "127.0.0.1:9001", OverlapBlocks: 3, Available: true},
		}, OverlapBlocks: 7, TotalBlocks: 9}}
	s := &Selection{fallback: reverseproxy.FirstSelection{}, app: testApp(t, nil)}
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	vars := map[string]any{}
	req = req.WithContext(WithDecision(context.WithValue(req.Context(), caddyhttp.VarsCtxKey, vars), d))
	setDecisionVars(req, d)
	rendered := func() (string, string) {
		return caddy.ToString(vars["kvroute.worker"]), caddy.ToString(vars["kvroute.overlap_blocks"])
	}
	if w, o := rendered(); w != "w2" || o != "7" {
		t.Fatalf("before any attempt: worker %q overlap %q, want w2 7", w, o)
	}
	if up := s.Select(testPool(), req, nil); up == nil || up.Dial != "http://127.0.0.1:9002" {
		t.Fatalf("first attempt %+v", up)
	}
	if w, o := rendered(); w != "w2" || o != "7" {
		t.Fatalf("first attempt: worker %q overlap %q, want w2 7", w, o)
	}
	// Caddy asks again: the first attempt failed; the next-best candidate serves
	if up := s.Select(testPool(), req, nil); up == nil || up.Dial != "127.0.0.1:9001" {
		t.Fatalf("retry %+v", up)
	}
	if w, o := rendered(); w != "w1" || o != "3" {
		t.Errorf("after the retry: worker %q overlap %q, want w1 3", w, o)
	}
	if vars["kvroute.total_blocks"] != 9 {
		t.Errorf("total_blocks %v", vars["kvroute.total_blocks"])
	}
}

func TestSelectionFollowsDecision(t *testing.T) {
	up, vars := selectWith(t, &Decision{Result: router.Result{Chosen: &router.Candidate{WorkerID: "w2", Endpoint: "127.0.0.1:9002"}, OverlapBlocks: 2, TotalBlocks: 5}})
	if up == nil || up.Dial != "http://127.0.0.1:9002" {
		t.Fatalf("picked %+v", up)
	}
	if vars["kvroute.worker"] != "w2" || vars["kvroute.overlap_blocks"] != "2" || vars["kvroute.total_blocks"] != 5 || vars["kvroute.fallback"] != "" {
		t.Errorf("vars %v", vars)
	}
}

func TestSelectionCandidatesThenFallback(t *testing.T) {
	// chosen endpoint not in the pool: the first candidate that is
	up, vars := selectWith(t, &Decision{Result: router.Result{Chosen: &router.Candidate{WorkerID: "gone", Endpoint: "127.0.0.1:9999"},
		Ranked: []router.Candidate{{WorkerID: "x", Endpoint: "127.0.0.1:9998", Available: true}, {WorkerID: "w1", Endpoint: "127.0.0.1:9001", Available: true}}}})
	if up == nil || up.Dial != "127.0.0.1:9001" || vars["kvroute.worker"] != "w1" {
		t.Fatalf("picked %+v vars %v", up, vars)
	}
	// nothing matches: the fallback (first); 9000 is no registered worker, so worker is ""
	up, vars = selectWith(t, &Decision{Result: router.Result{Chosen: &router.Candidate{Endpoint: "127.0.0.1:9999"}}})
	if up == nil || up.Dial != "127.0.0.1:9000" || vars["kvroute.worker"] != "" {
		t.Fatalf("fallback picked %+v vars %v", up, vars)
	}
	// no decision at all (handler not run): the fallback, no vars
	up, vars = selectWith(t, nil)
	if up == nil || up.Dial != "127.0.0.1:9000" || len(vars) != 0 {
		t.Fatalf("no decision: %+v %v", up, vars)
	}
}

// TestSelectionInstallsBody: each attempt's request gets a fresh reader over the exact bytes,
// replacing a body the proxy wrapped or consumed before (request_buffers, an earlier attempt).
func TestSelectionInstallsBody(t *testing.T) {
	d := &Decision{attempts: attempts{body: newReplayBody([]byte("abcdef"), nil)}}
	s := &Selection{fallback: reverseproxy.FirstSelection{}, app: testApp(t, nil)}
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader("stale"))
	req = req.WithContext(WithDecision(context.WithValue(req.Context(), caddyhttp.VarsCtxKey, map[string]any{}), d))
	for i := 0; i < 2; i++ {
		if up := s.Select(testPool(), req, nil); up == nil {
			t.Fatal("no upstream")
		}
		p := make([]byte, 3)
		_, _ = io.ReadFull(req.Body, p) // the attempt reads part of its body
		rest, _ := io.ReadAll(req.Body)
		if string(p)+string(rest) != "abcdef" || req.ContentLength != 6 {
			t.Errorf("attempt %d body %q%q length %d", i, p, rest, req.ContentLength)
		}
	}
}

// TestSelectionRetriesSkipTriedUpstreams: with lb_retries and no health check marking a dead
// worker down, each retry goes to the next-best worker, then to the fallback over the untried
// upstreams (a user test saw every retry hit the crashed chosen worker).
func TestSelectionRetriesSkipTriedUpstreams(t *testing.T) {
	s := &Selection{fallback: reverseproxy.FirstSelection{}, app: testApp(t, nil)}
	d := &Decision{Result: router.Result{Chosen: &router.Candidate{WorkerID: "w2", Endpoint: "127.0.0.1:9002"},
		Ranked: []router.Candidate{{WorkerID: "w1", Endpoint: "127.0.0.1:9001", Available: true}}}}
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	ctx := WithDecision(context.WithValue(req.Context(), caddyhttp.VarsCtxKey, map[string]any{}), d)
	req = req.WithContext(ctx)
	pool := testPool()
	var got []string
	for i := 0; i < 4; i++ {
		up := s.Select(pool, req, nil)
		if up == nil {
			t.Fatalf("attempt %d: no upstream", i)
		}
		got = append(got, up.Dial)
	}
	// chosen, next-best, the fallback over the one untried upstream, then (all tried) the fallback
	// over the whole pool.
	want := []string{"http://127.0.0.1:9002", "127.0.0.1:9001", "127.0.0.1:9000", "127.0.0.1:9000"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("attempts %v, want %v", got, want)
		}
	}
}

// TestSelectionKeepsAdapterRequests: when the decision names no available worker, an adapter
// request's fallback pick stays on the workers listing the adapter (up or down); an adapter no
// worker lists stays on its base model's workers; a base model request on its model's workers.
func TestSelectionKeepsAdapterRequests(t *testing.T) {
	a := testApp(t, nil)
	ws := []registry.Worker{
		{WorkerID: "w0", Endpoint: "127.0.0.1:9000", Model: "llama", Engine: "vllm", BlockSize: 16, DPSize: 1},
		{WorkerID: "w1", Endpoint: "127.0.0.1:9001", Model: "m", Engine: "vllm", BlockSize: 16, DPSize: 1},
		{WorkerID: "w2", Endpoint: "127.0.0.1:9002", Model: "m", Engine: "vllm", BlockSize: 16, DPSize: 1,
			Adapters: []registry.Adapter{{Name: "sql", BaseModel: "m"}}},
	}
	a.static = ws
	a.workers.Store(newWorkerSet(registry.Merge(ws, nil)))
	s := &Selection{fallback: reverseproxy.FirstSelection{}, app: a}
	pick := func(d *Decision) string {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		req = req.WithContext(WithDecision(context.WithValue(req.Context(), caddyhttp.VarsCtxKey, map[string]any{}), d))
		up := s.Select(testPool(), req, nil)
		if up == nil {
			return ""
		}
		return up.Dial
	}
	// no preference (load-only): FirstSelection would take 9000 (llama) or 9001 (no adapter)
	if got := pick(&Decision{Result: router.Result{Model: "sql", Adapter: "sql", AdapterBase: "m"}}); got != "http://127.0.0.1:9002" {
		t.Errorf("adapter request went to %q, want the worker serving it", got)
	}
	if got := pick(&Decision{Result: router.Result{Model: "gone", Adapter: "gone", AdapterBase: "m"}}); got != "127.0.0.1:9001" {
		t.Errorf("adapter_not_served request went to %q, want the first worker of its base model", got)
	}
	if got := pick(&Decision{Result: router.Result{Model: "m"}}); got != "127.0.0.1:9001" {
		t.Errorf("base model request went to %q", got)
	}
	// a decision without the router's mark (a decider error routed on load) still keeps to the
	// adapter's workers; a model nobody declares or lists gets the whole pool
	if got := pick(&Decision{Result: router.Result{Model: "sql"}}); got != "http://127.0.0.1:9002" {
		t.Errorf("an unmarked adapter request went to %q, want the worker serving it", got)
	}
	if got := pick(&Decision{Result: router.Result{Model: "nobody"}}); got != "127.0.0.1:9000" {
		t.Errorf("an unknown model went to %q, want the whole pool's first", got)
	}
	ups, _ := (&Upstreams{Model: "sql", app: a}).GetUpstreams(nil)
	if len(ups) != 1 || ups[0].Dial != "127.0.0.1:9002" {
		t.Errorf("dynamic kvroute sql: %+v", ups)
	}
	if ups, _ := (&Upstreams{Model: "m", app: a}).GetUpstreams(nil); len(ups) != 2 {
		t.Errorf("dynamic kvroute m: %d upstreams, want 2 (the adapter's worker is m's)", len(ups))
	}
	if got := modelLabel("sql", ws); got != "m" {
		t.Errorf("modelLabel(sql) = %q, want its worker's model", got)
	}
}

package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
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
	if d != nil {
		ctx = WithDecision(ctx, d)
	}
	return s.Select(testPool(), req.WithContext(ctx), nil), vars
}

func TestSelectionFollowsDecision(t *testing.T) {
	up, vars := selectWith(t, &Decision{WorkerID: "w2", Endpoint: "127.0.0.1:9002", OverlapBlocks: 2, TotalBlocks: 5})
	if up == nil || up.Dial != "http://127.0.0.1:9002" {
		t.Fatalf("picked %+v", up)
	}
	if vars["kvroute.worker"] != "w2" || vars["kvroute.overlap_blocks"] != 2 || vars["kvroute.total_blocks"] != 5 || vars["kvroute.fallback"] != "" {
		t.Errorf("vars %v", vars)
	}
}

func TestSelectionCandidatesThenFallback(t *testing.T) {
	// chosen endpoint not in the pool: the first candidate that is
	up, vars := selectWith(t, &Decision{WorkerID: "gone", Endpoint: "127.0.0.1:9999",
		Candidates: []Candidate{{WorkerID: "x", Endpoint: "127.0.0.1:9998"}, {WorkerID: "w1", Endpoint: "127.0.0.1:9001"}}})
	if up == nil || up.Dial != "127.0.0.1:9001" || vars["kvroute.worker"] != "w1" {
		t.Fatalf("picked %+v vars %v", up, vars)
	}
	// nothing matches: the fallback (first); 9000 is no registered worker, so worker is ""
	up, vars = selectWith(t, &Decision{Endpoint: "127.0.0.1:9999"})
	if up == nil || up.Dial != "127.0.0.1:9000" || vars["kvroute.worker"] != "" {
		t.Fatalf("fallback picked %+v vars %v", up, vars)
	}
	// no decision at all (handler not run): the fallback, no vars
	up, vars = selectWith(t, nil)
	if up == nil || up.Dial != "127.0.0.1:9000" || len(vars) != 0 {
		t.Fatalf("no decision: %+v %v", up, vars)
	}
}

func TestSelectionRewindsBody(t *testing.T) {
	d := &Decision{body: newReplayBody([]byte("abcdef"))}
	p := make([]byte, 3)
	_, _ = d.body.Read(p)
	selectWith(t, d)
	p = make([]byte, 6)
	if n, _ := d.body.Read(p); string(p[:n]) != "abcdef" {
		t.Errorf("after select read %q", p[:n])
	}
}

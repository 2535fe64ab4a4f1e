package caddymodule

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/router"
)

// testApp returns an App with two static workers and no NATS (not started).
func testApp(t *testing.T, d Decider) *App {
	t.Helper()
	a := &App{logger: zap.NewNop(), metrics: kvMetrics}
	ws := []registry.Worker{
		{WorkerID: "w1", Endpoint: "127.0.0.1:9001", Model: "m", Engine: "vllm", BlockSize: 16, DPSize: 1},
		{WorkerID: "w2", Endpoint: "127.0.0.1:9002", Model: "m", Engine: "vllm", BlockSize: 16, DPSize: 1},
	}
	a.static = ws
	a.workers.Store(newWorkerSet(registry.Merge(ws, nil)))
	if d == nil {
		d = NoPreference{}
	}
	a.SetDecider(d)
	return a
}

func testHandler(a *App, limit int64) *Handler {
	return &Handler{MaxBodySize: limit, ReadTimeout: 0, app: a, logger: zap.NewNop(), metrics: kvMetrics}
}

// seen is what the next handler observed.
type seen struct {
	called   bool
	body     string
	getBody  string
	length   int64
	reqID    string
	decision *Decision
}

func nextRecorder(s *seen) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		s.called = true
		b, _ := io.ReadAll(r.Body)
		s.body, s.length, s.reqID = string(b), r.ContentLength, r.Header.Get("X-Request-Id")
		if r.GetBody != nil {
			rc, _ := r.GetBody()
			g, _ := io.ReadAll(rc)
			s.getBody = string(g)
		}
		s.decision = DecisionFrom(r.Context())
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

func serve(t *testing.T, h *Handler, method, path, body string, hdr map[string]string) (*httptest.ResponseRecorder, *seen) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	vars := map[string]any{}
	req = req.WithContext(context.WithValue(req.Context(), caddyhttp.VarsCtxKey, vars))
	rec := httptest.NewRecorder()
	s := &seen{}
	if err := h.ServeHTTP(rec, req, nextRecorder(s)); err != nil {
		t.Fatalf("ServeHTTP: %v", err)
	}
	return rec, s
}

func TestHandlerForwardsExactBody(t *testing.T) {
	h := testHandler(testApp(t, nil), 1<<20)
	body := `{"model":"m", "messages":[{"role":"user","content":"hi"}], "n": 1.50}`
	rec, s := serve(t, h, http.MethodPost, "/v1/chat/completions", body, map[string]string{"X-Request-Id": "abc"})
	if rec.Code != http.StatusNoContent || !s.called {
		t.Fatalf("status %d called %v", rec.Code, s.called)
	}
	if s.body != body || s.getBody != body || s.length != int64(len(body)) || s.reqID != "abc" {
		t.Errorf("next saw %+v", s)
	}
	if s.decision == nil || s.decision.RequestID != "abc" || s.decision.WorkerID() != "" || s.decision.attempts.body == nil {
		t.Errorf("decision = %+v", s.decision)
	}
}

func TestHandlerGeneratesRequestID(t *testing.T) {
	h := testHandler(testApp(t, nil), 1<<20)
	_, s := serve(t, h, http.MethodPost, "/v1/chat/completions", `{}`, nil)
	if len(s.reqID) != 32 || s.decision.RequestID != s.reqID {
		t.Errorf("request id %q, decision %q", s.reqID, s.decision.RequestID)
	}
}

func TestHandlerClientErrors(t *testing.T) {
	cases := []struct {
		name, body string
		status     int
		code       reason.Code
	}{
		{"unparseable", `{"model":`, 400, reason.BodyInvalid},
		{"empty", ``, 400, reason.BodyInvalid},
		{"deep nesting", strings.Repeat("[", 20000), 400, reason.BodyInvalid},
		{"over cap", `{"x":"` + strings.Repeat("a", 200) + `"}`, 413, reason.BodyTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := testHandler(testApp(t, nil), 100)
			if c.name == "deep nesting" {
				h.MaxBodySize = 1 << 20
			}
			rec, s := serve(t, h, http.MethodPost, "/v1/chat/completions", c.body, nil)
			want := fmt.Sprintf(`{"error":{"code":"%s","message":`, c.code)
			if rec.Code != c.status || s.called || !strings.HasPrefix(rec.Body.String(), want) ||
				rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("status %d called %v body %s", rec.Code, s.called, rec.Body.String())
			}
		})
	}
}

func TestHandlerOverCapChunked(t *testing.T) {
	h := testHandler(testApp(t, nil), 100)
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", io.NopCloser(strings.NewReader(strings.Repeat("a", 101))))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	s := &seen{}
	if err := h.ServeHTTP(rec, req, nextRecorder(s)); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 413 || s.called {
		t.Errorf("status %d called %v", rec.Code, s.called)
	}
	// exactly at the cap passes the size check
	req = httptest.NewRequest(http.MethodPost, "/v1/chat/completions", io.NopCloser(strings.NewReader(`"`+strings.Repeat("a", 98)+`"`)))
	req.ContentLength = -1
	rec = httptest.NewRecorder()
	if err := h.ServeHTTP(rec, req, nextRecorder(s)); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusNoContent || s.length != 100 {
		t.Errorf("at cap: status %d length %d", rec.Code, s.length)
	}
}

func TestHandlerPassesOtherRequests(t *testing.T) {
	h := testHandler(testApp(t, nil), 10)
	_, s := serve(t, h, http.MethodGet, "/v1/models", "", nil)
	if !s.called || s.decision == nil || s.decision.attempts.body != nil {
		t.Errorf("GET: %+v", s)
	}
	// a non-chat POST streams through untouched, whatever its size or syntax
	_, s = serve(t, h, http.MethodPost, "/v1/embeddings-upload", "not json, longer than ten bytes", nil)
	if !s.called || s.body != "not json, longer than ten bytes" {
		t.Errorf("other POST: %+v", s)
	}
}

type funcDecider func(context.Context, *RouteInput) (*Decision, error)

func (f funcDecider) Decide(ctx context.Context, in *RouteInput) (*Decision, error) {
	return f(ctx, in)
}

func TestHandlerDeciderHook(t *testing.T) {
	var gotIn *RouteInput
	d := funcDecider(func(_ context.Context, in *RouteInput) (*Decision, error) {
		gotIn = in
		return &Decision{Result: router.Result{Model: "m", Chosen: &router.Candidate{WorkerID: "w2", Endpoint: "127.0.0.1:9002"}, OverlapBlocks: 3, TotalBlocks: 4}}, nil
	})
	h := testHandler(testApp(t, d), 1<<20)
	_, s := serve(t, h, http.MethodPost, "/v1/chat/completions", `{"model":"m"}`, nil)
	if gotIn == nil || string(gotIn.Body) != `{"model":"m"}` || len(gotIn.Workers) != 2 || gotIn.RequestID != s.reqID {
		t.Fatalf("decider input %+v", gotIn)
	}
	if s.decision.WorkerID() != "w2" || s.decision.OverlapBlocks != 3 {
		t.Errorf("decision %+v", s.decision)
	}

	// a client error from the decider is answered, not forwarded
	h.app.SetDecider(funcDecider(func(context.Context, *RouteInput) (*Decision, error) {
		return nil, reason.New(reason.MediaURLBlocked, "media URL not allowed")
	}))
	rec, s := serve(t, h, http.MethodPost, "/v1/chat/completions", `{}`, nil)
	if rec.Code != 400 || s.called || rec.Body.String() != `{"error":{"code":"media_url_blocked","message":"media URL not allowed"}}`+"\n" {
		t.Errorf("client error: %d %v %s", rec.Code, s.called, rec.Body.String())
	}

	// any other error routes on load alone
	h.app.SetDecider(funcDecider(func(context.Context, *RouteInput) (*Decision, error) {
		return nil, errors.New("index down")
	}))
	_, s = serve(t, h, http.MethodPost, "/v1/chat/completions", `{}`, nil)
	if !s.called || s.decision.Fallback != reason.IndexUnavailable {
		t.Errorf("server error: %+v", s.decision)
	}
}

// TestReplayBodyReaders: every installed reader starts at the first byte, whatever an earlier
// reader consumed, and the request gets the exact length.
func TestReplayBodyReaders(t *testing.T) {
	b := newReplayBody([]byte("0123456789"), nil)
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r.TransferEncoding = []string{"chunked"}
	b.install(r)
	p := make([]byte, 4)
	if n, _ := r.Body.Read(p); n != 4 || string(p) != "0123" {
		t.Fatalf("read %q", p[:n])
	}
	first := r.Body
	b.install(r)
	all, _ := io.ReadAll(r.Body)
	rest, _ := io.ReadAll(first)
	gb, _ := r.GetBody()
	again, _ := io.ReadAll(gb)
	if string(all) != "0123456789" || string(rest) != "456789" || string(again) != "0123456789" {
		t.Errorf("second reader %q, first reader's rest %q, GetBody %q", all, rest, again)
	}
	if r.ContentLength != 10 || r.Header.Get("Content-Length") != "10" || r.TransferEncoding != nil {
		t.Errorf("ContentLength %d header %q TE %v", r.ContentLength, r.Header.Get("Content-Length"), r.TransferEncoding)
	}
}

// TestReadBodyTimeout sends a Content-Length with a short body over a real connection: the read
// deadline ends the read with body_timeout.
func TestReadBodyTimeout(t *testing.T) {
	errc := make(chan error, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _, err := readBody(w, r, 1<<20, 50*time.Millisecond)
		errc <- err
		w.WriteHeader(http.StatusRequestTimeout)
	}))
	defer ts.Close()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{\"a\"")
	err = <-errc
	if reason.CodeOf(err) != reason.BodyTimeout {
		t.Fatalf("err = %v, want body_timeout", err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		res.Body.Close()
	}
}

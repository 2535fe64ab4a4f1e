package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestExplainPostsBodyAndReturnsAnswer(t *testing.T) {
	const req = `{"messages":[{"role":"user","content":"hi"}]}`
	var gotBody, gotPath, gotQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody, gotPath, gotQuery = string(b), r.URL.Path, r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"model":"m","fallback":null,"total_blocks":3,"media":[],"candidates":[],"decision":{"worker_id":"a","endpoint":"127.0.0.1:1"}}`)
	}))
	defer srv.Close()
	out, err := explain([]string{"--admin", strings.TrimPrefix(srv.URL, "http://"), "--path", "/v1/completions"}, strings.NewReader(req), srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if gotBody != req || gotPath != "/kvroute/explain" || gotQuery != "path=%2Fv1%2Fcompletions" {
		t.Fatalf("server saw body %q path %q query %q", gotBody, gotPath, gotQuery)
	}
	b, _ := json.Marshal(out)
	if string(b) != `{"model":"m","fallback":null,"total_blocks":3,"media":[],"candidates":[],"decision":{"worker_id":"a","endpoint":"127.0.0.1:1"}}` {
		t.Fatalf("output %s", b)
	}
}

func TestExplainReportsAdminErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"code":"body_invalid","message":"the request body is not valid JSON"}}`)
	}))
	defer srv.Close()
	_, err := explain([]string{"--admin", srv.URL}, strings.NewReader("{"), srv.Client())
	if err == nil || !strings.Contains(err.Error(), "body_invalid") {
		t.Fatalf("err %v", err)
	}
	if _, err := explain(nil, strings.NewReader("{}"), srv.Client()); err == nil || !strings.Contains(err.Error(), "--admin") {
		t.Fatalf("missing --admin: %v", err)
	}
}

package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/caddytest"
)

// TestUpstreamErrorsAnswered: a request whose worker cannot be reached is answered with the JSON
// error body of DESIGN.md §8 (502 upstream_error; 503 upstream_unavailable once Caddy's passive
// health marked the only worker down), and every response carries X-Request-Id: the client's, or
// the generated id of the request's [ROUTING] log line (issue 11 item 4).
func TestUpstreamErrorsAnswered(t *testing.T) {
	dead := fmt.Sprintf("127.0.0.1:%d", caddytest.Port(t))
	e := startEdge(t, edgeConfig{Workers: []string{dead}, Proxy: "\t\t\tfail_duration 30s\n\t\t\tmax_fails 1\n"})
	cl := e.client(false)
	defer cl.CloseIdleConnections()
	post := func(id string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, e.https+"/v1/chat/completions", bytes.NewReader(chatBody("hi")))
		req.Header.Set("Content-Type", "application/json")
		if id != "" {
			req.Header.Set("X-Request-Id", id)
		}
		res, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}

	res, body := post("client-id-1")
	want := `{"error":{"code":"upstream_error","message":"the worker chosen for this request failed; retry the request"}}` + "\n"
	if res.StatusCode != 502 || body != want || res.Header.Get("Content-Type") != "application/json" || res.Header.Values("X-Request-Id")[0] != "client-id-1" || len(res.Header.Values("X-Request-Id")) != 1 {
		t.Errorf("dead worker: %d %q %v", res.StatusCode, body, res.Header)
	}

	res, body = post("")
	want = `{"error":{"code":"upstream_unavailable","message":"no worker is available for this request; retry later"}}` + "\n"
	gen := res.Header.Get("X-Request-Id")
	if res.StatusCode != 503 || body != want || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(gen) {
		t.Fatalf("worker marked down: %d %q X-Request-Id %q", res.StatusCode, body, gen)
	}
	// the generated id is the one the [ROUTING] line logged
	f, err := os.Open(e.caddyLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	found := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			Msg       string `json:"msg"`
			RequestID string `json:"request_id"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "[ROUTING]" && l.RequestID == gen {
			found = true
		}
	}
	if !found {
		t.Errorf("no [ROUTING] line with request_id %s in %s", gen, e.caddyLog)
	}

	// a client error carries the id too
	req, _ := http.NewRequest(http.MethodPost, e.https+"/v1/chat/completions", bytes.NewReader([]byte(`{"model":`)))
	req.Header.Set("X-Request-Id", "client-id-2")
	res, err = cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 400 || res.Header.Get("X-Request-Id") != "client-id-2" {
		t.Errorf("client error: %d X-Request-Id %q", res.StatusCode, res.Header.Get("X-Request-Id"))
	}
}

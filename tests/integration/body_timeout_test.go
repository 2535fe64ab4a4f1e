package integration

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestBodyTimeoutNamesTheDeadline: a body that stops arriving is answered 408 body_timeout
// through the TLS edge, and the message names the deadline that ended it: kvroute's read_timeout,
// or the server's `timeouts { read_body }` when that one is shorter (Caddy caps a handler's read
// deadline at it). Before, the message always named read_timeout, also when the server's 1 s
// deadline had ended the read.
func TestBodyTimeoutNamesTheDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: waits for body read deadlines (kvroute's read_timeout and the server's read_body) to expire, ~6 s")
	}
	for _, tc := range []struct {
		name, readTimeout, readBody, want string
	}{
		{"kvroute read_timeout first", "1s", "30s", "request body not received within 1s (kvroute read_timeout)"},
		{"server read_body first", "20s", "1s", "(the server's read timeout)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newFakeWorker(t, "w0")
			e := startEdge(t, edgeConfig{Workers: []string{w.addr()}, ReadTimeout: tc.readTimeout, ReadBody: tc.readBody})
			conn, err := tls.Dial("tcp", strings.TrimPrefix(e.https, "https://"), &tls.Config{RootCAs: e.roots, NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":")
			_ = conn.SetReadDeadline(time.Now().Add(40 * time.Second)) // a bound on a broken run only
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no response to the stalled body: %v", err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			var body struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if res.StatusCode != http.StatusRequestTimeout || json.Unmarshal(b, &body) != nil || body.Error.Code != "body_timeout" {
				t.Fatalf("status %d body %s, want 408 body_timeout", res.StatusCode, b)
			}
			if !strings.Contains(body.Error.Message, tc.want) {
				t.Errorf("message %q after %s, want it to contain %q", body.Error.Message, time.Since(start).Round(time.Millisecond), tc.want)
			}
			if w.count.Load() != 0 {
				t.Errorf("the worker received %d requests, want none", w.count.Load())
			}
		})
	}
}

// TestLongRequestOutlivesBodyTimeouts: over HTTP/1.1 through the TLS edge, an answer that takes
// 2.5 s, longer than kvroute's read_timeout (1 s), arrives whole with Caddyfile.example's server
// timeouts (read_header, idle, no read_body): kvroute's body deadline ends with the body. With the
// server's `read_body 1s`, which the example used to set (30 s), Go's server keeps the deadline on
// the connection while the handler runs and the same request is cut: why the example leaves it out.
func TestLongRequestOutlivesBodyTimeouts(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: two answers held 2.5 s each")
	}
	for _, tc := range []struct {
		name, readBody string
		whole          bool
	}{
		{"Caddyfile.example's timeouts", "", true},
		{"server read_body 1s", "1s", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newFakeWorker(t, "w0")
			w.gate = make(chan struct{})
			e := startEdge(t, edgeConfig{Workers: []string{w.addr()}, ReadTimeout: "1s", ReadBody: tc.readBody})
			hold := time.AfterFunc(2500*time.Millisecond, func() { close(w.gate) })
			defer hold.Stop()
			body := `{"model":"qwen","messages":[{"role":"user","content":"a long generation"}]}`
			res, err := e.client(false).Post(e.https+"/v1/chat/completions", "application/json", strings.NewReader(body))
			var status int
			var got []byte
			if err == nil {
				status = res.StatusCode
				got, err = io.ReadAll(res.Body)
				res.Body.Close()
			}
			if tc.whole && (err != nil || status != http.StatusOK || !json.Valid(got)) {
				t.Fatalf("status %d, %d bytes, err %v: want the worker's whole answer", status, len(got), err)
			}
			if !tc.whole && err == nil && status == http.StatusOK && json.Valid(got) {
				t.Fatalf("the answer arrived whole (%d bytes) although read_body (1 s) ended before it", len(got))
			}
			if w.count.Load() != 1 {
				t.Errorf("the worker received %d requests, want 1", w.count.Load())
			}
		})
	}
}

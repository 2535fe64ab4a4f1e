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

// TestBodyShorterThanContentLength (found by a fresh operator test): over TLS HTTP/1.1 through the
// Caddyfile.example chain, a client announces Content-Length 625, sends a complete 125-byte JSON
// object and half-closes; or sends it as one chunk of a chunked upload and half-closes without
// the last chunk. kvroute answers 400 body_invalid, routes nothing and forwards nothing (it
// answered 499 with an empty body and a routing decision, and took the chunked one as whole).
func TestBodyShorterThanContentLength(t *testing.T) {
	w := newFakeWorker(t, "w0")
	e := startEdge(t, edgeConfig{Workers: []string{w.addr()}})
	body := `{"model":"qwen","messages":[{"role":"user","content":"` + strings.Repeat("x", 125-len(`{"model":"qwen","messages":[{"role":"user","content":""}]}`)) + `"}]}`
	for _, tc := range []struct{ name, head, payload, want string }{
		{"content-length", fmt.Sprintf("Content-Length: %d", len(body)+500), body, "ended before the length its headers announced"},
		{"chunked", "Transfer-Encoding: chunked", fmt.Sprintf("%x\r\n%s\r\n", len(body), body), "ended before the length its headers announced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := tls.Dial("tcp", strings.TrimPrefix(e.https, "https://"), &tls.Config{RootCAs: e.roots, NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%s\r\n\r\n%s", tc.head, tc.payload)
			if err := conn.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second)) // a bound on a broken run only
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no response to the short body: %v", err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			var eb struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if res.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &eb) != nil || eb.Error.Code != "body_invalid" ||
				!strings.Contains(eb.Error.Message, tc.want) {
				t.Fatalf("status %d body %s, want 400 body_invalid saying %q", res.StatusCode, b, tc.want)
			}
			if res.Header.Get("X-Kvroute-Worker") != "" || w.count.Load() != 0 {
				t.Errorf("routed to %q, the worker received %d requests; want neither", res.Header.Get("X-Kvroute-Worker"), w.count.Load())
			}
		})
	}
}

package integration

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestStreamingReachesClientBeforeEnd: a streamed completion routed by kvroute reaches the client
// chunk by chunk. The first data event must arrive while the worker is still generating (the
// simulator still counts the request active); a writer that drops the proxy's flushes (kvroute's
// load writer over Caddy's ResponseWriterWrapper) delivers it only after the worker finished.
func TestStreamingReachesClientBeforeEnd(t *testing.T) {
	h := startHarness(t, []simSpec{{ID: "stream-a", Model: "qwen", TokenDelay: 300 * time.Millisecond}})
	body := mustJSON(t, map[string]any{"model": "qwen", "stream": true, "max_tokens": 4,
		"messages": []map[string]any{{"role": "user", "content": "Stream a short answer."}}})
	req, _ := http.NewRequest(http.MethodPost, h.base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("X-Kvroute-Worker") != "stream-a" {
		t.Fatalf("status %d worker %q", res.StatusCode, res.Header.Get("X-Kvroute-Worker"))
	}
	r := bufio.NewReader(res.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			break
		}
	}
	// Three more tokens at 300 ms each are still to come: the worker is mid-decode.
	if active := h.sims["stream-a"].srv.Active(); active != 1 {
		t.Fatalf("first chunk arrived with %d requests active on the worker: the stream was buffered to its end", active)
	}
	rest := new(bytes.Buffer)
	if _, err := rest.ReadFrom(r); err != nil || !strings.HasSuffix(rest.String(), "data: [DONE]\n\n") {
		t.Fatalf("rest of the stream %q, err %v", rest.String(), err)
	}
}

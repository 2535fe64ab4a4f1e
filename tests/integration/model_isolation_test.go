package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/caddytest"
)

// TestRequestsStayWithTheirModel (found by a fresh operator test): a site whose upstreams are the
// workers of every model (`dynamic kvroute` without a model), through the Caddyfile.example chain
// over TLS. While every worker of model qwen is down, a qwen request must not be sent to the
// worker of model other: it gets 502/503 and no X-Kvroute-Worker of the other model, and the other
// model's worker receives nothing for it. A request for model other is served by it all along,
// and a model no worker declares still goes to some worker (which answers for itself).
func TestRequestsStayWithTheirModel(t *testing.T) {
	other := newFakeWorker(t, "o1")
	dead := fmt.Sprintf("127.0.0.1:%d", caddytest.Port(t)) // qwen's only worker: nothing listens
	e := startEdge(t, edgeConfig{Workers: []string{dead, other.addr()}, Models: []string{"qwen", "other"}})
	cl := e.client(false)
	defer cl.CloseIdleConnections()
	post := func(model string) (int, string, string) {
		t.Helper()
		body := []byte(fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"which worker serves %s?"}]}`, model, model))
		res, err := cl.Post(e.https+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("X-Kvroute-Worker"), string(b)
	}
	for i := range 6 { // the first attempt marks w0 down; the later ones find it down
		before := other.count.Load()
		status, worker, body := post("qwen")
		if status != http.StatusBadGateway && status != http.StatusServiceUnavailable {
			t.Fatalf("qwen request %d: status %d (worker %q) %s; want 502 or 503", i, status, worker, body)
		}
		if worker == "w1" || other.count.Load() != before {
			t.Fatalf("qwen request %d went to the other model's worker (header %q, its requests %d → %d)", i, worker, before, other.count.Load())
		}
	}
	if status, worker, _ := post("other"); status != http.StatusOK || worker != "w1" {
		t.Fatalf("other-model request: status %d worker %q, want 200 from w1", status, worker)
	}
	if status, _, _ := post("unknown-model"); status != http.StatusOK {
		t.Fatalf("unknown model: status %d, want the live worker's answer", status)
	}
}

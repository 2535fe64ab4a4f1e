package integration

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/wait"
)

// scrape returns the admin endpoint's /metrics text.
func (h *harness) scrape(t *testing.T) string {
	t.Helper()
	return getText(t, h.client, h.admin+"/metrics")
}

// TestDecisionMetricsTruthful checks the decision metrics through Caddy (issue 15): a full hit is
// counted in the hit-ratio bucket le="1"; client-chosen model names do not create series (they
// count as model="other"); GET /v1/models is a not_routed decision, never an exact one, and
// explain says not_routed for such a path instead of null.
func TestDecisionMetricsTruthful(t *testing.T) {
	h := startHarness(t, []simSpec{{ID: "met-a", Model: "qwen"}, {ID: "met-b", Model: "qwen"}})
	const hist = "caddy_kvroute_predicted_hit_ratio_bucket"

	t.Run("full hit lands in le=1", func(t *testing.T) {
		body := textBody(t, "qwen", longText("Metrics full hit.", 300))
		h.chat(t, body).mustOK(t)
		h.waitEvents(t)
		le1, le09 := h.metric(t, hist, `le="1"`), h.metric(t, hist, `le="0.9"`)
		warm := h.chat(t, body).mustOK(t)
		if warm.overlap != warm.total || warm.total == 0 {
			t.Fatalf("warm: overlap %d of %d, want a full hit", warm.overlap, warm.total)
		}
		if d1, d09 := h.metric(t, hist, `le="1"`)-le1, h.metric(t, hist, `le="0.9"`)-le09; d1 != 1 || d09 != 0 {
			t.Fatalf("full hit: le=1 grew by %v, le=0.9 by %v; want 1 and 0", d1, d09)
		}
		text := h.scrape(t)
		for _, le := range []string{"0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1", "+Inf"} {
			if !strings.Contains(text, hist+`{le="`+le+`"}`) {
				t.Errorf("bucket le=%q missing", le)
			}
		}
		if strings.Contains(text, "0.30000000000000004") || strings.Contains(text, "0.9999999999999999") {
			t.Error("float-step bucket bounds exposed")
		}
	})

	t.Run("client model names are bounded", func(t *testing.T) {
		other := h.metric(t, "caddy_kvroute_decisions_total", `model="other"`)
		for i := 0; i < 5; i++ {
			name := fmt.Sprintf("random-model-%d-x7", i)
			if a := h.chat(t, textBody(t, name, "Hello there.")); a.fallback != "index_unavailable" {
				t.Fatalf("unknown model %s: fallback %q", name, a.fallback)
			}
			if strings.Contains(h.scrape(t), name) {
				t.Fatalf("model %q became a label value", name)
			}
		}
		if d := h.metric(t, "caddy_kvroute_decisions_total", `model="other"`) - other; d != 5 {
			t.Fatalf("model=\"other\" grew by %v, want 5", d)
		}
		if h.metric(t, "caddy_kvroute_decisions_total", `model="qwen"`) == 0 {
			t.Fatal("the served model has no decisions")
		}
	})

	t.Run("non-routed paths are not_routed", func(t *testing.T) {
		exact := h.metric(t, "caddy_kvroute_decisions_total", `fallback=""`)
		notRouted := h.metric(t, "caddy_kvroute_decisions_total", `fallback="not_routed"`)
		res, err := h.client.Get(h.base + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if got := res.Header.Get("X-Kvroute-Fallback"); got != "not_routed" {
			t.Errorf("GET /v1/models: fallback var %q, want not_routed", got)
		}
		if d := h.metric(t, "caddy_kvroute_decisions_total", `fallback="not_routed"`) - notRouted; d != 1 {
			t.Errorf("not_routed grew by %v, want 1", d)
		}
		if d := h.metric(t, "caddy_kvroute_decisions_total", `fallback=""`) - exact; d != 0 {
			t.Errorf("exact decisions grew by %v for GET /v1/models", d)
		}
		resp, err := h.client.Post(h.admin+"/kvroute/explain?path=/v1/models", "application/json",
			strings.NewReader(string(textBody(t, "qwen", "Hello."))))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"fallback":"not_routed"`) {
			t.Errorf("explain of /v1/models: %d %s", resp.StatusCode, b)
		}
		// The handler forwards such a path with no preference: explain names no worker either.
		if !strings.Contains(string(b), `"decision":{"worker_id":"","endpoint":""}`) {
			t.Errorf("explain of /v1/models names a worker the handler would not choose: %s", b)
		}
	})
}

// adminJSON decodes GET admin+path into v.
func (h *harness) adminJSON(t *testing.T, path string, v any) {
	t.Helper()
	getJSON(t, h.client, h.admin+path, v)
}

// workerState is the operating-state part of a GET /kvroute/workers element.
type workerState struct {
	WorkerID            string   `json:"worker_id"`
	Blocks              int64    `json:"blocks"`
	Healthy             bool     `json:"healthy"`
	ActivePrefillTokens int64    `json:"active_prefill_tokens"`
	ActiveDecodeBlocks  int64    `json:"active_decode_blocks"`
	RequestsInFlight    int64    `json:"requests_in_flight"`
	LastEventAgeSeconds *float64 `json:"last_event_age_seconds"`
}

// TestOperatingState checks the per-worker and router operating state in /metrics,
// /kvroute/workers and /kvroute/stats through Caddy (issue 15): while a request waits for its first
// byte on a slow worker, that worker shows exactly the request's uncached prompt tokens, its
// prompt blocks and one request in flight; all return to 0 when it ends; the event age and index
// blocks follow the worker's events; NATS, registry and decode-slot gauges describe the router.
func TestOperatingState(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: holds a request on a slow simulated worker to read the in-flight gauges, ~3 s")
	}
	h := startHarness(t, []simSpec{{ID: "state-slow", Model: "qwen", PrefillDelay: 1500 * time.Millisecond}})
	const w = `worker="state-slow"`
	if v := h.metric(t, "caddy_kvroute_worker_healthy", w); v != 1 {
		t.Fatalf("worker_healthy %v", v)
	}
	if v := h.metric(t, "caddy_kvroute_worker_last_event_age_seconds", w); v != 0 {
		t.Fatalf("event age %v before any event", v)
	}

	body := textBody(t, "qwen", longText("Operating state.", 400))
	ids := promptIDs(t, modelDir, body)
	tokens, blocks := int64(len(ids)), int64((len(ids)+blockSize-1)/blockSize)

	done := make(chan answer, 1)
	go func() { done <- h.chat(t, body) }()
	wait.For(t, "request in flight", func() bool { return h.metric(t, "caddy_kvroute_worker_requests_in_flight", w) == 1 })
	if p, d := h.metric(t, "caddy_kvroute_worker_active_prefill_tokens", w), h.metric(t, "caddy_kvroute_worker_active_decode_blocks", w); p != float64(tokens) || d != float64(blocks) {
		t.Fatalf("in flight: prefill %v decode %v; want %d tokens, %d blocks", p, d, tokens, blocks)
	}
	var ws []workerState
	h.adminJSON(t, "/kvroute/workers", &ws)
	if len(ws) != 1 || ws[0].ActivePrefillTokens != tokens || ws[0].ActiveDecodeBlocks != blocks || ws[0].RequestsInFlight != 1 || !ws[0].Healthy {
		t.Fatalf("/kvroute/workers in flight: %+v", ws)
	}
	if a := <-done; a.status != 200 || a.worker != "state-slow" {
		t.Fatalf("status %d worker %q", a.status, a.worker)
	}
	wait.For(t, "load released", func() bool {
		return h.metric(t, "caddy_kvroute_worker_requests_in_flight", w) == 0 && h.metric(t, "caddy_kvroute_worker_active_prefill_tokens", w) == 0 &&
			h.metric(t, "caddy_kvroute_worker_active_decode_blocks", w) == 0
	})

	h.waitEvents(t)
	if !strings.Contains(h.scrape(t), "caddy_kvroute_worker_last_event_age_seconds{"+w+"}") {
		t.Fatal("no event age after the worker's events")
	}
	if age := h.metric(t, "caddy_kvroute_worker_last_event_age_seconds", w); age < 0 || age > 30 {
		t.Fatalf("event age %v s right after the events", age)
	}
	h.adminJSON(t, "/kvroute/workers", &ws)
	if len(ws) != 1 || ws[0].LastEventAgeSeconds == nil || *ws[0].LastEventAgeSeconds > 30 || ws[0].Blocks < blocks-1 || ws[0].RequestsInFlight != 0 {
		t.Fatalf("/kvroute/workers after the events: %+v", ws)
	}

	if v := h.metric(t, "caddy_kvroute_nats_connected"); v != 1 {
		t.Errorf("nats_connected %v", v)
	}
	if v := h.metric(t, "caddy_kvroute_registry_workers"); v != 1 {
		t.Errorf("registry_workers %v", v)
	}
	if v := h.metric(t, "caddy_kvroute_media_inflight_bytes"); v != 0 {
		t.Errorf("media_inflight_bytes %v with no request in flight, want 0", v)
	}
	if busy, slots := h.metric(t, "caddy_kvroute_decode_slots_busy"), h.metric(t, "caddy_kvroute_decode_slots"); busy != 0 || slots != float64(runtime.NumCPU()) {
		t.Errorf("decode slots %v busy of %v, want 0 of %d", busy, slots, runtime.NumCPU())
	}
	var st struct {
		Router struct {
			NATSConnected      bool   `json:"nats_connected"`
			RegistryWorkers    int    `json:"registry_workers"`
			DecodeSlots        int    `json:"decode_slots"`
			MediaInflightBytes *int64 `json:"media_inflight_bytes"`
		} `json:"router"`
	}
	h.adminJSON(t, "/kvroute/stats", &st)
	if r := st.Router; !r.NATSConnected || r.RegistryWorkers != 1 || r.DecodeSlots != runtime.NumCPU() || r.MediaInflightBytes == nil || *r.MediaInflightBytes != 0 {
		t.Errorf("/kvroute/stats router %+v", r)
	}
}

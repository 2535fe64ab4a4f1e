package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// scrape returns the admin endpoint's /metrics text.
func (h *harness) scrape(t *testing.T) string {
	t.Helper()
	res, err := h.client.Get(h.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
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
	})
}

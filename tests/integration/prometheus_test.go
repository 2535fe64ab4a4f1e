package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/caddybin"
	"github.com/kvroute/kvroute/internal/testkit/caddytest"
)

const (
	dashboardFile = "../../docs/grafana/kvroute.json"
	alertsFile    = "../../docs/prometheus/kvroute-alerts.yml"
)

// dashboardTargets returns every panel's title and its target expressions, rows' nested panels
// included.
func dashboardTargets(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Type    string  `json:"type"`
		Title   string  `json:"title"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var d struct {
		UID    string  `json:"uid"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	out := map[string][]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no targets", p.Title)
			}
			for _, tg := range p.Targets {
				out[p.Title] = append(out[p.Title], tg.Expr)
			}
		}
	}
	walk(d.Panels)
	if d.UID != "kvroute" || len(out) == 0 {
		t.Fatalf("dashboard uid %q, %d panels", d.UID, len(out))
	}
	return out
}

// requirePrometheusEnv, when set (`make test` sets it: CI installs Prometheus with `make deps`),
// makes a missing prometheus or promtool binary fail the test instead of skipping it, so CI cannot
// pass without running it.
const requirePrometheusEnv = "KVROUTE_REQUIRE_PROMETHEUS"

// requirePrometheusBinary returns the path of the Prometheus tool name (prometheus, promtool). If
// it is not on PATH the test is skipped, or fails when requirePrometheusEnv is set.
func requirePrometheusBinary(t *testing.T, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err == nil {
		return bin
	}
	msg := fmt.Sprintf("%s not found (Debian package prometheus; `make deps` installs it): %v", name, err)
	if os.Getenv(requirePrometheusEnv) != "" {
		t.Fatalf("%s; %s is set, so the Prometheus test must run", msg, requirePrometheusEnv)
	}
	t.Skipf("%s; skipped (set %s=1 to make this a failure, as `make test` does)", msg, requirePrometheusEnv)
	return ""
}

// promServer is a Prometheus started for one test.
type promServer struct {
	base   string
	client *http.Client
	log    *caddybin.LockedBuffer
}

// startPrometheus runs Debian's prometheus (installed by `make deps`) on a random loopback port
// with its storage in a temporary folder, scraping Caddy's admin /metrics every second and loading
// the alert rules (evaluated every second). It is killed at the test's end and after 3 minutes at
// most.
func startPrometheus(t *testing.T, adminHostPort string) *promServer {
	t.Helper()
	bin := requirePrometheusBinary(t, "prometheus")
	dir := t.TempDir()
	rules, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %s
scrape_configs:
  - job_name: caddy
    metrics_path: /metrics
    static_configs:
      - targets: ["%s"]
`, rules, adminHostPort)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	port := caddytest.Port(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--web.console.templates="+dir, "--web.console.libraries="+dir)
	p := &promServer{base: fmt.Sprintf("http://127.0.0.1:%d", port), client: &http.Client{Timeout: 10 * time.Second}, log: &caddybin.LockedBuffer{}}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", p.log.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := p.client.Get(p.base + "/-/ready")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within 30s: %v\n%s", err, p.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// promResponse is the envelope of Prometheus's HTTP API.
type promResponse struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

func (p *promServer) get(t *testing.T, path string, q url.Values) promResponse {
	t.Helper()
	res, err := p.client.Get(p.base + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var r promResponse
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("GET %s: %s", path, b)
	}
	return r
}

// query evaluates expr now; it returns the API error ("" when it parsed and ran) and the number
// of series or samples in the result.
func (p *promServer) query(t *testing.T, expr string) (string, int) {
	t.Helper()
	r := p.get(t, "/api/v1/query", url.Values{"query": {expr}})
	if r.Status != "success" {
		return r.ErrorType + ": " + r.Error, 0
	}
	var d struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatal(err)
	}
	return "", len(d.Result)
}

// TestDashboardAndAlerts runs the operator's monitoring for real (issue 15): Prometheus scrapes a
// Caddy that routes text, video, a client error and a non-routed path to simulated workers;
// `promtool check rules` accepts the alert rules; Prometheus loads them and evaluates every rule
// without error; every dashboard expression parses and every panel returns data.
func TestDashboardAndAlerts(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: runs a real Prometheus that scrapes Caddy every second until every rule and panel has data, ~10 s")
	}
	promtool := requirePrometheusBinary(t, "promtool")
	requirePrometheusBinary(t, "prometheus")
	out, err := exec.Command(promtool, "check", "rules", alertsFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS: 7 rules found") {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	panels := dashboardTargets(t)
	t.Logf("%d dashboard panels", len(panels))

	h := startHarness(t, []simSpec{{ID: "prom-a", Model: "qwen"}, {ID: "prom-b", Model: "qwen"}})
	prom := startPrometheus(t, strings.TrimPrefix(h.admin, "http://"))

	// traffic: a text prompt twice (a full hit), a clip twice (decode, cache, layout verification),
	// a body that is not JSON (client error), GET /v1/models (not routed), an unknown model
	text := textBody(t, "qwen", longText("Dashboard traffic.", 200))
	h.chat(t, text).mustOK(t)
	video := mediaBody(t, "qwen", videoPart(h.media+"/a/vp9_640x360_30fps_10s.webm"), textPart("Describe this video."))
	h.chat(t, video).mustOK(t)
	h.waitEvents(t)
	h.chat(t, text).mustOK(t)
	h.chat(t, video).mustOK(t)
	if a := h.chat(t, []byte("{not json")); a.status != http.StatusBadRequest {
		t.Fatalf("invalid body: status %d", a.status)
	}
	if res, err := h.client.Get(h.base + "/v1/models"); err == nil {
		res.Body.Close()
	}
	h.chat(t, textBody(t, "no-such-model", "Hello."))
	h.waitEvents(t)

	// every panel: parses now, returns data once Prometheus has the samples rate() needs (index
	// gauges refresh every 5 s, so allow a while)
	pending := map[string]string{}
	deadline := time.Now().Add(60 * time.Second)
	for {
		for title, exprs := range panels {
			found := false
			for _, e := range exprs {
				apiErr, n := prom.query(t, e)
				if apiErr != "" {
					t.Fatalf("panel %q: expression %q does not evaluate: %s", title, e, apiErr)
				}
				found = found || n > 0
			}
			if found {
				delete(pending, title)
			} else {
				pending[title] = strings.Join(exprs, " | ")
			}
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for title, e := range pending {
				t.Errorf("panel %q returns no data: %s", title, e)
			}
			t.FailNow()
		}
		time.Sleep(time.Second)
		for title := range panels {
			if _, ok := pending[title]; !ok {
				delete(panels, title) // checked
			}
		}
	}

	// the rules: loaded, every one evaluated by Prometheus without error, and each expression
	// evaluates through the query API too
	var rules struct {
		Groups []struct {
			Rules []struct {
				Name           string `json:"name"`
				Query          string `json:"query"`
				Health         string `json:"health"`
				LastError      string `json:"lastError"`
				LastEvaluation string `json:"lastEvaluation"`
			} `json:"rules"`
		} `json:"groups"`
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		r := prom.get(t, "/api/v1/rules", url.Values{"type": {"alert"}})
		if r.Status != "success" || json.Unmarshal(r.Data, &rules) != nil {
			t.Fatalf("rules API: %+v", r)
		}
		n, evaluated := 0, 0
		for _, g := range rules.Groups {
			for _, rl := range g.Rules {
				n++
				if rl.Health == "ok" && !strings.HasPrefix(rl.LastEvaluation, "0001") {
					evaluated++
				}
				if rl.Health == "err" {
					t.Fatalf("rule %s: %s", rl.Name, rl.LastError)
				}
			}
		}
		if n != 7 {
			t.Fatalf("prometheus loaded %d alert rules, want 7", n)
		}
		if evaluated == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d rules evaluated healthy within 20s: %+v", evaluated, n, rules)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, g := range rules.Groups {
		for _, rl := range g.Rules {
			if apiErr, _ := prom.query(t, rl.Query); apiErr != "" {
				t.Errorf("alert %s: %q does not evaluate: %s", rl.Name, rl.Query, apiErr)
			}
		}
	}
	// on this healthy router none of the alerts is firing or pending
	if apiErr, n := prom.query(t, "ALERTS"); apiErr != "" || n != 0 {
		t.Errorf("ALERTS: %s, %d series on a healthy router", apiErr, n)
	}
}

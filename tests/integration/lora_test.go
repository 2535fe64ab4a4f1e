package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit"
	"github.com/kvroute/kvroute/internal/testkit/caddytest"
)

// loraSim is one simulator of the LoRA test: a vLLM stand-in serving model qwen and the given
// adapters, registered and publishing its KV events through the edge's embedded NATS.
type loraSim struct {
	*simWorker
	url string // http://host:port of the simulator itself (runtime adapter loading)
}

// startLoRASims starts one simulator per id with the adapters of adapters[id] and waits until the
// app lists them all.
func startLoRASims(t *testing.T, ids []string, adapters map[string][]string) map[string]*loraSim {
	t.Helper()
	m, lm := testkit.Models(t, modelDir)
	res := newSimResolver(t)
	natsURL := runningApp(t).NATS().URL()
	out := map[string]*loraSim{}
	for _, id := range ids {
		fe, err := sim.NewFrontend(&sim.FrontendConfig{ModelDir: modelDir, Model: m, LayoutModel: lm, Media: res, Contract: []byte(sim.HubContract)})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := natsutil.Connect(natsURL, &natsutil.ConnectConfig{Name: "kvroute-sim " + id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		w := &simWorker{spec: simSpec{ID: id, Model: "qwen"}}
		pub, err := sim.NewPublisher(&sim.PublisherConfig{WorkerID: id, Conn: nc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pub.Close() })
		bc, err := sim.NewBlockCache(&sim.BlockCacheConfig{BlockSize: blockSize, Capacity: 1 << 16})
		if err != nil {
			t.Fatal(err)
		}
		var mods []sim.LoRAModule
		for _, a := range adapters[id] {
			mods = append(mods, sim.LoRAModule{Name: a, Path: "/adapters/" + a})
		}
		w.pub = pub
		w.srv = sim.New(&sim.Config{WorkerID: id, Model: "qwen", BlockSize: blockSize, Frontend: fe, Blocks: bc, Events: pub, LoRAModules: mods})
		w.ts = httptest.NewServer(http.HandlerFunc(w.serveHTTP))
		t.Cleanup(w.ts.Close)
		w.ep = w.ts.Listener.Addr().String()
		reg, err := registerSim(nc, w)
		if err != nil {
			t.Fatalf("registering %s: %v", id, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = reg.Close(ctx)
		})
		out[id] = &loraSim{simWorker: w, url: w.ts.URL}
	}
	waitWorkers(t, func() bool { return len(runningApp(t).WorkerList()) == len(ids) }, "every simulator registered")
	return out
}

// waitWorkers waits (at most 10 s) until cond holds for the app's worker list.
func waitWorkers(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s (workers %+v)", what, runningApp(t).WorkerList())
		}
	}
}

// waitApplied waits until the edge's router applied every batch each simulator published.
func waitApplied(t *testing.T, c *http.Client, admin string, sims map[string]*loraSim) {
	t.Helper()
	for id, s := range sims {
		next := s.pub.Next()
		if next == 0 {
			continue
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			var ws []workerStatus
			getJSON(t, c, admin+"/kvroute/workers", &ws)
			done := false
			for _, w := range ws {
				done = done || (w.WorkerID == id && w.LastSeq != nil && *w.LastSeq >= next-1)
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("worker %s: events up to %d not applied within 10s", id, next-1)
			}
		}
	}
}

// agentTurn is the body of turn n (1-based) of a tool-using agent loop on model: the system prompt,
// the tool definition, the task, then for each earlier turn the assistant's tool call and the tool's
// result.
func agentTurn(t *testing.T, model, task string, n int) []byte {
	t.Helper()
	msgs := []map[string]any{
		{"role": "system", "content": "You are a database agent. Answer only after checking the data with run_sql."},
		{"role": "user", "content": task},
	}
	for i := 1; i < n; i++ {
		id := fmt.Sprintf("call_%d", i)
		query := fmt.Sprintf("SELECT region, SUM(amount) FROM orders WHERE quarter = %d GROUP BY region", i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": "", "tool_calls": []map[string]any{{"id": id, "type": "function",
				"function": map[string]any{"name": "run_sql", "arguments": fmt.Sprintf(`{"query": %q}`, query)}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": fmt.Sprintf("region | total\nnorth | %d\nsouth | %d\neast | %d\nwest | %d\n(4 rows, quarter %d)", 1000+i*37, 2000+i*11, 1500+i*5, 900+i*29, i)})
	}
	return mustJSON(t, map[string]any{"model": model, "messages": msgs, "max_tokens": 4, "tools": []map[string]any{{"type": "function", "function": map[string]any{
		"name": "run_sql", "description": "Run one read-only SQL query on the analytics database and return the rows as a table.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string", "description": "the SQL query"}}, "required": []string{"query"}},
	}}}})
}

// edgeAnswer is one response through the edge with its routing headers and the simulator's hit.
type edgeAnswer struct {
	status              int
	worker, fallback    string
	overlap, total, hit int
	cached              int
	body                string
}

func edgePost(t *testing.T, c *http.Client, url string, body []byte) edgeAnswer {
	t.Helper()
	res, err := c.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	a := edgeAnswer{status: res.StatusCode, worker: res.Header.Get("X-Kvroute-Worker"), fallback: res.Header.Get("X-Kvroute-Fallback"),
		overlap: atoiOr(res.Header.Get("X-Kvroute-Overlap-Blocks"), -1), total: atoiOr(res.Header.Get("X-Kvroute-Total-Blocks"), -1),
		hit: atoiOr(res.Header.Get(sim.HitBlocksHeader), -1), body: string(b)}
	var u struct {
		Usage struct {
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if json.Unmarshal(b, &u) == nil {
		a.cached = u.Usage.PromptTokensDetails.CachedTokens
	}
	return a
}

// modelsReceived returns the `model` of every chat body a simulator received.
func modelsReceived(t *testing.T, w *simWorker) []string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, b := range w.bodies {
		var r struct{ Model string }
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Model)
	}
	return out
}

// TestLoRAAgentLoop: through the operator's chain (Caddyfile.example over TLS, `dynamic kvroute
// qwen`) and three simulators of model qwen, two of which serve the LoRA adapter agent-lora
// (registered with their adapters), a 20-turn tool-using agent loop on the adapter: every turn goes
// to a worker serving the adapter, and from turn 2 on the router's overlap equals the blocks the
// simulator found cached and grows turn by turn. More conversations on the adapter never reach the
// worker without it; the same prompt on the base model shares no block with the adapter's; an
// adapter unloaded everywhere is routed on load over the base model's workers (adapter_not_served);
// the decisions count adapter requests under the base model's label.
func TestLoRAAgentLoop(t *testing.T) {
	e := startEdge(t, edgeConfig{})
	c := e.client(false)
	defer c.CloseIdleConnections()
	sims := startLoRASims(t, []string{"lora-a", "lora-b", "base-c"}, map[string][]string{"lora-a": {"agent-lora"}, "lora-b": {"agent-lora", "other-lora"}})
	serving := map[string]bool{"lora-a": true, "lora-b": true}
	var listed []struct {
		WorkerID string `json:"worker_id"`
		Adapters []struct {
			Name      string `json:"name"`
			BaseModel string `json:"base_model"`
		} `json:"adapters"`
	}
	getJSON(t, c, e.admin+"/kvroute/workers", &listed)
	if len(listed) != 3 || len(listed[0].Adapters) != 0 || listed[1].WorkerID != "lora-a" || len(listed[1].Adapters) != 1 ||
		listed[1].Adapters[0].Name != "agent-lora" || listed[1].Adapters[0].BaseModel != "qwen" || len(listed[2].Adapters) != 2 {
		t.Fatalf("/kvroute/workers adapters: %+v", listed)
	}

	const task = "Which region grew fastest over the last twenty quarters? Check every quarter."
	var holder string
	var overlaps []int
	prev := -1
	for n := 1; n <= 20; n++ {
		a := edgePost(t, c, e.https, agentTurn(t, "agent-lora", task, n))
		if a.status != 200 || !serving[a.worker] || a.fallback != "" {
			t.Fatalf("turn %d: status %d worker %q fallback %q: %.300s", n, a.status, a.worker, a.fallback, a.body)
		}
		if n == 1 {
			holder = a.worker
			if a.overlap != 0 || a.hit != 0 {
				t.Fatalf("turn 1: overlap %d hit %d on a cold fleet", a.overlap, a.hit)
			}
		} else {
			if a.worker != holder {
				t.Fatalf("turn %d went to %s, the conversation's blocks are on %s", n, a.worker, holder)
			}
			if a.overlap != a.hit || a.cached != a.hit*blockSize || a.overlap <= prev || a.overlap >= a.total {
				t.Fatalf("turn %d: router overlap %d, simulator hit %d (cached %d tokens), previous overlap %d, total %d",
					n, a.overlap, a.hit, a.cached, prev, a.total)
			}
		}
		prev = a.overlap
		overlaps = append(overlaps, a.overlap)
		waitApplied(t, c, e.admin, sims)
	}
	t.Logf("turn 20: %d blocks cached on %s (overlaps by turn: %v)", prev, holder, overlaps)

	// explain says which adapter and lists only its workers.
	var ex struct {
		Adapter    string `json:"adapter"`
		Candidates []struct {
			WorkerID      string `json:"worker_id"`
			OverlapBlocks int    `json:"overlap_blocks"`
		} `json:"candidates"`
	}
	res, err := c.Post(e.admin+"/kvroute/explain", "application/json", bytes.NewReader(agentTurn(t, "agent-lora", task, 20)))
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(res.Body).Decode(&ex)
	res.Body.Close()
	if err != nil || ex.Adapter != "agent-lora" || len(ex.Candidates) != 2 || ex.Candidates[0].WorkerID != holder || !serving[ex.Candidates[1].WorkerID] {
		t.Fatalf("explain: %v %+v", err, ex)
	}

	// Ten more conversations on the adapter, cold: spread over the adapter's workers only.
	for i := range 10 {
		a := edgePost(t, c, e.https, agentTurn(t, "agent-lora", fmt.Sprintf("Conversation %d: list the top customers of quarter %d.", i, i), 1+i%3))
		if a.status != 200 || !serving[a.worker] {
			t.Fatalf("conversation %d: status %d worker %q", i, a.status, a.worker)
		}
	}
	for _, model := range modelsReceived(t, sims["base-c"].simWorker) {
		if model == "agent-lora" {
			t.Fatal("an adapter request reached base-c, which does not serve the adapter")
		}
	}

	// The same 20-turn prompt on the base model: no block in common with the adapter's chain.
	waitApplied(t, c, e.admin, sims)
	base := edgePost(t, c, e.https, agentTurn(t, "qwen", task, 20))
	if base.status != 200 || base.fallback != "" || base.overlap != 0 || base.hit != 0 {
		t.Fatalf("base model, same prompt: status %d worker %q fallback %q overlap %d hit %d", base.status, base.worker, base.fallback, base.overlap, base.hit)
	}
	waitApplied(t, c, e.admin, sims)
	again := edgePost(t, c, e.https, agentTurn(t, "qwen", task, 20))
	if again.worker != base.worker || again.overlap != again.hit || again.overlap == 0 {
		t.Fatalf("base model repeat: worker %q (first %q) overlap %d hit %d", again.worker, base.worker, again.overlap, again.hit)
	}

	// Unload the adapter on both workers (vLLM's runtime LoRA API): their records drop it, and a
	// request on it is routed on load over qwen's workers, which answer for themselves (404 here).
	for _, id := range []string{"lora-a", "lora-b"} {
		res, err := http.Post(sims[id].url+"/v1/unload_lora_adapter", "application/json", strings.NewReader(`{"lora_name":"agent-lora"}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("unloading on %s: %d", id, res.StatusCode)
		}
	}
	waitWorkers(t, func() bool {
		for _, w := range runningApp(t).WorkerList() {
			if _, ok := w.Adapter("agent-lora"); ok {
				return false
			}
		}
		return true
	}, "no record lists agent-lora")
	gone := edgePost(t, c, e.https, agentTurn(t, "agent-lora", task, 3))
	if gone.fallback != "adapter_not_served" || gone.worker == "" || gone.status != http.StatusNotFound {
		t.Fatalf("unloaded adapter: status %d worker %q fallback %q: %.200s", gone.status, gone.worker, gone.fallback, gone.body)
	}
	// other-lora is still served by lora-b alone.
	if o := edgePost(t, c, e.https, agentTurn(t, "other-lora", task, 2)); o.status != 200 || o.worker != "lora-b" || o.fallback != "" {
		t.Fatalf("other-lora: status %d worker %q fallback %q", o.status, o.worker, o.fallback)
	}

	metrics := getText(t, c, e.admin+"/metrics")
	if strings.Contains(metrics, `model="agent-lora"`) || strings.Contains(metrics, `model="other-lora"`) {
		t.Error("an adapter name became a metric label")
	}
	if n := sumSamples(t, metrics, "caddy_kvroute_decisions_total", `model="qwen"`, `fallback=""`); n < 33 {
		t.Errorf("exact qwen decisions %v, want the adapter turns counted under qwen (>= 33)", n)
	}
	if n := sumSamples(t, metrics, "caddy_kvroute_decisions_total", `fallback="adapter_not_served"`); n != 1 {
		t.Errorf("adapter_not_served decisions %v, want 1", n)
	}
}

// TestStaticWorkerAdapters: static workers declare their adapters in the Caddyfile (`adapters`),
// through the operator's chain over TLS: requests on an adapter go only to the worker listing it,
// whatever their load; while the only worker of an adapter is down, its requests get 502/503 and
// never reach a worker without it; base model requests use every worker of the model.
func TestStaticWorkerAdapters(t *testing.T) {
	plain, lora := newFakeWorker(t, "plain"), newFakeWorker(t, "lora")
	dead := fmt.Sprintf("127.0.0.1:%d", caddytest.Port(t))
	workers := ""
	for _, w := range []struct{ id, ep, adapters string }{{"w0", plain.addr(), ""}, {"w1", lora.addr(), "\t\t\tadapters agent-lora\n"},
		{"w2", dead, "\t\t\tadapters dead-lora=qwen\n"}} {
		workers += fmt.Sprintf("\t\tworker %s {\n\t\t\tendpoint %s\n\t\t\tmodel qwen\n\t\t\tengine vllm\n\t\t\tblock_size 16\n%s\t\t}\n", w.id, w.ep, w.adapters)
	}
	e := startEdge(t, edgeConfig{App: workers})
	c := e.client(false)
	defer c.CloseIdleConnections()
	body := func(model string, i int) []byte {
		return []byte(fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"question %d for %s"}]}`, model, i, model))
	}
	for i := range 6 {
		if a := edgePost(t, c, e.https, body("agent-lora", i)); a.status != 200 || a.worker != "w1" || a.fallback != "" {
			t.Fatalf("agent-lora request %d: status %d worker %q fallback %q", i, a.status, a.worker, a.fallback)
		}
	}
	if plain.count.Load() != 0 || lora.count.Load() != 6 {
		t.Fatalf("adapter requests: w0 got %d, w1 got %d; want 0 and 6", plain.count.Load(), lora.count.Load())
	}
	for i := range 4 { // the first attempt marks w2 down; the later ones find it down
		a := edgePost(t, c, e.https, body("dead-lora", i))
		if a.status != http.StatusBadGateway && a.status != http.StatusServiceUnavailable {
			t.Fatalf("dead-lora request %d: status %d worker %q; want 502 or 503", i, a.status, a.worker)
		}
	}
	if plain.count.Load() != 0 || lora.count.Load() != 6 {
		t.Fatalf("a request for the down worker's adapter reached another worker: w0 %d, w1 %d", plain.count.Load(), lora.count.Load())
	}
	seen := map[string]bool{}
	for i := range 6 {
		a := edgePost(t, c, e.https, body("qwen", i))
		if a.status != 200 {
			t.Fatalf("base request %d: status %d worker %q", i, a.status, a.worker)
		}
		seen[a.worker] = true
	}
	if !seen["w0"] || seen["w2"] {
		t.Fatalf("base requests went to %v, want the live workers of qwen", seen)
	}
}

package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/kvroute/kvroute/caddymodule"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/routing/router"
)

// env is one running Caddy with two fake workers.
type env struct {
	w1, w2    *fakeWorker
	base      string // http://127.0.0.1:port
	admin     string
	deadAddr  string // a loopback address nothing listens on
	partial   *partialUpstream
	httpPort  int
	adminPort int
	client    *http.Client
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// caddyfile renders the test configuration; maxBody varies between loads (reload test).
func (e *env) caddyfile(maxBody string) string {
	return fmt.Sprintf(`{
	admin 127.0.0.1:%[1]d
	auto_https off
	persist_config off
	kvroute {
		embedded_nats {
			port random
		}
		worker w1 {
			endpoint http://%[3]s
			model m
			engine vllm
			block_size 16
		}
		worker w2 {
			endpoint %[4]s
			model m
			engine vllm
			block_size 16
		}
	}
}

http://127.0.0.1:%[2]d {
	route /small/* {
		uri strip_prefix /small
		kvroute {
			max_body_size 1KiB
		}
		reverse_proxy {
			dynamic kvroute m
			lb_policy kvroute
		}
	}
	route /retry/* {
		uri strip_prefix /retry
		kvroute
		reverse_proxy %[5]s %[7]s %[4]s {
			lb_policy kvroute {
				fallback first
			}
			lb_retries 2
			lb_retry_match {
				method POST
			}
			fail_duration 10s
			max_fails 1
		}
	}
	route {
		kvroute {
			max_body_size %[6]s
		}
		reverse_proxy {
			dynamic kvroute m
			lb_policy kvroute {
				fallback round_robin
			}
		}
	}
}
`, e.adminPort, e.httpPort, e.w1.addr(), e.w2.addr(), e.deadAddr, maxBody, e.partial.addr())
}

func (e *env) load(t *testing.T, maxBody string) {
	t.Helper()
	cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(e.caddyfile(maxBody)), nil)
	if err != nil {
		t.Fatalf("adapting: %v", err)
	}
	if err := caddy.Load(cfgJSON, true); err != nil {
		t.Fatalf("loading config: %v", err)
	}
	app := runningApp(t)
	app.SetDecider(retryDecider{dead: e.deadAddr, partial: e.partial.addr(), live: e.w2.addr()})
}

func runningApp(t *testing.T) *caddymodule.App {
	t.Helper()
	a, err := caddy.ActiveContext().App("kvroute")
	if err != nil {
		t.Fatal(err)
	}
	return a.(*caddymodule.App)
}

// retryDecider sends requests marked with X-Test-Route to the dead ("dead") or the
// body-swallowing ("partial") upstream first, with the live worker w2 as the next-best
// candidate; everything else gets no preference.
type retryDecider struct{ dead, partial, live string }

func (d retryDecider) Decide(_ context.Context, in *caddymodule.RouteInput) (*caddymodule.Decision, error) {
	first := ""
	switch in.Request.Header.Get("X-Test-Route") {
	case "dead":
		first = d.dead
	case "partial":
		first = d.partial
	default:
		return &caddymodule.Decision{}, nil
	}
	return &caddymodule.Decision{Result: router.Result{Chosen: &router.Candidate{WorkerID: "bad", Endpoint: first},
		Ranked: []router.Candidate{{WorkerID: "w2", Endpoint: d.live, Available: true}}}}, nil
}

func startEnv(t *testing.T) *env {
	t.Helper()
	e := &env{w1: newFakeWorker(t, "w1"), w2: newFakeWorker(t, "w2"), httpPort: freePort(t), adminPort: freePort(t)}
	e.deadAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	e.partial = newPartialUpstream(t, 64<<10)
	e.base = fmt.Sprintf("http://127.0.0.1:%d", e.httpPort)
	e.admin = fmt.Sprintf("http://127.0.0.1:%d", e.adminPort)
	e.client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	e.load(t, "64MiB")
	t.Cleanup(func() {
		if err := caddy.Stop(); err != nil {
			t.Errorf("stopping caddy: %v", err)
		}
	})
	return e
}

func (e *env) post(t *testing.T, path string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

// upstreamFails returns Caddy's passive-health failure count of the upstream dial address.
func upstreamFails(t *testing.T, e *env, dial string) int {
	t.Helper()
	res, err := e.client.Get(e.admin + "/reverse_proxy/upstreams")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ups []struct {
		Address string `json:"address"`
		Fails   int    `json:"fails"`
	}
	if err := json.NewDecoder(res.Body).Decode(&ups); err != nil {
		t.Fatal(err)
	}
	for _, u := range ups {
		if u.Address == dial {
			return u.Fails
		}
	}
	return -1
}

func chatBody(content string) []byte {
	b, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]any{{"role": "user", "content": content}}})
	return b
}

func TestKVRoute(t *testing.T) {
	e := startEnv(t)

	t.Run("both workers get traffic", func(t *testing.T) {
		b1, b2 := e.w1.count.Load(), e.w2.count.Load()
		for i := 0; i < 4; i++ {
			res, body := e.post(t, "/v1/chat/completions", chatBody(fmt.Sprint("hello ", i)), nil)
			if res.StatusCode != 200 || !bytes.Contains(body, []byte(`"object":"chat.completion"`)) {
				t.Fatalf("status %d body %s", res.StatusCode, body)
			}
		}
		if d1, d2 := e.w1.count.Load()-b1, e.w2.count.Load()-b2; d1 != 2 || d2 != 2 {
			t.Errorf("round robin fallback: w1 got %d, w2 got %d, want 2 and 2", d1, d2)
		}
	})

	t.Run("admin workers and stats", func(t *testing.T) {
		res, err := e.client.Get(e.admin + "/kvroute/workers")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		const state = `"active_prefill_tokens":0,"active_decode_blocks":0,"requests_in_flight":0,"last_event_age_seconds":null`
		want := fmt.Sprintf(`[{"worker_id":"w1","endpoint":"%s","model":"m","engine":"vllm","block_size":16,"contract_digest":"","blocks":0,"last_seq":null,"healthy":true,%s},`+
			`{"worker_id":"w2","endpoint":"%s","model":"m","engine":"vllm","block_size":16,"contract_digest":"","blocks":0,"last_seq":null,"healthy":true,%s}]`, e.w1.addr(), state, e.w2.addr(), state)
		if strings.TrimSpace(string(b)) != want {
			t.Errorf("workers:\n got %s\nwant %s", b, want)
		}
		res, err = e.client.Get(e.admin + "/kvroute/stats")
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(res.Body)
		res.Body.Close()
		// The index and event counters depend on timing (registration replays with no bridge to
		// answer them), so compare the fields that do not.
		var st struct {
			Models map[string]json.RawMessage                  `json:"models"`
			Index  struct{ Blocks int }                        `json:"index"`
			Events struct{ Received, Applied, Dropped uint64 } `json:"events"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("stats %s: %v", b, err)
		}
		wantModel := `{"workers":2,"block_size_agreement":true,"contract_agreement":false,"contract_digest":"","reason":""}`
		if string(st.Models["m"]) != wantModel || len(st.Models) != 1 {
			t.Errorf("stats models: got %s, want m: %s", b, wantModel)
		}
		if st.Index.Blocks != 0 || st.Events.Received != 0 || st.Events.Applied != 0 || st.Events.Dropped != 0 {
			t.Errorf("stats: no events were sent, got %s", b)
		}
	})

	big := chatBody(strings.Repeat("0123456789abcdef", 3<<20/16)) // 3 MiB of content
	sum := sha256.Sum256(big)
	wantSum := hex.EncodeToString(sum[:])

	t.Run("3 MB body arrives byte-identical", func(t *testing.T) {
		res, _ := e.post(t, "/v1/chat/completions", big, map[string]string{"X-Request-Id": "big-1"})
		if res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
		got := e.w1.lastRequest()
		if e.w2.lastRequest().RequestID == "big-1" {
			got = e.w2.lastRequest()
		}
		if got.RequestID != "big-1" || got.SHA256 != wantSum || got.ContentLength != fmt.Sprint(len(big)) || got.BodyLen != len(big) {
			t.Errorf("worker saw %+v, want sha %s length %d", got, wantSum, len(big))
		}
	})

	t.Run("chunked 3 MB body gets an exact Content-Length", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.base+"/v1/chat/completions", io.NopCloser(bytes.NewReader(big)))
		req.ContentLength = -1 // sent chunked
		req.Header.Set("X-Request-Id", "big-chunked")
		res, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		got := e.w1.lastRequest()
		if e.w2.lastRequest().RequestID == "big-chunked" {
			got = e.w2.lastRequest()
		}
		if res.StatusCode != 200 || got.RequestID != "big-chunked" || got.SHA256 != wantSum || got.ContentLength != fmt.Sprint(len(big)) {
			t.Errorf("status %d, worker saw %+v", res.StatusCode, got)
		}
	})

	t.Run("retry after a dead upstream resends the same bytes", func(t *testing.T) {
		before := e.w2.count.Load()
		res, body := e.post(t, "/retry/v1/chat/completions", big, map[string]string{"X-Request-Id": "big-dead", "X-Test-Route": "dead"})
		if res.StatusCode != 200 {
			t.Fatalf("status %d body %s", res.StatusCode, body)
		}
		got := e.w2.lastRequest()
		if e.w2.count.Load() != before+1 || got.RequestID != "big-dead" || got.SHA256 != wantSum || got.ContentLength != fmt.Sprint(len(big)) {
			t.Errorf("w2 saw %+v (count %d→%d)", got, before, e.w2.count.Load())
		}
		// the first attempt really went to the dead upstream: Caddy counted its failure
		if fails := upstreamFails(t, e, e.deadAddr); fails != 1 {
			t.Errorf("dead upstream fails = %d, want 1", fails)
		}
	})

	t.Run("retry after an upstream read part of the body resends all of it", func(t *testing.T) {
		before := e.w2.count.Load()
		res, body := e.post(t, "/retry/v1/chat/completions", big, map[string]string{"X-Request-Id": "big-partial", "X-Test-Route": "partial"})
		if res.StatusCode != 200 {
			t.Fatalf("status %d body %s", res.StatusCode, body)
		}
		if n := e.partial.read.Load(); n < 64<<10 {
			t.Fatalf("first attempt read %d bytes of the body, want >= %d", n, 64<<10)
		}
		got := e.w2.lastRequest()
		if e.w2.count.Load() != before+1 || got.RequestID != "big-partial" || got.SHA256 != wantSum || got.ContentLength != fmt.Sprint(len(big)) || got.BodyLen != len(big) {
			t.Errorf("w2 saw %+v (count %d→%d), want sha %s length %d", got, before, e.w2.count.Load(), wantSum, len(big))
		}
	})

	t.Run("client errors are answered and not forwarded", func(t *testing.T) {
		before := e.w1.count.Load() + e.w2.count.Load()
		res, body := e.post(t, "/v1/chat/completions", []byte(`{"model":"m","messages":[`), nil)
		if res.StatusCode != 400 || res.Header.Get("Content-Type") != "application/json" ||
			string(body) != `{"error":{"code":"body_invalid","message":"request body is not valid JSON"}}`+"\n" {
			t.Errorf("malformed: %d %s", res.StatusCode, body)
		}
		res, body = e.post(t, "/small/v1/chat/completions", chatBody(strings.Repeat("x", 2000)), nil)
		if res.StatusCode != 413 || !strings.HasPrefix(string(body), `{"error":{"code":"body_too_large","message":"request body of `) {
			t.Errorf("over cap: %d %s", res.StatusCode, body)
		}
		if after := e.w1.count.Load() + e.w2.count.Load(); after != before {
			t.Errorf("%d rejected requests reached a worker", after-before)
		}
	})

	t.Run("SSE events are not buffered", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.base+"/v1/chat/completions", bytes.NewReader(chatBody("stream please")))
		req.Header.Set("X-Test-Mode", "sse-step")
		res, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		// The worker holds its second event until we release it, so reading the first one proves
		// Caddy forwarded it as produced. A buffering proxy would block here until the client
		// timeout fails the test.
		r := bufio.NewReader(res.Body)
		line, err := r.ReadString('\n')
		if err != nil || line != "data: {\"n\":1}\n" {
			t.Fatalf("first event %q, %v", line, err)
		}
		close(e.w1.release)
		close(e.w2.release)
		rest, _ := io.ReadAll(r)
		if string(rest) != "\ndata: {\"n\":2}\n\ndata: [DONE]\n\n" {
			t.Errorf("rest %q", rest)
		}
	})

	t.Run("client disconnect cancels the upstream without leaks", func(t *testing.T) {
		e.client.CloseIdleConnections()
		ignore := goleak.IgnoreCurrent()
		tr := &http.Transport{DisableKeepAlives: true}
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/v1/chat/completions", bytes.NewReader(chatBody("forever")))
		req.Header.Set("X-Test-Mode", "sse-forever")
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(res.Body)
		for i := 0; i < 3; i++ { // three events
			if _, err := r.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			if _, err := r.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
		}
		closed := time.Now()
		cancel()
		res.Body.Close()
		var at time.Time
		select {
		case at = <-e.w1.canceled:
		case at = <-e.w2.canceled:
		case <-time.After(5 * time.Second):
			t.Fatal("the upstream never saw the cancel")
		}
		if d := at.Sub(closed); d > time.Second {
			t.Errorf("upstream saw the cancel after %s, want within 1s", d)
		}
		tr.CloseIdleConnections()
		goleak.VerifyNone(t, ignore)
	})

	t.Run("reload keeps the NATS connection", func(t *testing.T) {
		n := runningApp(t).NATS()
		if n == nil || !n.Embedded() || !n.Conn().IsConnected() {
			t.Fatalf("nats state %+v", n)
		}
		conn, created := n.Conn(), n.Created()
		e.load(t, "32MiB") // a different config: Caddy really reloads
		n2 := runningApp(t).NATS()
		if n2 == nil || n2.Conn() != conn || !n2.Created().Equal(created) || !conn.IsConnected() {
			t.Fatalf("reload replaced the NATS state: %p→%p", conn, n2.Conn())
		}
		// the registry still works through the kept connection: a worker registering now is
		// listed by the new config
		js, err := jetstream.New(conn)
		if err != nil {
			t.Fatal(err)
		}
		kv, err := registry.OpenBucket(context.Background(), js)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := registry.NewPublisher(kv, registry.Worker{WorkerID: "w3", Endpoint: "127.0.0.1:1", Model: "other", Engine: "vllm", BlockSize: 16}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(runningApp(t).WorkerList()) != 3 {
			if time.Now().After(deadline) {
				t.Fatalf("w3 not listed: %+v", runningApp(t).WorkerList())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := pub.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		for len(runningApp(t).WorkerList()) != 2 {
			if time.Now().After(deadline) {
				t.Fatal("w3 not removed after deregistering")
			}
			time.Sleep(10 * time.Millisecond)
		}
		// requests still flow after the reload
		res, _ := e.post(t, "/v1/chat/completions", chatBody("after reload"), nil)
		if res.StatusCode != 200 {
			t.Errorf("after reload: %d", res.StatusCode)
		}
	})
}

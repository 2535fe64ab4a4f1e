package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit"
	"github.com/kvroute/kvroute/internal/testkit/caddytest"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/routing/mediaresolver"
	"github.com/kvroute/kvroute/routing/router"
	"github.com/kvroute/kvroute/routing/scheduler"
)

const (
	modelDir  = "../../testdata/golden/qwen3vl-test-model"
	videoDir  = "../../testdata/video"
	blockSize = 16
	// visionStart is <|vision_start|> of the test model's config.json.
	visionStart = 151652
)

// newSimResolver returns the media resolver the simulators of one harness share (its decode cache
// is keyed by the clip bytes and the contract digest, so simulators with different contracts do
// not mix); it is closed at the test's end.
func newSimResolver(t *testing.T) *mediaresolver.Resolver { return testkit.LoopbackResolver(t) }

// simSpec describes one in-process simulator of a harness.
type simSpec struct {
	ID, Model    string
	Contract     string        // contract JSON; "" = sim.HubContract
	Oracle       []uint32      // oracle mode tokens; nil = the simulator's own expansion
	PrefillDelay time.Duration // delay before the first token
	TokenDelay   time.Duration // delay before each further token
	BlockSize    int           // KV block size (the attention group's with Hybrid); 0 = blockSize
	Hybrid       bool          // publish like a hybrid vLLM worker (sim.PublisherConfig.Hybrid)
	MaxRunning   int           // sequences running at once (sim.Config.MaxRunning); 0 = unbounded
	CacheBlocks  int           // prefix cache capacity in blocks (sim.BlockCacheConfig.Capacity); 0 = 1<<16
}

// simWorker is one running simulator with what reached it.
type simWorker struct {
	spec simSpec
	srv  *sim.Server
	ts   *httptest.Server
	pub  *sim.Publisher
	ep   string

	count  atomic.Int64 // chat requests received
	mu     sync.Mutex   // guards bodies
	bodies [][]byte     // every received body, in arrival order

	// nonAttention counts the published events of KV cache groups other than the attention group
	// (the hybrid simulator's Mamba group), decoded from every batch as published.
	nonAttention atomic.Int64
}

func (w *simWorker) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/completions") {
		b, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		w.bodies = append(w.bodies, b)
		w.mu.Unlock()
		w.count.Add(1)
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	w.srv.Handler().ServeHTTP(rw, r)
}

// countGroups counts a published batch's events of KV cache groups other than 0.
func (w *simWorker) countGroups(m sim.Message) {
	bt, err := codec.Decode(codec.VLLM, m.Payload)
	if err != nil {
		return
	}
	for _, ev := range bt.Events {
		if ev.HasGroupIdx && ev.GroupIdx != 0 {
			w.nonAttention.Add(1)
		}
	}
}

// lastBody returns the last body the simulator received.
func (w *simWorker) lastBody() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.bodies) == 0 {
		return nil
	}
	return w.bodies[len(w.bodies)-1]
}

// harness is one in-process Caddy (kvroute app with the test model, loopback media allowed,
// embedded NATS on a random port; the site over TLS as in Caddyfile.example, setSite) in front of
// simulators that register and publish their KV events through that NATS server, plus a loopback
// file server for the clips.
type harness struct {
	modelDir    string                  // the model folder of Caddy and of the simulators
	base, admin string                  // https://127.0.0.1:port of the site, http://127.0.0.1:port of the admin endpoint
	media       string                  // http://127.0.0.1:port of the clip server (/a/ and /b/ serve testdata/video)
	res         *mediaresolver.Resolver // the simulators' media resolver
	client      *http.Client            // trusts tls's CA (siteTLS.client)
	tls         siteTLS                 // the site's certificate
	sims        map[string]*simWorker
	byEndpoint  map[string]*simWorker
	order       []*simWorker
	opts        harnessOpts
	// httpPort and adminPort are the (TLS) site's and the admin endpoint's ports (kept by reload).
	httpPort, adminPort int
	reloadedAt          time.Time // when reload last loaded a config (closedByReload)
}

// harnessOpts varies the harness's Caddyfile.
type harnessOpts struct {
	// siteDirectives are put in the site block before `kvroute` (e.g. a `tracing` block); the
	// site always has the chain of Caddyfile.example (TLS, deferred header, encode, log).
	siteDirectives string
	// accessLog is the file the site's access log is written to ("" = discarded; the log handler
	// runs either way).
	accessLog string
	// mediaOpts are extra lines of the kvroute media block.
	mediaOpts string
	// appOpts are extra lines of the kvroute app block (e.g. an `index` block).
	appOpts string
	// caddyModelDir is Caddy's model_dir when it differs from the simulators' model folder ("" =
	// the same).
	caddyModelDir string
	// proxyOpts are extra lines of the reverse_proxy block (e.g. `lb_retries 1`).
	proxyOpts string
	// nats replaces the app's `embedded_nats { port random }` block (e.g. a `nats_url` line).
	nats string
	// simCodecs are the video codecs the simulators decode (nil: vp8, vp9).
	simCodecs []string
}

func (h *harness) caddyfile(httpPort, adminPort int) string {
	caddyModel := h.modelDir
	if h.opts.caddyModelDir != "" {
		caddyModel = h.opts.caddyModelDir
	}
	natsBlock := "embedded_nats {\n\t\t\tport random\n\t\t}"
	if h.opts.nats != "" {
		natsBlock = h.opts.nats
	}
	accessLog := "discard"
	if h.opts.accessLog != "" {
		accessLog = "file " + h.opts.accessLog
	}
	return fmt.Sprintf(`{
	admin 127.0.0.1:%d
	%s
	kvroute {
		%s
		model_dir %s
		media {
			allow_loopback
			%s
		}
%s
	}
}

https://127.0.0.1:%d {
	tls %s %s
	header {
		defer
		X-Kvroute-Worker {http.vars.kvroute.worker}
		X-Kvroute-Overlap-Blocks {http.vars.kvroute.overlap_blocks}
		X-Kvroute-Total-Blocks {http.vars.kvroute.total_blocks}
		X-Kvroute-Fallback {http.vars.kvroute.fallback}
	}
	encode zstd gzip
%s
	kvroute
	reverse_proxy {
		dynamic kvroute
		lb_policy kvroute {
			fallback round_robin
		}
%s
	}
	log {
		output %s
	}
}
`, adminPort, caddytest.QuietGlobals, natsBlock, caddyModel, h.opts.mediaOpts, h.opts.appOpts, httpPort, h.tls.certFile, h.tls.keyFile, h.opts.siteDirectives, h.opts.proxyOpts, accessLog)
}

// testPNG is a w×h image whose pixels depend on seed.
func testPNG(t *testing.T, w, h int, seed uint8) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x) + seed, uint8(y) * seed, uint8(x ^ y), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// harnessOption is one option of startHarness: a harnessOpts (the Caddyfile's variations, also
// what reload takes) or a modelFolder.
type harnessOption interface{ apply(*harness) }

// apply makes o the harness's Caddyfile options.
func (o harnessOpts) apply(h *harness) { h.opts = o }

// modelFolder is the model folder of Caddy and of the simulators when it is not the test model
// (modelDir); a harnessOpts.caddyModelDir still overrides Caddy's.
type modelFolder string

func (d modelFolder) apply(h *harness) { h.modelDir = string(d) }

// newHarness is a harness with opts and no Caddy, clip server or simulators yet: startHarness
// builds on it, and the tests that start Caddy their own way (a NATS cluster, NATS after Caddy).
func newHarness(opts ...harnessOption) *harness {
	h := &harness{modelDir: modelDir, sims: map[string]*simWorker{}, byEndpoint: map[string]*simWorker{}}
	for _, o := range opts {
		o.apply(h)
	}
	return h
}

// startHarness starts Caddy, the clip server and the simulators, and waits until the app lists
// every simulator. Everything stops at the test's end. Without options Caddy and the simulators
// use the test model (modelDir) and the Caddyfile has no extra lines; the clip server's
// /stall/<n> sends n bytes and then nothing until the client goes away.
func startHarness(t *testing.T, specs []simSpec, opts ...harnessOption) *harness {
	t.Helper()
	h := newHarness(opts...)
	m, lm := testkit.Models(t, h.modelDir)
	res := testkit.ResolverCodecs(t, true, h.opts.simCodecs)

	// clip server: the same folder under two prefixes, two generated images and random bytes
	rnd := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(7, 7))
	for i := range rnd {
		rnd[i] = byte(r.Uint32())
	}
	img1, img2 := testPNG(t, 300, 200, 1), testPNG(t, 256, 256, 2)
	mux := http.NewServeMux()
	mux.Handle("/a/", http.StripPrefix("/a/", http.FileServer(http.Dir(videoDir))))
	mux.Handle("/b/", http.StripPrefix("/b/", http.FileServer(http.Dir(videoDir))))
	mux.HandleFunc("/random.webm", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(rnd) })
	mux.HandleFunc("/img1.png", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(img1) })
	mux.HandleFunc("/img2.png", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(img2) })
	mux.HandleFunc("/stall/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/stall/"))
		_, _ = w.Write(make([]byte, n))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	ms := httptest.NewServer(mux)
	t.Cleanup(ms.Close)

	h.media, h.res = ms.URL, res
	httpPort, adminPort := caddytest.Port(t), caddytest.Port(t)
	h.setSite(t, httpPort, adminPort)
	// registered first: runs last, after the simulators deregistered
	caddytest.Start(t, h.caddyfile(httpPort, adminPort), h.client.CloseIdleConnections)
	n := runningApp(t).NATS()
	if n == nil {
		t.Fatal("kvroute app has no NATS state")
	}
	natsURL := n.URL()

	for _, sp := range specs {
		contract := sp.Contract
		if contract == "" {
			contract = sim.HubContract
		}
		fe, err := sim.NewFrontend(&sim.FrontendConfig{ModelDir: h.modelDir, Model: m, LayoutModel: lm, Media: res,
			Contract: []byte(contract), OracleTokens: sp.Oracle})
		if err != nil {
			t.Fatalf("simulator %s: %v", sp.ID, err)
		}
		nc, err := natsutil.Connect(natsURL, &natsutil.ConnectConfig{Name: "kvroute-sim " + sp.ID})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		bs := sp.BlockSize
		if bs == 0 {
			bs = blockSize
		}
		w := &simWorker{spec: sp}
		pub, err := sim.NewPublisher(&sim.PublisherConfig{WorkerID: sp.ID, Conn: nc, Hybrid: sp.Hybrid, OnPublish: w.countGroups})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pub.Close() })
		capacity := sp.CacheBlocks
		if capacity == 0 {
			capacity = 1 << 16
		}
		bc, err := sim.NewBlockCache(&sim.BlockCacheConfig{BlockSize: bs, Capacity: capacity})
		if err != nil {
			t.Fatal(err)
		}
		w.pub = pub
		w.srv = sim.New(&sim.Config{WorkerID: sp.ID, Model: sp.Model, BlockSize: bs, PrefillDelay: sp.PrefillDelay,
			TokenDelay: sp.TokenDelay, MaxRunning: sp.MaxRunning, Frontend: fe, Blocks: bc, Events: pub})
		w.ts = httptest.NewServer(http.HandlerFunc(w.serveHTTP))
		t.Cleanup(w.ts.Close)
		w.ep = w.ts.Listener.Addr().String()
		reg, err := registerSim(nc, w)
		if err != nil {
			t.Fatalf("registering %s: %v", sp.ID, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = reg.Close(ctx)
		})
		h.sims[sp.ID], h.byEndpoint[w.ep] = w, w
		h.order = append(h.order, w)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(runningApp(t).WorkerList()) != len(specs) {
		if time.Now().After(deadline) {
			t.Fatalf("app lists %d workers, want %d", len(runningApp(t).WorkerList()), len(specs))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return h
}

// setSite points h at a Caddy whose TLS site listens on 127.0.0.1:httpPort and whose admin
// endpoint on 127.0.0.1:adminPort: base and admin, the site's certificate (generated on the first
// call; caddyfile serves it) and a new client trusting it. Every harness is built through it, so
// its site is the TLS site of Caddyfile.example.
func (h *harness) setSite(t testing.TB, httpPort, adminPort int) {
	t.Helper()
	if h.tls.roots == nil {
		h.tls = newSiteTLS(t)
	}
	h.httpPort, h.adminPort = httpPort, adminPort
	h.base = fmt.Sprintf("https://127.0.0.1:%d", httpPort)
	h.admin = fmt.Sprintf("http://127.0.0.1:%d", adminPort)
	h.client = h.tls.client()
}

// reload loads the harness's Caddyfile again with opts (same ports, same simulators): a real
// Caddy config reload, the NATS state and the event core surviving it.
func (h *harness) reload(t *testing.T, opts harnessOpts) {
	t.Helper()
	h.opts = opts
	caddytest.MustLoad(t, h.caddyfile(h.httpPort, h.adminPort))
	// The old server closes its idle keep-alive connections as it stops; a POST sent on one of
	// them in that instant is reset and net/http does not retry a POST. A client of a reloaded
	// Caddy dials anew, as a real client retrying would.
	h.client.CloseIdleConnections()
	h.reloadedAt = time.Now()
}

// closedByReload reports whether err is a connection the server closed without an answer (EOF,
// reset) within a few seconds of a reload: a connection the replaced server accepted just before
// it stopped (seen once in a full -race run, stop 23). post sends such a request once more on a
// new connection, as a client would; a server that fails the request itself fails it again.
func (h *harness) closedByReload(err error) bool {
	return !h.reloadedAt.IsZero() && time.Since(h.reloadedAt) < 5*time.Second &&
		(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET))
}

func registerSim(nc *nats.Conn, w *simWorker) (*sim.Registration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return sim.RegisterConn(ctx, nc, w.ep, w.srv, nil)
}

// workerStatus is one element of GET /kvroute/workers.
type workerStatus struct {
	WorkerID string  `json:"worker_id"`
	Blocks   int64   `json:"blocks"`
	LastSeq  *uint64 `json:"last_seq"`
}

func (h *harness) workers(t *testing.T) map[string]workerStatus {
	t.Helper()
	var ws []workerStatus
	h.adminJSON(t, "/kvroute/workers", &ws)
	out := map[string]workerStatus{}
	for _, w := range ws {
		out[w.WorkerID] = w
	}
	return out
}

// waitSeq waits (at most 10 s) until /kvroute/workers shows the worker's last_seq at seq or
// beyond: the router applied its events up to that batch.
func (h *harness) waitSeq(t *testing.T, id string, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w := h.workers(t)[id]
		if w.LastSeq != nil && *w.LastSeq >= seq {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %s: last_seq %v did not reach %d within 10s", id, w.LastSeq, seq)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitEvents waits until the router applied every batch each simulator published so far.
func (h *harness) waitEvents(t *testing.T) {
	t.Helper()
	for _, w := range h.order {
		if next := w.pub.Next(); next > 0 {
			h.waitSeq(t, w.spec.ID, next-1)
		}
	}
}

// answer is one proxied response with the routing headers and the simulator's usage.
type answer struct {
	status               int
	body                 []byte
	worker, fallback     string
	overlap, total       int
	hitBlocks            int // X-Kvroute-Sim-Hit-Blocks (-1 when absent)
	promptTokens, cached int
	sim                  *simWorker // the simulator that answered (by its worker id header)
	header               http.Header
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}

// chat posts body to /v1/chat/completions through Caddy.
func (h *harness) chat(t *testing.T, body []byte) answer {
	t.Helper()
	return h.post(t, "/v1/chat/completions", body)
}

// post posts body to path through Caddy and reads the routing headers and the usage.
func (h *harness) post(t *testing.T, path string, body []byte) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := h.client.Do(req)
	if err != nil && h.closedByReload(err) {
		t.Logf("POST right after a reload: %v; sending it again on a new connection", err)
		h.client.CloseIdleConnections()
		req, _ = http.NewRequest(http.MethodPost, h.base+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, err = h.client.Do(req)
	}
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer res.Body.Close()
	if res.TLS == nil || len(res.TLS.VerifiedChains) == 0 {
		t.Fatalf("POST %s: answered without a verified TLS connection", path)
	}
	b, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, body: b, header: res.Header,
		worker:    res.Header.Get("X-Kvroute-Worker"),
		fallback:  res.Header.Get("X-Kvroute-Fallback"),
		overlap:   atoiOr(res.Header.Get("X-Kvroute-Overlap-Blocks"), -1),
		total:     atoiOr(res.Header.Get("X-Kvroute-Total-Blocks"), -1),
		hitBlocks: atoiOr(res.Header.Get(sim.HitBlocksHeader), -1)}
	a.sim = h.sims[a.worker]
	var u struct {
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if json.Unmarshal(b, &u) == nil {
		a.promptTokens, a.cached = u.Usage.PromptTokens, u.Usage.PromptTokensDetails.CachedTokens
	}
	return a
}

// mustOK fails unless the request was answered 200 by a known simulator, with routing headers.
func (a answer) mustOK(t *testing.T) answer {
	t.Helper()
	if a.status != 200 || a.sim == nil || a.total < 0 || a.overlap < 0 {
		t.Fatalf("status %d worker %q overlap %d total %d fallback %q body %.300s", a.status, a.worker, a.overlap, a.total, a.fallback, a.body)
	}
	return a
}

// explainResp is the body of POST /kvroute/explain.
type explainResp struct {
	Model       *string               `json:"model"`
	Fallback    *string               `json:"fallback"`
	Detail      string                `json:"detail"`
	TotalBlocks int                   `json:"total_blocks"`
	Media       []router.MediaSummary `json:"media"` // its keys are pinned by caddymodule's TestExplainJSONShape
	Candidates  []struct {
		WorkerID            string          `json:"worker_id"`
		OverlapBlocks       int             `json:"overlap_blocks"`
		Cost                float64         `json:"cost"`
		Terms               scheduler.Terms `json:"terms"`
		ActivePrefillTokens int64           `json:"active_prefill_tokens"`
		ActiveRequests      int64           `json:"active_requests"`
		Busy                bool            `json:"busy"`
		RecentRequests      float64         `json:"recent_requests"`
		OverBalance         bool            `json:"over_balance"`
	} `json:"candidates"`
	CostModel     string `json:"cost_model"`
	RequestTokens int    `json:"request_tokens"`
	Decision      struct {
		WorkerID string `json:"worker_id"`
	} `json:"decision"`
}

func (e explainResp) fallback() string {
	if e.Fallback == nil {
		return ""
	}
	return *e.Fallback
}

// textPrefixOnly checks a request whose one clip differs from the clip of identity refID and whose
// text is the same: it is routed exactly under its own identity and credited at most the prefix
// (> 0) complete blocks of text before its clip.
func (h *harness) textPrefixOnly(t *testing.T, body []byte, refID string, prefix int) {
	t.Helper()
	e := h.explain(t, body)
	if e.fallback() != "" || len(e.Media) != 1 || e.Media[0].Identity == refID {
		t.Fatalf("other clip explain: %+v", e)
	}
	got := h.chat(t, body).mustOK(t)
	if got.fallback != "" || got.overlap > prefix || prefix == 0 {
		t.Fatalf("other clip: overlap %d, text prefix %d blocks, fallback %q", got.overlap, prefix, got.fallback)
	}
	t.Logf("other clip: text prefix %d blocks, overlap %d on %s", prefix, got.overlap, got.worker)
}

// coldChat sends a request that must be routed exactly (no fallback) and waits until the
// simulators' KV events for it are applied.
func (h *harness) coldChat(t *testing.T, body []byte) answer {
	t.Helper()
	cold := h.chat(t, body).mustOK(t)
	if cold.fallback != "" {
		t.Fatalf("cold: fallback %q", cold.fallback)
	}
	h.waitEvents(t)
	return cold
}

func (h *harness) explain(t *testing.T, body []byte) explainResp {
	t.Helper()
	res, err := h.client.Post(h.admin+"/kvroute/explain", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("explain: %d %s", res.StatusCode, b)
	}
	var e explainResp
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("explain %s: %v", b, err)
	}
	return e
}

// metric sums the samples of a metric on Caddy's admin /metrics whose label set contains every
// given `name="value"` pair.
func (h *harness) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	return sumSamples(t, h.scrape(t), name, labels...)
}

// totalRequests is the chat requests received by all simulators.
func (h *harness) totalRequests() int64 {
	var n int64
	for _, w := range h.order {
		n += w.count.Load()
	}
	return n
}

// promptTextPrefixBlocks is the number of complete blocks before the first <|vision_start|> of the
// request's rendered prompt (the test model's own template and tokenizer).
func promptTextPrefixBlocks(t *testing.T, body []byte) int {
	t.Helper()
	ids := promptIDs(t, modelDir, body)
	for i, id := range ids {
		if id == visionStart {
			return i / blockSize
		}
	}
	return len(ids) / blockSize
}

// promptIDs are the token ids of the request body's rendered prompt with the template and
// tokenizer of the model folder dir.
func promptIDs(t *testing.T, dir string, body []byte) []uint32 {
	t.Helper()
	m, _ := testkit.Models(t, dir)
	_, _, ids := testkit.Prompt(t, m, body)
	return ids
}

// mustJSON marshals v (maps keep sorted keys: bodies are deterministic).
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

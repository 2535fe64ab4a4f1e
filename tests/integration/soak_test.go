package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit/caddytest"
)

// TestSoak runs mixed hostile and normal traffic through an in-process Caddy with the
// Caddyfile.example directive chain (encode, route, kvroute, reverse_proxy with retries,
// respond, log) for KVROUTE_SOAK (a duration, e.g. 10m; unset: skipped, so `make test` never
// runs it), samples RSS, the live heap (after runtime.GC()) and the goroutine count every 10 s,
// and fails unless, after the first fifth of the run, the live heap and goroutine slopes are
// under 1 % per minute and RSS stays under 400 MB. The process holds Caddy, the two upstreams,
// the clip server and the clients, so every figure is an upper bound of Caddy's.
//
//	KVROUTE_SOAK=10m nice go test -count=1 -run TestSoak -timeout 30m -v ./tests/integration/
func TestSoak(t *testing.T) {
	dur, err := time.ParseDuration(os.Getenv("KVROUTE_SOAK"))
	if err != nil || dur <= 0 {
		t.Skip("set KVROUTE_SOAK=<duration> to run the soak benchmark")
	}
	s := startSoak(t)
	s.prefill(t)
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()

	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.clientLoop(ctx, t, uint64(i))
		}()
	}
	var samples []soakSample
	start := time.Now()
	tick := time.NewTicker(10 * time.Second)
	samples = append(samples, s.sample(0))
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			if ctx.Err() != nil {
				break loop // clients are stopping: not a steady-state sample
			}
			samples = append(samples, s.sample(time.Since(start)))
			last := samples[len(samples)-1]
			t.Logf("t=%4.0fs rss %.1f MB live heap %.1f MB goroutines %d requests %d", last.At.Seconds(), last.RSSMB, last.HeapMB, last.Goroutines, s.requests.Load())
		}
	}
	tick.Stop()
	wg.Wait()
	s.report(t, samples, dur)
}

type soakSample struct {
	At         time.Duration
	RSSMB      float64
	HeapMB     float64
	Goroutines int
}

type soakEnv struct {
	gate     sync.RWMutex // clients hold it shared per request; a sample holds it alone
	base     string
	client   *http.Client
	clips    map[string][]byte
	clipURL  string // http://127.0.0.1:port of the clip server
	requests atomic.Int64
	mu       sync.Mutex // guards outcomes
	outcomes map[string]int
}

func startSoak(t *testing.T) *soakEnv {
	t.Helper()
	s := &soakEnv{clips: map[string][]byte{}, outcomes: map[string]int{},
		client: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}}
	for _, f := range []string{"vp9_320x240_2frames.webm", "vp9_640x360_30fps_10s.webm", "vp8_320x240_25fps_4s.webm"} {
		b, err := os.ReadFile(filepath.Join(videoDir, f))
		if err != nil {
			t.Fatal(err)
		}
		s.clips[f] = b
	}
	// Clip server: /clip/<name>?v=<n> is the fixture followed by 64 KiB of bytes derived from n (a
	// new clip for the decode cache); /endless streams until the client goes away.
	mux := http.NewServeMux()
	mux.HandleFunc("/clip/", func(w http.ResponseWriter, r *http.Request) {
		b, ok := s.clips[strings.TrimPrefix(r.URL.Path, "/clip/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
		if v := r.URL.Query().Get("v"); v != "" {
			n, _ := strconv.ParseUint(v, 10, 64)
			_, _ = w.Write(trailer(n, 64<<10))
		}
	})
	mux.HandleFunc("/endless", endlessMedia)
	cs := httptest.NewServer(mux)
	t.Cleanup(cs.Close)
	s.clipURL = cs.URL

	w1, w2 := httptest.NewServer(http.HandlerFunc(soakWorker)), httptest.NewServer(http.HandlerFunc(soakWorker))
	t.Cleanup(w1.Close)
	t.Cleanup(w2.Close)
	contract := filepath.Join(t.TempDir(), "contract.json")
	if err := os.WriteFile(contract, []byte(sim.HubContract), 0o600); err != nil {
		t.Fatal(err)
	}
	httpPort, adminPort := caddytest.Port(t), caddytest.Port(t)
	s.base = fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%[1]d
	%[8]s
	servers {
		timeouts {
			read_header 10s
			idle 2m
		}
	}
	kvroute {
		embedded_nats {
			port random
		}
		model_dir %[3]s
		media {
			allow_addr %[4]s
			max_bytes 16MiB
			max_inflight_bytes 256MiB
		}
		worker w1 {
			endpoint %[5]s
			model qwen
			engine vllm
			block_size 16
			contract_file %[7]s
		}
		worker w2 {
			endpoint %[6]s
			model qwen
			engine vllm
			block_size 16
			contract_file %[7]s
		}
	}
}

http://127.0.0.1:%[2]d {
	header {
		defer
		X-Kvroute-Fallback {http.vars.kvroute.fallback}
	}
	encode zstd gzip
	route /v1/* {
		kvroute {
			max_body_size 64MiB
			read_timeout 30s
		}
		reverse_proxy {
			dynamic kvroute qwen
			lb_policy kvroute {
				fallback least_conn
			}
			lb_retries 2
			lb_try_interval 250ms
			fail_duration 30s
			transport http {
				dial_timeout 3s
				response_header_timeout 10m
			}
		}
	}
	respond 404
	log {
		output discard
	}
}
`, adminPort, httpPort, modelDir, cs.Listener.Addr().String(), w1.Listener.Addr().String(), w2.Listener.Addr().String(), contract,
		caddytest.QuietGlobals)
	caddytest.Start(t, cfg, s.client.CloseIdleConnections)
	return s
}

// trailer is n bytes derived from seed (a distinct clip per seed).
func trailer(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, 12))
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b
}

func endlessMedia(w http.ResponseWriter, r *http.Request) {
	buf := make([]byte, 32<<10)
	rc := http.NewResponseController(w)
	for r.Context().Err() == nil {
		if _, err := w.Write(buf); err != nil {
			return
		}
		_ = rc.Flush()
	}
}

// soakWorker answers a streaming request with an SSE event every 20 ms until the client goes
// away (or 200 events), anything else with one JSON completion.
func soakWorker(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !bytes.Contains(body, []byte(`"stream":true`)) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":"ok"}}]}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for i := range 200 {
		fmt.Fprintf(w, "data: {\"n\":%d}\n\n", i)
		if rc.Flush() != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// clientLoop sends the request mix until ctx ends.
func (s *soakEnv) clientLoop(ctx context.Context, t *testing.T, id uint64) {
	r := rand.New(rand.NewPCG(id, 99))
	serial := id << 40
	for ctx.Err() == nil {
		serial++
		var body []byte
		kind := ""
		stream := false
		switch p := r.IntN(100); {
		case p < 25: // cold video by URL: a new clip
			kind = "video_cold_url"
			body = soakBody(videoPart(fmt.Sprintf("%s/clip/vp9_320x240_2frames.webm?v=%d", s.clipURL, serial)))
		case p < 35: // cold video as a data: URL
			kind = "video_cold_data"
			clip := append(append([]byte(nil), s.clips["vp8_320x240_25fps_4s.webm"]...), trailer(serial, 128<<10)...)
			body = soakBody(videoPart("data:video/webm;base64," + base64.StdEncoding.EncodeToString(clip)))
		case p < 50: // warm video: the same clips again (decode cache hits)
			kind = "video_warm"
			name := []string{"vp9_640x360_30fps_10s.webm", "vp8_320x240_25fps_4s.webm"}[r.IntN(2)]
			body = soakBody(videoPart(s.clipURL + "/clip/" + name))
		case p < 70:
			kind = "text"
			body = soakBody(textPart(fmt.Sprintf("Question %d: %s", serial, strings.Repeat("why ", 1+r.IntN(200)))))
		case p < 80:
			kind = "sse_disconnect"
			stream = true
			body = soakBody(textPart(fmt.Sprintf("Stream %d", serial)))
		case p < 85:
			kind = "bad_json"
			body = []byte(`{"model":"qwen","messages":[{"role":"user","content":"x"}`)
		case p < 88:
			kind = "too_many_parts"
			parts := make([]map[string]any, 8193)
			for i := range parts {
				parts[i] = textPart("x")
			}
			body = soakBody(parts...)
		case p < 95:
			kind = "blocked_url"
			body = soakBody(videoPart([]string{"http://169.254.169.254/latest/meta-data", "http://10.1.2.3/a.webm", "file:///etc/passwd"}[r.IntN(3)]))
		default:
			kind = "endless_media"
			body = soakBody(videoPart(s.clipURL + "/endless"))
		}
		if stream {
			body = bytes.Replace(body, []byte(`{"messages"`), []byte(`{"stream":true,"messages"`), 1)
		}
		s.gate.RLock()
		status := s.send(ctx, body, stream, r)
		s.gate.RUnlock()
		s.requests.Add(1)
		s.mu.Lock()
		s.outcomes[kind+" "+status]++
		s.mu.Unlock()
	}
}

func soakBody(parts ...map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"messages": []map[string]any{
		{"role": "system", "content": systemPrompt},
		{"role": "user", "content": parts},
	}, "model": "qwen"})
	return b
}

// send posts body; a stream is read for a few events and then abandoned (client disconnect).
func (s *soakEnv) send(ctx context.Context, body []byte, stream bool, r *rand.Rand) string {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, s.base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := s.client.Do(req)
	if err != nil {
		return "client_error"
	}
	defer res.Body.Close()
	status := strconv.Itoa(res.StatusCode)
	if fb := res.Header.Get("X-Kvroute-Fallback"); fb != "" {
		status += "/" + fb
	}
	if stream {
		sc := bufio.NewScanner(res.Body)
		for n := 3 + r.IntN(10); n > 0 && sc.Scan(); {
			if strings.HasPrefix(sc.Text(), "data:") {
				n--
			}
		}
		cancel() // the client goes away mid-stream
		return status
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return status
}

// prefillClips is more than the decode cache's 4096 entries: after the prefill the cache is full,
// so its bounded growth is not mistaken for a leak.
const prefillClips = 4200

// prefill sends prefillClips distinct small clips (3 at a time) so the decode cache is full before
// the measured run.
func (s *soakEnv) prefill(t *testing.T) {
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := next.Add(1); n <= prefillClips; n = next.Add(1) {
				body := soakBody(videoPart(fmt.Sprintf("%s/clip/vp9_320x240_2frames.webm?v=%d", s.clipURL, 1<<50+n)))
				s.send(context.Background(), body, false, nil)
			}
		}()
	}
	wg.Wait()
	t.Logf("prefill: %d distinct clips in %s", prefillClips, time.Since(start).Round(time.Second))
}

// sample waits until no request is in flight (and 300 ms more for the server side of abandoned
// streams to end), then reads RSS, the live heap after runtime.GC() and the goroutine count.
func (s *soakEnv) sample(at time.Duration) soakSample {
	s.gate.Lock()
	defer s.gate.Unlock()
	time.Sleep(300 * time.Millisecond)
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return soakSample{At: at, RSSMB: float64(rssKiB()) / 1024, HeapMB: float64(ms.HeapAlloc) / (1 << 20), Goroutines: runtime.NumGoroutine()}
}

// rssKiB is VmRSS of /proc/self/status.
func rssKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return -1
}

// slopePctPerMin is the least-squares slope of ys over xs (seconds), in percent of the mean per minute.
func slopePctPerMin(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	den := n*sxx - sx*sx
	if den == 0 || sy == 0 {
		return 0
	}
	slope := (n*sxy - sx*sy) / den // per second
	return 100 * slope * 60 / (sy / n)
}

func (s *soakEnv) report(t *testing.T, samples []soakSample, dur time.Duration) {
	warm := dur / 5
	var xs, heap, gor []float64
	maxRSS := 0.0
	for _, sm := range samples {
		maxRSS = math.Max(maxRSS, sm.RSSMB)
		if sm.At < warm {
			continue
		}
		xs = append(xs, sm.At.Seconds())
		heap = append(heap, sm.HeapMB)
		gor = append(gor, float64(sm.Goroutines))
	}
	hs, gs := slopePctPerMin(xs, heap), slopePctPerMin(xs, gor)
	total := s.requests.Load()
	t.Logf("soak %s: %d requests (%.1f/s); after %s warm-up: live heap slope %+.2f %%/min, goroutine slope %+.2f %%/min; max RSS %.1f MB",
		dur, total, float64(total)/dur.Seconds(), warm, hs, gs, maxRSS)
	s.mu.Lock()
	keys := make([]string, 0, len(s.outcomes))
	for k := range s.outcomes {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	slices.Sort(keys)
	for _, k := range keys {
		t.Logf("  %-40s %d", k, s.outcomes[k])
	}
	if len(xs) < 3 {
		t.Fatalf("only %d samples after warm-up", len(xs))
	}
	if math.Abs(hs) >= 1 || math.Abs(gs) >= 1 || maxRSS >= 400 {
		t.Fatalf("targets missed: heap slope %+.2f %%/min, goroutine slope %+.2f %%/min (want |slope| < 1), max RSS %.1f MB (want < 400)", hs, gs, maxRSS)
	}
}

package integration

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/routing/scheduler"
)

// TestAffinityUndecodedVideo (issue 29 item 3): H.264, HEVC and AV1 are not in the default codec
// allow-list, so every request with such a clip falls back with unsupported_codec, and the clip comes first in the
// message: the only text prefix is the chat template's (2 blocks, the same on every worker). Before affinity the worker was a tie-break among four
// idle workers (a repeat reached its first worker about one time in four); now the key, XXH3-128
// of the clip's bytes, picks the worker by rendezvous hashing among the model's workers. 100
// repeats of each of 10 clips (three H.264 files, one HEVC, one AV1, each also under a second URL: the
// same bytes, the same key), shuffled, sent through Caddy with the Caddyfile.example chain to 4
// simulators: each clip reaches one worker in ≥ 95 of its 100 repeats, that worker is the one
// the rendezvous order of the key computed here independently names, and explain shows the
// `affinity` term (1024 estimated tokens) on it.
func TestAffinityUndecodedVideo(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: sends 1000 requests with 10 H.264/HEVC/AV1 clips through Caddy to 4 simulators, ~8 s")
	}
	h := startHarness(t, []simSpec{{ID: "aff-1", Model: "qwen"}, {ID: "aff-2", Model: "qwen"}, {ID: "aff-3", Model: "qwen"}, {ID: "aff-4", Model: "qwen"}})
	ids := []string{"aff-1", "aff-2", "aff-3", "aff-4"}
	dir := "../../testdata/video-codecs/"
	ms := httptest.NewServer(http.StripPrefix("/c/", http.FileServer(http.Dir(dir))))
	t.Cleanup(ms.Close)
	// H.264, HEVC and AV1: none is in the default allow-list (vp8, vp9)
	clips := []string{"h264_bf3_640x360_30fps_3s.mp4", "h264_nobf_480x270_24fps_2s.mkv", "h264_yuv444_333x197_24fps_2s.mkv",
		"hevc_hvc1_640x360_30fps_2s.mp4", "av1_aom_320x240_24fps_2s.webm"}
	type clip struct {
		url, want, key string
		got            map[string]int
	}
	var cs []*clip
	for _, name := range clips {
		raw, err := os.ReadFile(dir + name)
		if err != nil {
			t.Fatal(err)
		}
		k := xxh3.Hash128(raw).Bytes()
		c := &clip{url: ms.URL + "/c/" + name, want: ids[scheduler.RendezvousOrder(k, ids)[0]], key: hex.EncodeToString(k[:]), got: map[string]int{}}
		cs = append(cs, c)
		// the same bytes under another URL: the same key, so the same worker
		cs = append(cs, &clip{url: c.url + "?copy=1", want: c.want, key: c.key, got: map[string]int{}})
	}
	// Containers kvroute does not open (operator test: `ffmpeg -c copy clip.ts` of an H.264 clip
	// was a 400): the same fallback and the same affinity, also with h264 not listed.
	tmp := t.TempDir()
	others := httptest.NewServer(http.StripPrefix("/o/", http.FileServer(http.Dir(tmp))))
	t.Cleanup(others.Close)
	for _, o := range []struct{ name, format string }{{"clip.ts", "mpegts"}, {"clip.flv", "flv"}} {
		out := filepath.Join(tmp, o.name)
		cmd := exec.Command("ffmpeg", "-v", "error", "-i", dir+"h264_nobf_480x270_24fps_2s.mkv", "-c", "copy", "-f", o.format, out)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ffmpeg %s (make deps installs the CLI): %v\n%s", o.name, err, b)
		}
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		k := xxh3.Hash128(raw).Bytes()
		cs = append(cs, &clip{url: others.URL + "/o/" + o.name, want: ids[scheduler.RendezvousOrder(k, ids)[0]], key: hex.EncodeToString(k[:]), got: map[string]int{}})
	}
	question := textPart("Describe this video.")

	// explain: the fallback stays unsupported_codec, nothing is cached, and the affinity term
	// sits on the rendezvous worker.
	for _, c := range cs {
		b := mediaBody(t, "qwen", videoPart(c.url), question)
		res, err := h.client.Post(h.admin+"/kvroute/explain", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var e struct {
			Fallback string `json:"fallback"`
			Aff      struct {
				Key      string `json:"key"`
				Source   string `json:"source"`
				WorkerID string `json:"worker_id"`
				Tokens   int    `json:"tokens"`
			} `json:"affinity"`
			Candidates []struct {
				WorkerID string          `json:"worker_id"`
				Terms    scheduler.Terms `json:"terms"`
			} `json:"candidates"`
			Decision struct {
				WorkerID string `json:"worker_id"`
			} `json:"decision"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("explain %s: %v", raw, err)
		}
		if e.Fallback != "unsupported_codec" || e.Aff.Key != c.key || e.Aff.Source != "bytes" ||
			e.Aff.WorkerID != c.want || e.Aff.Tokens != 1024 || e.Decision.WorkerID != c.want || len(e.Candidates) != 4 {
			t.Errorf("%s: explain %.200s…, want worker %s key %s", c.url, raw, c.want, c.key)
		}
		for _, cd := range e.Candidates {
			if want := map[bool]float64{true: 1024}[cd.WorkerID == c.want]; cd.Terms.Affinity != want {
				t.Errorf("%s: %s has affinity term %v, want %v", c.url, cd.WorkerID, cd.Terms.Affinity, want)
			}
		}
	}

	const repeats = 100
	var seq []*clip
	for _, c := range cs {
		for range repeats {
			seq = append(seq, c)
		}
	}
	rand.New(rand.NewPCG(29, 29)).Shuffle(len(seq), func(i, j int) { seq[i], seq[j] = seq[j], seq[i] })
	perWorker := map[string]int{}
	for _, c := range seq {
		a := h.chat(t, mediaBody(t, "qwen", videoPart(c.url), question)).mustOK(t)
		if a.fallback != "unsupported_codec" {
			t.Fatalf("%s: fallback %q", c.url, a.fallback)
		}
		c.got[a.worker]++
		perWorker[a.worker]++
	}
	for _, c := range cs {
		if c.got[c.want] < repeats*95/100 {
			t.Errorf("%s: %d of %d repeats on its rendezvous worker %s, want >= 95: %v", c.url, c.got[c.want], repeats, c.want, c.got)
		}
	}
	t.Logf("requests per worker: %v", perWorker)
	for _, c := range cs {
		t.Logf("%s → %s: %v", c.url, c.want, c.got)
	}
}

// TestCodecAllowList: `media { codecs vp8 }` through Caddy: the VP9 clip the default list decodes
// now falls back with unsupported_codec (the allow-list's detail), keyed by its bytes, and its
// repeats reach the key's rendezvous worker; the VP8 clip is still routed exactly.
func TestCodecAllowList(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: sends repeated VP8 and VP9 clips through Caddy to 3 simulators, ~2 s")
	}
	h := startHarness(t, []simSpec{{ID: "cod-1", Model: "qwen"}, {ID: "cod-2", Model: "qwen"}, {ID: "cod-3", Model: "qwen"}}, harnessOpts{mediaOpts: "codecs vp8"})
	ids := []string{"cod-1", "cod-2", "cod-3"}
	raw, err := os.ReadFile(videoDir + "/vp9_333x197_24fps_3s.webm")
	if err != nil {
		t.Fatal(err)
	}
	k := xxh3.Hash128(raw).Bytes()
	want := ids[scheduler.RendezvousOrder(k, ids)[0]]
	body := mediaBody(t, "qwen", videoPart(h.media+"/a/vp9_333x197_24fps_3s.webm"), textPart("Describe this video."))
	e := h.explain(t, body)
	if e.fallback() != "unsupported_codec" || !strings.Contains(e.Detail, "codec vp9 is not in the codec allow-list (vp8)") || e.Decision.WorkerID != want {
		t.Fatalf("vp9 with codecs vp8: explain %+v, want worker %s", e, want)
	}
	for i := range 20 {
		if a := h.chat(t, body).mustOK(t); a.worker != want || a.fallback != "unsupported_codec" {
			t.Fatalf("repeat %d: worker %s fallback %q, want %s", i, a.worker, a.fallback, want)
		}
	}
	vp8 := mediaBody(t, "qwen", videoPart(h.media+"/a/vp8_320x240_25fps_4s.webm"), textPart("Describe this video."))
	if e := h.explain(t, vp8); e.fallback() != "" || len(e.Media) != 1 {
		t.Fatalf("vp8 with codecs vp8: explain %+v", e)
	}
}

// TestAffinityLoadBound: the load bound applies to the affinity worker as to any. While the first
// request of an H.264 clip is in flight on its rendezvous worker (prefill takes 1.5 s), that
// worker is over the bound (recent count 1 + 1 > ceil(1.1 · 2 / 4) = 1), and explain credits the
// next worker in the key's rendezvous order instead and names it as the decision.
func TestAffinityLoadBound(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: waits for a 1.5 s simulated prefill on the affinity worker, ~3 s")
	}
	var specs []simSpec
	ids := []string{"lb-1", "lb-2", "lb-3", "lb-4"}
	for _, id := range ids {
		specs = append(specs, simSpec{ID: id, Model: "qwen", PrefillDelay: 1500 * time.Millisecond})
	}
	h := startHarness(t, specs)
	raw, err := os.ReadFile(videoDir + "/h264_640x360_30fps_3s.mp4")
	if err != nil {
		t.Fatal(err)
	}
	order := scheduler.RendezvousOrder(xxh3.Hash128(raw).Bytes(), ids)
	first, second := ids[order[0]], ids[order[1]]
	body := mediaBody(t, "qwen", videoPart(h.media+"/a/h264_640x360_30fps_3s.mp4"), textPart("Describe this video."))
	type result struct {
		status int
		worker string
	}
	done := make(chan result, 1)
	go func() { // not h.post: it may call t.Fatal, which only the test's goroutine may
		res, err := h.client.Post(h.base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			done <- result{}
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		done <- result{res.StatusCode, res.Header.Get("X-Kvroute-Worker")}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		e := h.explain(t, body)
		var c *struct{ active, over bool }
		for _, cd := range e.Candidates {
			if cd.WorkerID == first {
				c = &struct{ active, over bool }{cd.ActiveRequests > 0, cd.OverBalance}
			}
		}
		if c != nil && c.active {
			if !c.over || e.Decision.WorkerID != second || e.fallback() != "unsupported_codec" {
				t.Fatalf("first %s in flight: over_balance %v, decision %s (want %s)", first, c.over, e.Decision.WorkerID, second)
			}
			break
		}
		select {
		case a := <-done:
			t.Fatalf("the request finished (worker %s) before explain saw it in flight", a.worker)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the request never showed as in flight")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a := <-done; a.status != 200 || a.worker != first {
		t.Fatalf("the in-flight request: status %d worker %s, want %s", a.status, a.worker, first)
	}
}

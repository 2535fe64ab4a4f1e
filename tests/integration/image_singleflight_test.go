package integration

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvroute/kvroute/media/picture"

	"github.com/kvroute/kvroute/internal/sim"
)

// countingImages serves jpg (third under /third*) with an ETag, answering a matching
// If-None-Match with 304, and counts the GETs (full and conditional).
type countingImages struct {
	jpg, third         []byte
	full, conditionals atomic.Int64
}

func (c *countingImages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("ETag", `"v1"`)
	if r.Header.Get("If-None-Match") == `"v1"` {
		c.conditionals.Add(1)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	c.full.Add(1)
	w.Header().Set("Content-Type", "image/jpeg")
	if strings.HasPrefix(r.URL.Path, "/third") {
		_, _ = w.Write(c.third)
		return
	}
	_, _ = w.Write(c.jpg)
}

// TestImageSingleFlightThroughCaddy (the operator test): requests carrying 32 copies of one image
// through the operator's chain (Caddyfile.example over TLS) to a static worker with the hub
// contract. Counted exactly at the media server and in caddy_kvroute_decode_cache_total:
//   - 32 copies of one http URL: one GET and one decode (one miss), 32 equal uuids forwarded;
//   - the same request again: one conditional GET (a 304), no decode;
//   - 32 copies of one data: URL of another picture: one decode;
//   - 4 concurrent requests, each with that picture's bytes behind its own URL: one decode in all
//     (the decoder's single-flight by XXH3-128 of the bytes), 4 GETs.
//
// Before the fix the first request made 32 GETs and 32 decodes (the misses of copies racing
// the first decode), the repeat 32 conditional GETs.
func TestImageSingleFlightThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: sends requests with 32 copies of one image, in sequence and concurrently, counting decodes and GETs, ~2 s")
	}
	const copies = 32
	worker := &recordingWorker{}
	ws := httptest.NewServer(worker)
	t.Cleanup(ws.Close)
	srv := &countingImages{jpg: testJPEG(t, 1280, 720), third: testJPEG(t, 1920, 1080)}
	imgs := httptest.NewServer(srv)
	t.Cleanup(imgs.Close)
	contract := filepath.Join(t.TempDir(), "contract.json")
	if err := os.WriteFile(contract, []byte(sim.HubContract), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startEdge(t, edgeConfig{App: "\t\tmedia {\n\t\t\tallow_loopback\n\t\t}\n" +
		"\t\tworker img0 {\n\t\t\tendpoint " + ws.Listener.Addr().String() + "\n\t\t\tmodel qwen\n\t\t\tengine vllm\n" +
		"\t\t\tblock_size 16\n\t\t\tcontract_file " + contract + "\n\t\t}\n"})
	client := e.client(false)
	defer client.CloseIdleConnections()
	send := func(t *testing.T, urls ...string) {
		t.Helper()
		content := []map[string]any{}
		for _, u := range urls {
			content = append(content, imagePart(u))
		}
		body := mustJSON(t, map[string]any{"model": "qwen", "messages": []map[string]any{
			{"role": "user", "content": append(content, textPart("Which of these differ?"))},
		}})
		res, err := client.Post(e.https+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || res.Header.Get("X-Kvroute-Fallback") != "" || res.Header.Get("X-Kvroute-Worker") != "img0" {
			t.Errorf("status %d worker %q fallback %q: %.300s", res.StatusCode, res.Header.Get("X-Kvroute-Worker"), res.Header.Get("X-Kvroute-Fallback"), b)
		}
	}
	repeat := func(u string) []string {
		us := make([]string, copies)
		for i := range us {
			us[i] = u
		}
		return us
	}
	wantUUIDs := func(t *testing.T, img []byte, n int) {
		t.Helper()
		info, err := picture.Decode(img)
		if err != nil {
			t.Fatal(err)
		}
		got := uuidsOf(t, worker.lastBody())
		if len(got) != n {
			t.Fatalf("forwarded %d uuids, want %d", len(got), n)
		}
		for i, u := range got {
			if u != info.Identity.Hex()+strings.Repeat("0", 48) {
				t.Fatalf("uuid %d: %s, want the pixel identity %s", i, u, info.Identity.Hex())
			}
		}
	}
	counts := func() (miss, hit int) {
		return decodeCacheCount(t, e.admin, "miss"), decodeCacheCount(t, e.admin, "hit")
	}
	miss0, hit0 := counts()
	check := func(t *testing.T, step string, full, cond int64, miss, hit int) {
		t.Helper()
		m, h := counts()
		if f, c := srv.full.Load(), srv.conditionals.Load(); f != full || c != cond || m-miss0 != miss || h-hit0 != hit {
			t.Fatalf("%s: %d GETs, %d conditional GETs, %d decode-cache misses, %d hits; want %d, %d, %d, %d",
				step, f, c, m-miss0, h-hit0, full, cond, miss, hit)
		}
	}

	send(t, repeat(imgs.URL+"/photo.jpg")...)
	check(t, "32 copies of one URL", 1, 0, 1, 0)
	wantUUIDs(t, srv.jpg, copies)

	send(t, repeat(imgs.URL+"/photo.jpg")...)
	check(t, "the repeat", 1, 1, 1, 0)
	wantUUIDs(t, srv.jpg, copies)

	other := testJPEG(t, 1024, 768)
	send(t, repeat("data:image/jpeg;base64,"+base64.StdEncoding.EncodeToString(other))...)
	check(t, "32 copies of one data: URL", 1, 1, 2, 0)
	wantUUIDs(t, other, copies)

	// 4 requests at once, each carrying a third picture behind its own URL
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			send(t, imgs.URL+"/third"+string(rune('a'+i))+".jpg")
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	check(t, "4 concurrent requests, one picture", 5, 1, 3, 3)
	wantUUIDs(t, srv.third, 1)
}

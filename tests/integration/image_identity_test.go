package integration

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/media/picture"

	"github.com/kvroute/kvroute/kv"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/internal/sim"
)

// testJPEG is a w×h baseline JPEG (Go's encoder, quality 90) of a smooth gradient with detail.
func testJPEG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x / 15), uint8(y / 9), uint8((x ^ y) & 0x3f), 255})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// decodeCacheCount reads caddy_kvroute_decode_cache_total{result} from Caddy's /metrics.
func decodeCacheCount(t *testing.T, admin, result string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^caddy_kvroute_decode_cache_total\{result="` + result + `"\} (\S+)$`).
		FindStringSubmatch(getText(t, http.DefaultClient, admin+"/metrics"))
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return int(v)
}

// TestImageIdentityThroughCaddy: a 3840×2160 JPEG sent twice through the operator's chain
// (Caddyfile.example over TLS) to a static worker with the hub contract. With the default
// image_identity pixels, the first request is a decode-cache miss and the repeat a hit
// (caddy_kvroute_decode_cache_total), both routed exactly with the forwarded uuid of the pixel
// identity (picture.Decode's). After a reload with `media { image_identity bytes }`, the
// forwarded uuid is the low 64 bits of XXH3-128 of the JPEG's bytes, the size (hence the total
// blocks) is the same, and no decode-cache lookup is made.
func TestImageIdentityThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: decodes a 3840x2160 JPEG through Caddy, reloads and sends it again, ~6 s")
	}
	worker := &recordingWorker{}
	ws := httptest.NewServer(worker)
	t.Cleanup(ws.Close)
	jpg := testJPEG(t, 3840, 2160)
	imgs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(jpg) }))
	t.Cleanup(imgs.Close)
	contract := filepath.Join(t.TempDir(), "contract.json")
	if err := os.WriteFile(contract, []byte(sim.HubContract), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := func(media string) edgeConfig {
		return edgeConfig{App: "\t\tmedia {\n\t\t\tallow_loopback\n" + media + "\t\t}\n" +
			"\t\tworker img0 {\n\t\t\tendpoint " + ws.Listener.Addr().String() + "\n\t\t\tmodel qwen\n\t\t\tengine vllm\n" +
			"\t\t\tblock_size 16\n\t\t\tcontract_file " + contract + "\n\t\t}\n"}
	}
	e := startEdge(t, cfg(""))
	client := e.client(false)
	defer client.CloseIdleConnections()
	send := func(t *testing.T) (uuid, total string) {
		t.Helper()
		body := mustJSON(t, map[string]any{"model": "qwen", "messages": []map[string]any{
			{"role": "user", "content": []map[string]any{imagePart(imgs.URL + "/photo.jpg"), textPart("What is in this photo?")}},
		}})
		res, err := client.Post(e.https+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || res.Header.Get("X-Kvroute-Fallback") != "" || res.Header.Get("X-Kvroute-Worker") != "img0" {
			t.Fatalf("status %d worker %q fallback %q: %.300s", res.StatusCode, res.Header.Get("X-Kvroute-Worker"), res.Header.Get("X-Kvroute-Fallback"), b)
		}
		got := uuidsOf(t, worker.lastBody())
		if len(got) != 1 {
			t.Fatalf("forwarded uuids %q, want one", got)
		}
		return got[0], res.Header.Get("X-Kvroute-Total-Blocks")
	}
	pixels, err := picture.Decode(jpg)
	if err != nil {
		t.Fatal(err)
	}
	wantPixels := pixels.Identity.Hex() + strings.Repeat("0", 48)
	miss0, hit0 := decodeCacheCount(t, e.admin, "miss"), decodeCacheCount(t, e.admin, "hit")
	u1, total := send(t)
	if miss, hit := decodeCacheCount(t, e.admin, "miss")-miss0, decodeCacheCount(t, e.admin, "hit")-hit0; miss != 1 || hit != 0 {
		t.Fatalf("first request: %d misses %d hits, want 1 miss", miss, hit)
	}
	u2, total2 := send(t)
	if miss, hit := decodeCacheCount(t, e.admin, "miss")-miss0, decodeCacheCount(t, e.admin, "hit")-hit0; miss != 1 || hit != 1 {
		t.Fatalf("repeat: %d misses %d hits, want 1 and 1", miss, hit)
	}
	if u1 != wantPixels || u2 != wantPixels || total2 != total {
		t.Fatalf("pixels: uuids %s, %s (total blocks %s, %s), want %s", u1, u2, total, total2, wantPixels)
	}

	e.reload(t, cfg("\t\t\timage_identity bytes\n"))
	lookups := decodeCacheCount(t, e.admin, "miss") + decodeCacheCount(t, e.admin, "hit")
	wantBytes := fmt.Sprintf("%016x", uint64(kv.Identity(xxh3.Hash128(jpg).Lo))) + strings.Repeat("0", 48)
	for range 2 {
		u, tb := send(t)
		if u != wantBytes || tb != total {
			t.Fatalf("bytes: uuid %s total blocks %s, want %s and %s", u, tb, wantBytes, total)
		}
	}
	if n := decodeCacheCount(t, e.admin, "miss") + decodeCacheCount(t, e.admin, "hit"); n != lookups {
		t.Fatalf("bytes mode made %d decode-cache lookups", n-lookups)
	}
}

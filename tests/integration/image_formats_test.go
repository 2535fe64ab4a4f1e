package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/media/picture"

	"github.com/kvroute/kvroute/internal/sim"
)

// imageDir holds the image fixtures made by ffmpeg (testdata/SOURCE.md, "image/").
const imageDir = "../../testdata/image"

// recordingWorker answers every request 200 with a minimal chat completion and keeps the last
// body it received.
type recordingWorker struct {
	mu   sync.Mutex
	last []byte
}

func (w *recordingWorker) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.mu.Lock()
	w.last = b
	w.mu.Unlock()
	rw.Header().Set("Content-Type", "application/json")
	_, _ = rw.Write([]byte(`{"id":"c1","object":"chat.completion","choices":[]}`))
}

func (w *recordingWorker) lastBody() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// TestImageFormatsThroughCaddy sends image_url parts in the formats kvroute decodes and in ones it
// does not through the operator's chain (Caddyfile.example over TLS, edge_test.go) to a static
// worker with the hub contract: PNG, WebP (lossy and lossless, by URL and as a data URL), BMP and
// TIFF are routed exactly (no fallback, the identity forwarded as the part's uuid; the same
// picture in lossless formats has one identity, with alpha too), AVIF, JPEG 2000 and ICO fall back with
// unsupported_codec and are forwarded byte for byte, HTML is answered 400 media_undecodable.
func TestImageFormatsThroughCaddy(t *testing.T) {
	worker := &recordingWorker{}
	ws := httptest.NewServer(worker)
	t.Cleanup(ws.Close)
	imgs := httptest.NewServer(http.FileServer(http.Dir(imageDir)))
	t.Cleanup(imgs.Close)
	contract := filepath.Join(t.TempDir(), "contract.json")
	if err := os.WriteFile(contract, []byte(sim.HubContract), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startEdge(t, edgeConfig{App: "\t\tmedia {\n\t\t\tallow_loopback\n\t\t}\n" +
		"\t\tworker img0 {\n\t\t\tendpoint " + ws.Listener.Addr().String() + "\n\t\t\tmodel qwen\n\t\t\tengine vllm\n" +
		"\t\t\tblock_size 16\n\t\t\tcontract_file " + contract + "\n\t\t}\n"})
	client := e.client(false)

	type answer struct {
		status                          int
		worker, fallback, total, detail string
		sent                            []byte
	}
	send := func(t *testing.T, url string) answer {
		t.Helper()
		body := mustJSON(t, map[string]any{"model": "qwen", "messages": []map[string]any{
			{"role": "system", "content": systemPrompt},
			{"role": "user", "content": []map[string]any{imagePart(url), textPart("hi")}},
		}})
		res, err := client.Post(e.https+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return answer{status: res.StatusCode, worker: res.Header.Get("X-Kvroute-Worker"), fallback: res.Header.Get("X-Kvroute-Fallback"),
			total: res.Header.Get("X-Kvroute-Total-Blocks"), detail: string(b), sent: body}
	}
	identity := func(t *testing.T, name string) string {
		data, err := os.ReadFile(filepath.Join(imageDir, name))
		if err != nil {
			t.Fatal(err)
		}
		info, err := picture.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		return info.Identity.Hex() + strings.Repeat("0", 48) // the forwarded uuid (64 hex digits)
	}

	t.Run("decoded formats are routed with their identity", func(t *testing.T) {
		lossy, err := os.ReadFile(filepath.Join(imageDir, "picture_lossy.webp"))
		if err != nil {
			t.Fatal(err)
		}
		pngID, alphaID := identity(t, "picture.png"), identity(t, "picture_alpha.png")
		var total string
		for _, c := range []struct{ name, url, uuid string }{
			{"png", imgs.URL + "/picture.png", pngID},
			{"lossless webp", imgs.URL + "/picture_lossless.webp", pngID},
			{"bmp", imgs.URL + "/picture.bmp", pngID},
			{"tiff", imgs.URL + "/picture.tiff", pngID},
			{"lossy webp", imgs.URL + "/picture_lossy.webp", identity(t, "picture_lossy.webp")},
			{"lossy webp data URL", "data:image/webp;base64," + base64.StdEncoding.EncodeToString(lossy), identity(t, "picture_lossy.webp")},
			{"png with alpha", imgs.URL + "/picture_alpha.png", alphaID},
			{"lossless webp with alpha", imgs.URL + "/picture_alpha.webp", alphaID},
		} {
			a := send(t, c.url)
			if a.status != 200 || a.worker != "img0" || a.fallback != "" || a.total == "" || a.total == "0" {
				t.Fatalf("%s: status %d worker %q fallback %q total blocks %q: %.300s", c.name, a.status, a.worker, a.fallback, a.total, a.detail)
			}
			if total == "" {
				total = a.total
			} else if a.total != total { // the same 67×45 picture: the same layout
				t.Errorf("%s: %s total blocks, the PNG %s", c.name, a.total, total)
			}
			if got := uuidsOf(t, worker.lastBody()); len(got) != 1 || got[0] != c.uuid {
				t.Errorf("%s: forwarded uuids %q, want %s", c.name, got, c.uuid)
			}
		}
		if pngID == identity(t, "picture_lossy.webp") || pngID == alphaID {
			t.Fatal("the lossy WebP or the picture with alpha has the PNG's identity")
		}
	})

	t.Run("recognised formats kvroute does not decode fall back", func(t *testing.T) {
		for _, name := range []string{"picture.avif", "picture.jp2", "picture.ico", "animated.webp"} {
			a := send(t, imgs.URL+"/"+name)
			if a.status != 200 || a.worker != "img0" || a.fallback != "unsupported_codec" {
				t.Fatalf("%s: status %d worker %q fallback %q: %.300s", name, a.status, a.worker, a.fallback, a.detail)
			}
			if !bytes.Equal(worker.lastBody(), a.sent) {
				t.Fatalf("%s: a fallback must forward the client's bytes unchanged", name)
			}
		}
	})

	t.Run("not an image is a 400 that says what was found", func(t *testing.T) {
		a := send(t, "data:image/webp;base64,"+base64.StdEncoding.EncodeToString([]byte("<!DOCTYPE html><html><body>moved</body></html>")))
		var eb struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if a.status != 400 || json.Unmarshal([]byte(a.detail), &eb) != nil || eb.Error.Code != "media_undecodable" ||
			!strings.HasPrefix(eb.Error.Message, "not an image: no known image signature (the bytes sniff as text/html") {
			t.Fatalf("status %d body %s", a.status, a.detail)
		}
	})
}

package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit/ssrftrap"
)

// TestMediaNoNestedOpens sends, through Caddy with the Caddyfile.example chain, every input of
// internal/testkit/ssrftrap as a video — as a data: URL and as a URL on an allowed media server,
// under its manifest name and type and dressed as a WebM — and checks that the edge never
// connects to the addresses the input names (a trap on two loopback addresses, TCP and UDP,
// counts 0), that manifests and playlists are 400 media_undecodable with a message naming what
// they were, and that FFmpeg protocol URLs are refused as media_url_blocked (issue 24).
func TestMediaNoNestedOpens(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: sends every ssrftrap input as data: URL and as media-server URL through Caddy, ~2 s")
	}
	trap := ssrftrap.Start(t)
	cases, err := ssrftrap.Cases(trap.Port)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]ssrftrap.Case{}
	for _, c := range cases {
		byPath["/m/"+c.Name+c.Ext] = c
	}
	ms := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := byPath[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", c.MIME)
		_, _ = w.Write(c.Data)
	}))
	t.Cleanup(ms.Close)
	worker := newFakeWorker(t, "w0")
	// Only the media server's exact address is allowed: loopback in general stays refused, as in
	// Caddyfile.example.
	// The static worker declares the hub video contract, so the edge decodes video for it.
	contract := filepath.Join(t.TempDir(), "contract.json")
	if err := os.WriteFile(contract, []byte(sim.HubContract), 0o644); err != nil {
		t.Fatal(err)
	}
	e := startEdge(t, edgeConfig{App: fmt.Sprintf("\t\tworker w0 {\n\t\t\tendpoint %s\n\t\t\tmodel qwen\n\t\t\tengine vllm\n\t\t\tblock_size 16\n\t\t\tcontract_file %s\n\t\t}\n"+
		"\t\tmedia {\n\t\t\tallow_addr %s\n\t\t}\n", worker.addr(), contract, ms.Listener.Addr())})
	cl := e.client(false)
	defer cl.CloseIdleConnections()

	post := func(t *testing.T, url string) (int, string, string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": "qwen", "messages": []map[string]any{
			{"role": "user", "content": []map[string]any{
				{"type": "video_url", "video_url": map[string]any{"url": url}},
				{"type": "text", "text": "What is in this video?"},
			}},
		}})
		res, err := cl.Post(e.https+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var eb struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(b, &eb)
		return res.StatusCode, eb.Error.Code, eb.Error.Message
	}

	// what the 400 message must name, per input (Matroska files with URLs in chapters and
	// attachments are valid clips: decoded, never followed)
	names := map[string]string{
		"dash": "DASH manifest", "hls_master": "HLS playlist", "hls_media": "HLS playlist",
		"hls_protocols": "HLS playlist", "m3u_plain": "HLS playlist", "ffconcat": "ffconcat list",
		"sdp": "SDP session description", "mp4_external_dref": "external data reference",
	}
	for _, c := range cases {
		base := strings.TrimSuffix(c.Name, "_as_webm")
		for form, url := range map[string]string{
			"data": "data:" + c.MIME + ";base64," + base64.StdEncoding.EncodeToString(c.Data),
			"url":  ms.URL + "/m/" + c.Name + c.Ext,
		} {
			t.Run(c.Name+"/"+form, func(t *testing.T) {
				before := trap.Count()
				status, code, msg := post(t, url)
				trap.Settle(t)
				if n := trap.Count() - before; n != 0 {
					t.Errorf("the edge reached the trap %d times: %q", n, trap.Log())
				}
				want, manifest := names[base]
				switch {
				case manifest && (status != 400 || code != "media_undecodable" || !strings.Contains(msg, want)):
					t.Errorf("status %d code %q message %q, want 400 media_undecodable naming %q", status, code, msg, want)
				case !manifest && status != 200:
					t.Errorf("a valid clip whose metadata names URLs: status %d code %q message %q", status, code, msg)
				}
				t.Logf("%d %s: %s", status, code, msg)
			})
		}
	}
	t.Run("protocol URLs", func(t *testing.T) {
		for _, u := range ssrftrap.ProtocolURLs(trap.Port) {
			before := trap.Count()
			status, code, msg := post(t, u)
			trap.Settle(t)
			if n := trap.Count() - before; n != 0 {
				t.Errorf("%s: the edge reached the trap %d times: %q", u, n, trap.Log())
			}
			if status != 400 || code != "media_url_blocked" {
				t.Errorf("%s: status %d code %q message %q, want 400 media_url_blocked", u, status, code, msg)
			}
		}
	})
}

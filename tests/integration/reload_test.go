package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/caddytest"
	"github.com/kvroute/kvroute/routing/layout"
)

// The KV index and the event subscriber survive config reloads in the NATS state (DESIGN.md §9),
// and so does the record of workers marked down. These tests reload a running Caddy and check that
// what the new config says reaches that surviving state (issue 17 item 3).

// TestReloadAppliesModelPads: Caddy starts with the Qwen3-VL test model, whose placeholder ids
// (151655, 151656) the surviving subscriber is created with, then reloads with the Nemotron test
// model (<image> = 18 for images and video) in front of Nemotron workers. The workers' KV events
// are normalized with the new model's pad ids, so a repeated video request is credited every block
// of its span, as in TestNemotronVideoRouting. Before the fix the subscriber kept the first model's
// ids and the warm overlap stopped at the text before <video>.
func TestReloadAppliesModelPads(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: loads the Qwen3-VL and then the Nemotron test model and decodes a clip through Caddy, ~2.5 s")
	}
	h := startHarness(t, []simSpec{
		{ID: "nemo-a", Model: "nemotron", Contract: layout.NemotronContractJSON},
		{ID: "nemo-b", Model: "nemotron", Contract: layout.NemotronContractJSON},
	}, modelFolder(nemotronModelDir), harnessOpts{caddyModelDir: modelDir})
	first := runningApp(t).NATS().Conn()
	h.reload(t, harnessOpts{}) // model_dir: the simulators' Nemotron folder
	if runningApp(t).NATS().Conn() != first {
		t.Fatal("the reload replaced the NATS state: the surviving event core is not tested")
	}

	body := mediaBody(t, "nemotron", videoPart(h.media+"/a/vp9_640x360_30fps_10s.webm"), textPart("Describe this video."))
	ref := h.explain(t, body)
	if ref.fallback() != "" || len(ref.Media) != 1 || ref.Media[0].GridTHW != [3]int{16, 24, 42} {
		t.Fatalf("explain after the reload: fallback %q detail %q media %+v", ref.fallback(), ref.Detail, ref.Media)
	}
	prefix := nemotronTextPrefixBlocks(t, body)
	cold := h.chat(t, body).mustOK(t)
	if cold.fallback != "" || cold.total != ref.TotalBlocks {
		t.Fatalf("cold: fallback %q, total %d (explain %d)", cold.fallback, cold.total, ref.TotalBlocks)
	}
	h.waitEvents(t)
	warm := h.chat(t, body).mustOK(t)
	if warm.fallback != "" || warm.worker != cold.worker || warm.overlap != warm.total || warm.hitBlocks != warm.overlap {
		t.Fatalf("warm after the reload: worker %s (cold %s), overlap %d of %d (text before <video>: %d blocks), simulator hit %d, fallback %q",
			warm.worker, cold.worker, warm.overlap, warm.total, prefix, warm.hitBlocks, warm.fallback)
	}
	if warm.total <= prefix+1 {
		t.Fatalf("the video span adds no block (%d total, %d before <video>): the test shows nothing", warm.total, prefix)
	}
	if n := h.metric(t, "caddy_kvroute_events_total", `result="invalid_event"`); n != 0 {
		t.Errorf("%v events could not be normalized after the reload", n)
	}
}

// TestReloadAppliesIndexBounds: index bounds changed by a reload take effect on the surviving
// index at once (a lowered max_blocks_per_worker evicts the oldest leaves, keeping each worker's
// cached prefix), and a later reload without the bound restores the default.
func TestReloadAppliesIndexBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: fills the index through Caddy and reloads it twice with other bounds, ~2.5 s")
	}
	h := startHarness(t, []simSpec{{ID: "idx-a", Model: "qwen"}})
	body := textBody(t, "qwen", longText("Index bounds across a reload.", 600))
	cold := h.chat(t, body).mustOK(t)
	h.waitEvents(t)
	if blocks := h.workers(t)["idx-a"].Blocks; blocks < int64(cold.total) || cold.total <= 8 {
		t.Fatalf("before the reload: %d blocks in the index for a prompt of %d blocks", blocks, cold.total)
	}

	const capBlocks = 5
	h.reload(t, harnessOpts{appOpts: fmt.Sprintf("\t\tindex {\n\t\t\tmax_blocks_per_worker %d\n\t\t}", capBlocks)})
	if got := runningApp(t).KVIndex().Limits().MaxBlocksPerWorker; got != capBlocks {
		t.Fatalf("index max_blocks_per_worker %d after the reload, want %d", got, capBlocks)
	}
	if blocks := h.workers(t)["idx-a"].Blocks; blocks != capBlocks {
		t.Fatalf("after lowering the cap to %d: %d blocks in the index", capBlocks, blocks)
	}
	// the evicted blocks are the newest leaves: the prompt's first capBlocks blocks stay credited
	if e := h.explain(t, body); len(e.Candidates) != 1 || e.Candidates[0].OverlapBlocks != capBlocks || e.TotalBlocks != cold.total {
		t.Fatalf("explain after the reload: %+v, want overlap %d of %d", e.Candidates, capBlocks, cold.total)
	}

	h.reload(t, harnessOpts{})
	if got := runningApp(t).KVIndex().Limits().MaxBlocksPerWorker; got != 1<<20 {
		t.Fatalf("index max_blocks_per_worker %d after the reload without the bound, want the default %d", got, 1<<20)
	}
	other := textBody(t, "qwen", longText("Another prompt after the bound was lifted.", 600))
	o := h.chat(t, other).mustOK(t)
	h.waitEvents(t)
	if blocks := h.workers(t)["idx-a"].Blocks; blocks < int64(o.total) {
		t.Fatalf("after lifting the cap: %d blocks in the index, want at least the %d of the new prompt", blocks, o.total)
	}
}

// TestReloadKeepsWorkerMarkedDown: a worker marked down by a failed proxy attempt stays down
// across a config reload (passive detection only, static workers: nothing but a served request
// brings it back), so requests after the reload do not go to it. Before the fix the health record
// was per config load and the reload forgot it.
func TestReloadKeepsWorkerMarkedDown(t *testing.T) {
	w0, w1 := newFakeWorker(t, "w0"), newFakeWorker(t, "w1")
	cfg := edgeConfig{Workers: []string{w0.addr(), w1.addr()}, App: "\t\thealth_checks off\n"}
	e := startEdge(t, cfg)
	cl := e.client(false)
	defer cl.CloseIdleConnections()
	w1.kill()
	// distinct prompts spread by load over both workers: one reaches the dead worker and fails
	failed := false
	for i := 0; i < 40 && !failed; i++ {
		res, _ := e.postTo(t, cl, e.https, chatBody(fmt.Sprintf("before the reload %d", i)))
		failed = res == 502
	}
	if !failed || workerHealthy(t, e, "w1") {
		t.Fatalf("the dead worker was not marked down (a request failed: %v)", failed)
	}

	cfg.App += "\t\tmax_media 31\n" // a different config: Caddy really reloads
	e.reload(t, cfg)
	cl.CloseIdleConnections() // see harness.reload: a POST on a connection the old server closes is reset
	if workerHealthy(t, e, "w1") {
		t.Fatal("the reload forgot that w1 is down")
	}
	for i := 0; i < 10; i++ {
		res, worker := e.postTo(t, cl, e.https, chatBody(fmt.Sprintf("after the reload %d", i)))
		if res != 200 || worker != "w0" {
			t.Fatalf("request %d after the reload: status %d from %q, want 200 from w0", i, res, worker)
		}
	}
}

// reload loads cfg into the running Caddy on the same folder and ports (a real config reload).
func (e *edgeEnv) reload(t *testing.T, cfg edgeConfig) {
	t.Helper()
	caddytest.MustLoad(t, cfg.caddyfile(e.dir, e.adminPort, e.httpPort, e.httpsPort))
}

// postTo posts a chat body to base's /v1/chat/completions; it returns the status (-1 on a
// transport error) and the X-Kvroute-Worker header.
func (e *edgeEnv) postTo(t *testing.T, cl *http.Client, base string, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := cl.Do(req)
	if err != nil {
		return -1, ""
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, res.Header.Get("X-Kvroute-Worker")
}

// TestReloadDropsGoneModelSeries: a reload that stops serving a model drops its
// caddy_kvroute_contract_agreement series (a series left behind at 0 kept the contract alert
// pending for a model nobody serves); the model still served keeps its series.
func TestReloadDropsGoneModelSeries(t *testing.T) {
	a, b := newFakeWorker(t, "a"), newFakeWorker(t, "b")
	cfg := edgeConfig{Workers: []string{a.addr(), b.addr()}, Models: []string{"qwen", "gone"}}
	e := startEdge(t, cfg)
	has := func(model string) bool {
		return strings.Contains(getText(t, http.DefaultClient, e.admin+"/metrics"), `caddy_kvroute_contract_agreement{model="`+model+`"}`)
	}
	if !has("qwen") || !has("gone") {
		t.Fatalf("before the reload: qwen series %v, gone series %v; want both", has("qwen"), has("gone"))
	}
	e.reload(t, edgeConfig{Workers: []string{a.addr()}, Models: []string{"qwen"}})
	if !has("qwen") || has("gone") {
		t.Fatalf("after the reload: qwen series %v, gone series %v; want qwen alone", has("qwen"), has("gone"))
	}
}

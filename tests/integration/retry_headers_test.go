package integration

import (
	"testing"
)

// TestRetryHeadersNameServedWorker: when the worker chosen for its KV overlap is gone and the
// proxy retries the request on another worker, the X-Kvroute-* headers (the Caddyfile.example
// header block, read at the response) name the worker that served and that worker's overlap, not
// the chosen worker's. Before, a retry showed the serving worker's id with the dead worker's
// overlap, which misled access logs built from the headers.
func TestRetryHeadersNameServedWorker(t *testing.T) {
	h := startHarness(t, []simSpec{{ID: "retry-a", Model: "qwen"}, {ID: "retry-b", Model: "qwen"}},
		// active probes off: a probe between the kill and the request would mark the dead worker
		// down and the request would go to the other one without a retry
		harnessOpts{proxyOpts: "\t\tlb_retries 1\n\t\tlb_retry_match {\n\t\t\tmethod POST\n\t\t}", appOpts: "\t\thealth_checks off"})
	body := textBody(t, "qwen", longText("Retry after the cached worker died.", 400))
	cold := h.coldChat(t, body)
	warm := h.chat(t, body).mustOK(t)
	if warm.worker != cold.worker || warm.overlap != warm.total || warm.total == 0 {
		t.Fatalf("warm: worker %s (cold %s), overlap %d of %d", warm.worker, cold.worker, warm.overlap, warm.total)
	}
	dead := h.sims[warm.worker]
	var other string
	for id := range h.sims {
		if id != warm.worker {
			other = id
		}
	}
	dead.ts.Close() // refused from now on; its registration and index entries stay
	if e := h.explain(t, body); len(e.Candidates) != 2 || e.Decision.WorkerID != dead.spec.ID {
		t.Fatalf("explain after the kill: %+v; want the dead worker still chosen (its overlap)", e)
	}
	got := h.chat(t, body).mustOK(t)
	if got.worker != other {
		t.Fatalf("after the kill: served by %q, want %q (the retry)", got.worker, other)
	}
	if got.overlap != 0 || got.total != warm.total {
		t.Errorf("after the retry on %s: X-Kvroute-Overlap-Blocks %d, total %d; want 0 (its own overlap) of %d", got.worker, got.overlap, got.total, warm.total)
	}
	if got.hitBlocks != 0 {
		t.Errorf("the serving worker reports %d cached blocks, want 0", got.hitBlocks)
	}
}

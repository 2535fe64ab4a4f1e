package integration

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// TestPendingPrefixThroughCaddy (cost ttft2): while a long prompt is in flight on one worker
// (prefill takes 1.5 s, so no KV event has reached the index yet), explain for the same prompt
// credits that worker its complete blocks as pending (terms.pending_blocks = overlap_blocks =
// every complete block but the last-token cap allows), the other worker nothing, and names the
// busy worker as the decision. After the request finished and its KV events were applied, the
// overlap comes from the index and nothing is pending.
func TestPendingPrefixThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: waits for a 1.5 s simulated prefill to hold a request in flight, ~2 s")
	}
	h := startHarness(t, []simSpec{{ID: "pend-a", Model: "qwen", PrefillDelay: 1500 * time.Millisecond},
		{ID: "pend-b", Model: "qwen", PrefillDelay: 1500 * time.Millisecond}},
		harnessOpts{appOpts: "scheduler {\n\t\t\tcost ttft2\n\t\t}"})
	body := textBody(t, "qwen", longText("Pending prefixes.", 300))
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
	var busy string
	for busy == "" {
		e := h.explain(t, body)
		if e.CostModel != "ttft2" {
			t.Fatalf("cost_model %q", e.CostModel)
		}
		for _, c := range e.Candidates {
			if c.ActiveRequests == 0 {
				continue
			}
			busy = c.WorkerID
			if c.OverlapBlocks < e.TotalBlocks-1 || c.Terms.PendingBlocks != c.OverlapBlocks || e.Decision.WorkerID != busy {
				t.Fatalf("in flight on %s: overlap %d pending %d of %d blocks, decision %s", busy, c.OverlapBlocks, c.Terms.PendingBlocks, e.TotalBlocks, e.Decision.WorkerID)
			}
			// Pending prefix credited in full: nothing queued elsewhere, so the cost is the
			// uncached rest (times 1 + busy_share) plus this worker's queued prefill.
			if c.Terms.CreditedTokens != float64(c.OverlapBlocks*blockSize) {
				t.Fatalf("credited_tokens %v, want %d", c.Terms.CreditedTokens, c.OverlapBlocks*blockSize)
			}
		}
		for _, c := range e.Candidates {
			if busy != "" && c.WorkerID != busy && (c.OverlapBlocks != 0 || c.Terms.PendingBlocks != 0) {
				t.Fatalf("idle %s: overlap %d pending %d", c.WorkerID, c.OverlapBlocks, c.Terms.PendingBlocks)
			}
		}
		if busy != "" {
			break
		}
		select {
		case a := <-done:
			t.Fatalf("the request finished (worker %s) before explain saw it in flight", a.worker)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the request never showed in flight")
		}
		time.Sleep(20 * time.Millisecond)
	}
	a := <-done
	if a.status != 200 || a.worker != busy {
		t.Fatalf("request: status %d worker %s, explain saw it on %s", a.status, a.worker, busy)
	}
	h.waitEvents(t)
	for _, c := range h.explain(t, body).Candidates {
		if c.Terms.PendingBlocks != 0 || c.ActiveRequests != 0 || (c.WorkerID == busy) != (c.OverlapBlocks > 0) {
			t.Errorf("after the request: %s overlap %d pending %d active %d", c.WorkerID, c.OverlapBlocks, c.Terms.PendingBlocks, c.ActiveRequests)
		}
	}
}

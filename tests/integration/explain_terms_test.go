package integration

import (
	"testing"
)

// TestExplainShowsCostTerms: after a long prompt was served and its KV events applied, explain lists
// for every candidate the terms of the default model (ttft2) its cost is the sum of: the worker
// that cached the prompt is credited overlap·16 tokens (nothing queued anywhere decays the credit)
// and has that many fewer to prefill than the one that did not; nothing queued, no queue term, no
// busy share or delayed tokens on idle workers, and the in-flight bound ceil(1.5 · (0 + 1) / 2) = 1.
func TestExplainShowsCostTerms(t *testing.T) {
	h := startHarness(t, []simSpec{{ID: "terms-a", Model: "qwen"}, {ID: "terms-b", Model: "qwen"}})
	body := textBody(t, "qwen", longText("Explain the terms.", 300))
	first := h.chat(t, body).mustOK(t)
	h.waitEvents(t)
	e := h.explain(t, body)
	if e.CostModel != "ttft2" || e.RequestTokens != first.promptTokens || len(e.Candidates) != 2 {
		t.Fatalf("cost_model %q request_tokens %d (prompt %d), %d candidates", e.CostModel, e.RequestTokens, first.promptTokens, len(e.Candidates))
	}
	for _, c := range e.Candidates {
		tm := c.Terms
		wantOverlap := 0
		if c.WorkerID == first.worker {
			wantOverlap = first.total // every complete block of the prompt is cached there
		}
		if c.OverlapBlocks != wantOverlap || tm.UncachedTokens != int64(e.RequestTokens-wantOverlap*blockSize) ||
			tm.QueuedPrefillTokens != 0 || tm.WaitingSequences != 0 || tm.QueueTokens != 0 ||
			tm.PrefillBlocks != 0 || tm.DecodeBlocks != 0 || c.Cost != float64(tm.UncachedTokens) ||
			tm.CreditedTokens != float64(wantOverlap*blockSize) || tm.BusyShare != 0 || tm.DelayedTokens != 0 ||
			tm.InFlightBound != 1 || tm.PendingBlocks != 0 || tm.LearnedMaxRunning != 0 ||
			c.ActiveRequests != 0 || c.ActivePrefillTokens != 0 || c.Busy || c.OverBalance {
			t.Errorf("candidate %s (served by %s, %d blocks): %+v", c.WorkerID, first.worker, first.total, c)
		}
	}
	if e.Decision.WorkerID != first.worker {
		t.Errorf("decision %s, want the caching worker %s", e.Decision.WorkerID, first.worker)
	}
	// The one routed request counts 1 on its worker in the recent counts (the tie-break); explain
	// itself counts nothing (a second explain sees the same).
	for _, c := range h.explain(t, body).Candidates {
		want := 0.0
		if c.WorkerID == first.worker {
			want = 1
		}
		if c.RecentRequests != want {
			t.Errorf("%s: recent_requests %v, want %v", c.WorkerID, c.RecentRequests, want)
		}
	}
}

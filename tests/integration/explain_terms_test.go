package integration

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// TestExplainShowsCostTerms: after a long prompt was served and its KV events applied, explain lists
// for every candidate the terms of the default model (ttft2) its cost is the sum of: the worker
// that cached the prompt is credited overlap·16 tokens (it never evicted, so its whole prefix survives)
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

// TestExplainShowsPrefillProgress (ttft2's prefill progress, through Caddy): after one request
// taught the worker's prefill time per token (a 1.5 s prefill), a second long request is in flight;
// explain shows the part of its prefill already run as prefill_done_tokens, taken off
// queued_prefill_tokens, and nothing once it has its first byte.
func TestExplainShowsPrefillProgress(t *testing.T) {
	h := startHarness(t, []simSpec{{ID: "progress-a", Model: "qwen", PrefillDelay: 1500 * time.Millisecond}})
	if first := h.chat(t, textBody(t, "qwen", longText("Teach the prefill time per token.", 300))).mustOK(t); first.promptTokens < 256 {
		t.Fatalf("the teaching prompt has %d tokens, under the 256 a sample needs", first.promptTokens)
	}
	long := textBody(t, "qwen", longText("A prefill in flight.", 300))
	sent := make(chan error, 1)
	go func() {
		res, err := h.client.Post(h.base+"/v1/chat/completions", "application/json", bytes.NewReader(long))
		if err == nil {
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		sent <- err
	}()
	probe := textBody(t, "qwen", "Another question.")
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := h.explain(t, probe).Candidates[0]
		if c.ActivePrefillTokens > 0 && c.Terms.PrefillDoneTokens > 0 {
			if c.Terms.PrefillDoneTokens >= c.ActivePrefillTokens || c.Terms.QueuedPrefillTokens != c.ActivePrefillTokens-c.Terms.PrefillDoneTokens {
				t.Errorf("in flight: active_prefill_tokens %d, prefill_done_tokens %d, queued_prefill_tokens %d",
					c.ActivePrefillTokens, c.Terms.PrefillDoneTokens, c.Terms.QueuedPrefillTokens)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no prefill progress shown within 10 s: %+v", c)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if c := h.explain(t, probe).Candidates[0]; c.ActivePrefillTokens != 0 || c.Terms.PrefillDoneTokens != 0 || c.Terms.QueuedPrefillTokens != 0 {
		t.Errorf("after the first byte: %+v", c)
	}
}

// TestExplainShowsCacheSurvival (ttft2's surviving prefix, through Caddy and a simulator whose
// prefix cache holds 10 blocks): three 4-block prompts, the third of which evicts two blocks of
// the first. Explain then shows the worker's learned cache capacity (cache_blocks 10) and, for
// the second prompt, all 4 blocks surviving with nothing queued. While a fourth prompt's prefill
// (4 new blocks, 64 tokens) is queued, the same explain credits 2 surviving blocks: storing 4
// blocks evicts the first prompt's two and the second's last two. After it ran, the simulator
// answers the second prompt with exactly those 2 blocks cached.
func TestExplainShowsCacheSurvival(t *testing.T) {
	h := startHarness(t, []simSpec{{ID: "lru-a", Model: "qwen", CacheBlocks: 10, PrefillDelay: time.Second}})
	prompt := func(first uint32, tokens int) []byte {
		ids := make([]uint32, tokens)
		for i := range ids {
			ids[i] = first + uint32(i)
		}
		return mustJSON(t, map[string]any{"model": "qwen", "prompt": ids, "max_tokens": 2})
	}
	p1, p2, p3, p4 := prompt(1000, 65), prompt(2000, 65), prompt(3000, 65), prompt(4000, 64)
	for _, p := range [][]byte{p1, p2, p3} {
		if a := h.completions(t, p); a.status != 200 || a.total != 4 {
			t.Fatalf("warm-up: %d, %d blocks: %s", a.status, a.total, a.body)
		}
	}
	h.waitEvents(t)
	c := h.explainAt(t, "/v1/completions", p2).Candidates[0]
	if c.OverlapBlocks != 4 || c.Terms.CacheBlocks != 10 || c.Terms.SurvivingBlocks != 4 || c.Terms.CreditedTokens != 64 {
		t.Fatalf("nothing queued: %+v", c)
	}
	sent := make(chan answer, 1)
	go func() { sent <- h.completions(t, p4) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c = h.explainAt(t, "/v1/completions", p2).Candidates[0]
		if c.ActivePrefillTokens > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fourth prompt was not seen in flight within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c.Terms.QueuedPrefillTokens != 64 || c.Terms.SurvivingBlocks != 2 || c.Terms.CreditedTokens != 32 || c.OverlapBlocks != 4 {
		t.Errorf("64 tokens queued: %+v", c)
	}
	if a := <-sent; a.status != 200 {
		t.Fatalf("fourth prompt: %d %s", a.status, a.body)
	}
	h.waitEvents(t)
	if a := h.completions(t, p2); a.hitBlocks != 2 || a.overlap != 2 {
		t.Errorf("the second prompt after the fourth: %d blocks cached on the worker, %d in the index; want 2", a.hitBlocks, a.overlap)
	}
}

// TestExplainShowsHerdAndColdTerms (ttft2, through Caddy and two simulators whose prefill takes
// 1.5 s): a 65-token prompt warms one worker (4 complete blocks). A 645-token prompt (40 blocks)
// that starts with it is cold: 4 of 40 blocks, under ColdShare of the request, so explain marks
// every candidate cold_request, credits nothing and costs both workers the same. While that prompt
// is in flight, explaining it again shows, on its worker, the pending prefix (40 blocks), the one
// request sharing it (pending_requests 1) and herd_bound 2: a copy may ride it, and is not
// over_balance; the other worker has no pending prefix and no herd bound.
func TestExplainShowsHerdAndColdTerms(t *testing.T) {
	h := startHarness(t, []simSpec{
		{ID: "herd-a", Model: "qwen", PrefillDelay: 1500 * time.Millisecond},
		{ID: "herd-b", Model: "qwen", PrefillDelay: 1500 * time.Millisecond},
	})
	prompt := func(tokens int) []byte {
		ids := make([]uint32, tokens)
		for i := range ids {
			ids[i] = 1000 + uint32(i)
		}
		return mustJSON(t, map[string]any{"model": "qwen", "prompt": ids, "max_tokens": 2})
	}
	short, long := prompt(65), prompt(645)
	warm := h.completions(t, short)
	if warm.status != 200 || warm.total != 4 {
		t.Fatalf("warm-up: %d, %d blocks: %s", warm.status, warm.total, warm.body)
	}
	h.waitEvents(t)
	e := h.explainAt(t, "/v1/completions", long)
	if e.TotalBlocks != 40 || len(e.Candidates) != 2 {
		t.Fatalf("cold explain: %d blocks, %d candidates", e.TotalBlocks, len(e.Candidates))
	}
	for _, c := range e.Candidates {
		wantOverlap := 0
		if c.WorkerID == warm.worker {
			wantOverlap = 4
		}
		if !c.Terms.ColdRequest || c.Terms.CreditedTokens != 0 || c.Cost != 645 || c.OverlapBlocks != wantOverlap {
			t.Errorf("cold request, %s: overlap %d, cost %v, terms %+v; want overlap %d, cold, nothing credited, cost 645",
				c.WorkerID, c.OverlapBlocks, c.Cost, c.Terms, wantOverlap)
		}
	}
	sent := make(chan answer, 1)
	go func() { sent <- h.completions(t, long) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		e = h.explainAt(t, "/v1/completions", long)
		busy := -1
		for i, c := range e.Candidates {
			if c.ActivePrefillTokens > 0 {
				busy = i
			}
		}
		if busy >= 0 {
			for i, c := range e.Candidates {
				if i == busy {
					if c.Terms.PendingBlocks != 40 || c.Terms.PendingRequests != 1 || c.Terms.HerdBound != 2 || c.OverBalance || c.Terms.ColdRequest {
						t.Errorf("worker with the prompt in flight, %s: %+v, over_balance %v", c.WorkerID, c.Terms, c.OverBalance)
					}
				} else if c.Terms.PendingBlocks != 0 || c.Terms.PendingRequests != 0 || c.Terms.HerdBound != 0 {
					t.Errorf("the other worker, %s: %+v", c.WorkerID, c.Terms)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the long prompt was not seen in flight within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a := <-sent; a.status != 200 {
		t.Fatalf("long prompt: %d %s", a.status, a.body)
	}
}

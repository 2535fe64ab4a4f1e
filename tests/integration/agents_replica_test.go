package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/caddybin"
	"github.com/kvroute/kvroute/internal/testkit/caddytest"
	"github.com/kvroute/kvroute/kvevents/respmap"
)

// TestResponsesLateReplica (issue 25): a second router replica, a separate Caddy process with the
// Caddyfile.example chain started after the responses were stored through the first one, sends
// every previous_response_id follow-up (and GET /v1/responses/{id}) to the worker that stored the
// response. The late process has never seen those answers: it knows the workers only from the
// kvroute_responses bucket on the shared NATS server (DESIGN.md §1.1). Without the shared map it
// would answer response_worker_unavailable (the id is unknown to it), and a follow-up sent to
// any other worker gets the simulator's 404, so either way the test fails. The other direction
// too: a response stored through the late replica is followed up through the first.
func TestResponsesLateReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: starts a second Caddy process (builds the kvroute binary) as a late router replica, ~60 s")
	}
	bin := caddybin.Build(t) // before the harness: the build is the slow part
	const delay = 300 * time.Millisecond
	h := startHarness(t, []simSpec{{ID: "rep-a", Model: "qwen", PrefillDelay: delay}, {ID: "rep-b", Model: "qwen", PrefillDelay: delay},
		{ID: "rep-c", Model: "qwen", PrefillDelay: delay}},
		harnessOpts{})
	const instructions = "You are a coding agent. Use the tools to read files before answering."

	// responses stored through the first replica, on more than one worker: sent at once, so
	// that the load (each simulator takes PrefillDelay) spreads them
	stored := map[string]string{} // response id → worker
	workers := map[string]bool{}
	type sent struct {
		status       int
		worker, body string
		err          error
	}
	out := make(chan sent, 6)
	for i := 0; i < cap(out); i++ {
		body := mustJSON(t, map[string]any{"model": "qwen", "instructions": fmt.Sprintf("Agent %d. %s", i, instructions), "tools": agentTools,
			"input": longText(fmt.Sprintf("Task %d: refactor package p%d.", i, i), 40)})
		go func() {
			res, err := h.client.Post(h.base+"/v1/responses", "application/json", bytes.NewReader(body))
			if err != nil {
				out <- sent{err: err}
				return
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			out <- sent{res.StatusCode, res.Header.Get("X-Kvroute-Worker"), string(b), err}
		}()
	}
	for i := 0; i < cap(out); i++ {
		s := <-out
		if s.err != nil || s.status != http.StatusOK || h.sims[s.worker] == nil {
			t.Fatalf("storing a response: %v, %d on %q: %.300s", s.err, s.status, s.worker, s.body)
		}
		id, _ := outputText(t, answer{body: []byte(s.body)})
		stored[id] = s.worker
		workers[s.worker] = true
	}
	if len(workers) < 2 {
		t.Fatalf("%d responses all stored on %v: the test needs them on at least two workers", len(stored), workers)
	}
	// the first replica's writes have reached the bucket before the second replica starts
	st := runningApp(t).NATS()
	kv, err := respmap.OpenBucket(context.Background(), st.JetStream(), 1, respmap.DefaultTTL, nil)
	if err != nil {
		t.Fatal(err)
	}
	probe := respmap.New(0, 0, nil)
	defer probe.Close()
	probe.Attach(kv)
	inBucket := func(id, w string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, _, ok, err := probe.Lookup(context.Background(), id)
			if err == nil && ok && got == w {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("bucket: %s → %q %v %v, want %s", id, got, ok, err, w)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for id, w := range stored {
		inBucket(id, w)
	}

	// the late replica: another Caddy process, same chain, on the first one's NATS server
	httpPort, adminPort := caddytest.Port(t), caddytest.Port(t)
	cfg := h.caddyfile(httpPort, adminPort)
	embedded := "\t\tembedded_nats {\n\t\t\tport random\n\t\t}\n"
	if !strings.Contains(cfg, embedded) {
		t.Fatalf("the harness's Caddyfile has no embedded_nats block to replace:\n%s", cfg)
	}
	cfg = strings.Replace(cfg, embedded, "\t\tnats_url "+st.URL()+"\n", 1)
	caddybin.Start(t, bin, cfg, fmt.Sprintf("127.0.0.1:%d", httpPort))
	late := *h
	late.setSite(t, httpPort, adminPort) // the same certificate: cfg names its files
	defer late.client.CloseIdleConnections()
	// it connects to NATS in the background: wait until it lists the simulators
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ws []workerStatus
		var last string
		res, err := late.client.Get(late.admin + "/kvroute/workers")
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			last = string(b)
			if json.Unmarshal(b, &ws) == nil && len(ws) == len(h.sims) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the late replica lists no %d workers after 30 s: %v %.300s", len(h.sims), err, last)
		}
		time.Sleep(50 * time.Millisecond)
	}

	served := func() map[string]int64 {
		m := map[string]int64{}
		for id, w := range h.sims {
			m[id] = w.srv.Requests()
		}
		return m
	}
	turn := 0
	for id, w := range stored {
		turn++
		before := served()
		a := late.post(t, "/v1/responses", mustJSON(t, map[string]any{"model": "qwen", "instructions": instructions, "tools": agentTools,
			"previous_response_id": id, "input": []any{map[string]any{"role": "user", "content": fmt.Sprintf("Continue, step %d.", turn)}}}))
		if a.status != http.StatusOK || a.worker != w {
			t.Fatalf("late replica, follow-up of %s (stored on %s): %d on %q: %.300s", id, w, a.status, a.worker, a.body)
		}
		after := served()
		for sid := range h.sims {
			if want := before[sid] + map[bool]int64{true: 1}[sid == w]; after[sid] != want {
				t.Fatalf("follow-up of %s: worker %s served %d requests, want %d", id, sid, after[sid]-before[sid], want-before[sid])
			}
		}
		next, _ := outputText(t, a)
		if g := late.do(t, http.MethodGet, "/v1/responses/"+id); g.status != http.StatusOK || g.worker != w {
			t.Fatalf("late replica, GET %s (stored on %s): %d on %q: %.300s", id, w, g.status, g.worker, g.body)
		}
		// stored through the late replica, followed up through the first (once the late
		// replica's write reached the bucket: the map's writes are asynchronous)
		inBucket(next, w)
		b := h.post(t, "/v1/responses", mustJSON(t, map[string]any{"model": "qwen", "previous_response_id": next, "input": "And the next step?"}))
		if b.status != http.StatusOK || b.worker != w {
			t.Fatalf("first replica, follow-up of %s stored through the late one on %s: %d on %q: %.300s", next, w, b.status, b.worker, b.body)
		}
	}
	t.Logf("%d follow-ups through the late replica on %d workers", len(stored), len(workers))

	// an id neither replica has seen is still the new error on the late one, not a worker's 404
	wantWorkerUnavailable(t, late.post(t, "/v1/responses", mustJSON(t, map[string]any{"model": "qwen", "previous_response_id": "resp_never_seen", "input": "x"})))
}

package caddymodule

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/routing/router"
)

// inputRecorder is a Decider that keeps the inputs it was given.
type inputRecorder struct {
	mu     sync.Mutex
	inputs []RouteInput
}

func (d *inputRecorder) Decide(_ context.Context, in *RouteInput) (*Decision, error) {
	d.mu.Lock()
	d.inputs = append(d.inputs, *in)
	d.mu.Unlock()
	return &Decision{}, nil
}

// TestWorkerListReachesRouterOnChange: the router's view of the worker list is converted when the
// list changes, not per request: two requests get the same slice (no copy, no conversion, no
// allocation to take it), equal to the registry list entry for entry; a worker marked down stays
// in it, not available.
func TestWorkerListReachesRouterOnChange(t *testing.T) {
	d := &inputRecorder{}
	a := testApp(t, d)
	h := testHandler(a, 1<<20)
	for range 2 {
		serve(t, h, http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":[]}`, nil)
	}
	set := a.workers.Load()
	for i, in := range d.inputs {
		if len(in.routed) != 2 || &in.routed[0] != &set.routed[0] || &in.Workers[0] != &set.all[0] {
			t.Fatalf("request %d: the router's list was rebuilt for the request (%p, set %p)", i, in.routed, set.routed)
		}
	}
	want := []router.Worker{
		{ID: "w1", Endpoint: "127.0.0.1:9001", Model: "m", Engine: "vllm", BlockSize: 16, DPSize: 1},
		{ID: "w2", Endpoint: "127.0.0.1:9002", Model: "m", Engine: "vllm", BlockSize: 16, DPSize: 1},
	}
	for i, w := range set.routed {
		if w.ID != want[i].ID || w.Endpoint != want[i].Endpoint || w.Model != want[i].Model || w.Engine != want[i].Engine ||
			w.BlockSize != want[i].BlockSize || w.DPSize != want[i].DPSize {
			t.Errorf("router worker %d: %+v, want %+v", i, w, want[i])
		}
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = a.decisionWorkers() }); n > 1 {
		t.Errorf("taking the decision's worker list allocates %v times, want at most 1 (the availability check)", n)
	}

	hr := newWorkerHealth(zap.NewNop(), nil)
	a.health.Store(hr)
	hr.fail("w1", "", "test")
	serve(t, h, http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":[]}`, nil)
	last := d.inputs[len(d.inputs)-1]
	// w1 stays in the list (its model still has it), marked not available.
	if len(last.Workers) != 2 || len(last.routed) != 2 || last.Available == nil ||
		last.Available(&last.routed[0]) || !last.Available(&last.routed[1]) {
		t.Fatalf("w1 down: workers %v, router view %v; want both, w1 not available", last.Workers, last.routed)
	}
	if len(a.WorkerList()) != 2 {
		t.Errorf("marking a worker down changed the worker list: %v", a.WorkerList())
	}
}

package scheduler_test

import (
	"math/rand/v2"
	"testing"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// TestNewWithTrackerSharesLoad: a scheduler built over another's tracker sees the load the first
// one accounted (kvroute keeps one tracker across config reloads), and frees it the same way.
func TestNewWithTrackerSharesLoad(t *testing.T) {
	old, err := scheduler.New(nil, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	w := index.WorkerKey{ID: "a"}
	d, err := old.Select(scheduler.Request{Tokens: 64, BlockSize: 16}, []scheduler.Candidate{{Worker: w, Available: true}})
	if err != nil {
		t.Fatal(err)
	}
	h := old.Begin(d)
	cfg := scheduler.DefaultConfig()
	cfg.OverlapCredit = 0.5
	next, err := scheduler.NewWithTracker(cfg, rand.NewPCG(1, 2), old.Tracker())
	if err != nil {
		t.Fatal(err)
	}
	if got := next.Tracker().Load(w); got != (scheduler.Load{PrefillTokens: 64, DecodeBlocks: 4, Requests: 1}) {
		t.Fatalf("new scheduler sees %+v", got)
	}
	h.Done()
	if got := next.Tracker().Load(w); got != (scheduler.Load{}) {
		t.Fatalf("after Done %+v", got)
	}
	if _, err := scheduler.NewWithTracker(nil, nil, nil); err == nil {
		t.Fatal("nil tracker accepted")
	}
}

package sim

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestPrefillTime(t *testing.T) {
	e := newEngine(&Config{PrefillDelay: 5 * time.Millisecond, PrefillPerToken: 100 * time.Microsecond})
	// 432 uncached tokens (27 blocks of 16): 5 ms + 43.2 ms.
	if got := e.prefillTime(432); got != 48200*time.Microsecond {
		t.Errorf("prefillTime(432) = %v, want 48.2ms", got)
	}
	if got := e.prefillTime(-3); got != 5*time.Millisecond {
		t.Errorf("prefillTime(-3) = %v, want 5ms", got)
	}
	// Defaults: no per-token time, no serial prefill, no slot limit.
	d := newEngine(DefaultConfig())
	if d.prefill != nil || d.slots != nil || d.prefillTime(1000) != 0 {
		t.Errorf("default engine %+v", d)
	}
}

// TestPrefillSerial: a prefill that arrives while another runs consults the cache only after the
// first stored its blocks, so it sees them (vLLM schedules a waiting request after the running
// prefill; the cache answers then).
func TestPrefillSerial(t *testing.T) {
	e := newEngine(&Config{PrefillPerToken: time.Microsecond})
	var stored atomic.Bool
	entered, release, firstDone := make(chan struct{}), make(chan struct{}), make(chan bool)
	go func() {
		firstDone <- e.runPrefill(context.Background(), func() int {
			close(entered)
			<-release
			return 10
		}, func() { stored.Store(true) })
	}()
	<-entered
	sawStored := make(chan bool, 1)
	secondDone := make(chan bool)
	go func() {
		secondDone <- e.runPrefill(context.Background(), func() int { sawStored <- stored.Load(); return 0 }, func() {})
	}()
	// Give the second prefill time to reach the lock; without the lock it would look now and see
	// nothing stored.
	time.Sleep(20 * time.Millisecond)
	close(release)
	if !<-firstDone || !<-secondDone {
		t.Fatal("a prefill reported cancellation")
	}
	if !<-sawStored {
		t.Error("second prefill consulted the cache before the first stored its blocks")
	}

	// A prefill waiting for the resource gives up when its context ends, without running done.
	e.prefill <- struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	if e.runPrefill(ctx, func() int { ran = true; return 0 }, func() { ran = true }) || ran {
		t.Error("cancelled prefill ran")
	}
	<-e.prefill
}

func TestAdmitSlots(t *testing.T) {
	e := newEngine(&Config{MaxRunning: 2})
	r1, ok1 := e.admit(context.Background())
	_, ok2 := e.admit(context.Background())
	if !ok1 || !ok2 {
		t.Fatal("first two admissions refused")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := e.admit(ctx); ok {
		t.Fatal("third sequence admitted over MaxRunning 2")
	}
	r1()
	if len(e.slots) != 1 {
		t.Fatalf("running %d after one release, want 1", len(e.slots))
	}
	if _, ok := e.admit(context.Background()); !ok || len(e.slots) != 2 {
		t.Fatalf("admission after release: ok %v, running %d", ok, len(e.slots))
	}
}

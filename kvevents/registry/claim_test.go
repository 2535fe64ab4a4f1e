package registry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvroute/kvroute/kvevents/registry"
)

// TestCheckClaim: a worker id that a live process publishes is refused (its record is rewritten
// within the window); no record, a record deleted meanwhile, a record nobody rewrites (its process
// died) and a record without an instance are not.
func TestCheckClaim(t *testing.T) {
	kv := startBucket(t)
	ctx := context.Background()
	rec := registry.Worker{WorkerID: "w1", Endpoint: "127.0.0.1:9001", Model: "m", Engine: "vllm", BlockSize: 16}
	put := func(instance string) {
		t.Helper()
		r := rec
		r.Instance = instance
		b, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, "w1", b); err != nil {
			t.Fatal(err)
		}
	}
	window := 600 * time.Millisecond

	if err := registry.CheckClaim(ctx, kv, "w1", window); err != nil {
		t.Fatalf("no record: %v", err)
	}

	live, err := registry.NewPublisher(kv, rec, &registry.PublisherConfig{Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := live.Start(ctx); err != nil {
		t.Fatal(err)
	}
	err = registry.CheckClaim(ctx, kv, "w1", window)
	if !errors.Is(err, registry.ErrWorkerIDInUse) {
		t.Fatalf("a live publisher's id: %v, want ErrWorkerIDInUse", err)
	}
	t.Log(err)
	if err := live.Stop(ctx); err != nil { // deletes the key
		t.Fatal(err)
	}
	if err := registry.CheckClaim(ctx, kv, "w1", window); err != nil {
		t.Fatalf("after the publisher stopped: %v", err)
	}

	put("dead-process") // a record nobody rewrites: its process died without deleting it
	start := time.Now()
	if err := registry.CheckClaim(ctx, kv, "w1", window); err != nil {
		t.Fatalf("a stale record: %v", err)
	}
	if waited := time.Since(start); waited < window {
		t.Errorf("a stale record was accepted after %s, before the window of %s", waited, window)
	}

	put("dead-process")
	go func() {
		time.Sleep(150 * time.Millisecond)
		_ = kv.Delete(ctx, "w1")
	}()
	if err := registry.CheckClaim(ctx, kv, "w1", 10*time.Second); err != nil {
		t.Fatalf("a record deleted meanwhile: %v", err)
	}

	put("") // an older publisher without an instance: not told apart
	if err := registry.CheckClaim(ctx, kv, "w1", window); err != nil {
		t.Fatalf("a record without an instance: %v", err)
	}
}

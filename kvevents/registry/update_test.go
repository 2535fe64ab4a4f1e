package registry_test

import (
	"context"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kvevents/registry"
)

// TestPublisherUpdate: Update rewrites the record at once (the bridge re-registers a hybrid worker
// with its attention group's block size), later heartbeats keep the new one, and a record of another
// worker or an invalid one is refused.
func TestPublisherUpdate(t *testing.T) {
	kv := startBucket(t)
	ctx := context.Background()
	rec := registry.Worker{WorkerID: "w1", Endpoint: "127.0.0.1:9001", Model: "m", Engine: "vllm", BlockSize: 16}
	p, err := registry.NewPublisher(kv, rec, &registry.PublisherConfig{Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	blockSize := func() int {
		e, err := kv.Get(ctx, "w1")
		if err != nil {
			return -1
		}
		w, err := registry.Decode("w1", e.Value())
		if err != nil {
			t.Fatal(err)
		}
		return w.BlockSize
	}
	hybrid := rec
	hybrid.BlockSize = 2096
	if err := p.Update(ctx, hybrid); err != nil { // before Start: kept for Start, nothing written
		t.Fatal(err)
	}
	if n := blockSize(); n != -1 {
		t.Fatalf("record written before Start: block size %d", n)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	if n := blockSize(); n != 2096 {
		t.Fatalf("block size after Start %d, want 2096", n)
	}
	hybrid.BlockSize = 1056
	if err := p.Update(ctx, hybrid); err != nil {
		t.Fatal(err)
	}
	if n := blockSize(); n != 1056 {
		t.Fatalf("block size right after Update %d, want 1056", n)
	}
	e1, _ := kv.Get(ctx, "w1")
	wait.For(t, "heartbeat", func() bool { e2, err := kv.Get(ctx, "w1"); return err == nil && e2.Revision() > e1.Revision() })
	if n := blockSize(); n != 1056 {
		t.Fatalf("block size after a heartbeat %d, want 1056", n)
	}
	other := hybrid
	other.WorkerID = "w2"
	bad := hybrid
	bad.BlockSize = -1
	for _, w := range []registry.Worker{other, bad} {
		if err := p.Update(ctx, w); err == nil {
			t.Errorf("Update(%+v) accepted", w)
		}
	}
}

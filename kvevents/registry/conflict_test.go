package registry_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kvevents/registry"
)

// TestWatcherTwoProcessesOneWorkerID: two live processes writing the record of one worker id
// (each with its own instance) no longer make the worker's endpoint flip at every heartbeat. The
// watcher uses the first process's record, ignores the other's, warns once, and still takes a
// restart (a new instance whose predecessor stays silent) as a plain change. The records are put
// straight into the bucket, so the order is exact; a record of the first process put after the
// ignored ones shows that they were read and ignored.
func TestWatcherTwoProcessesOneWorkerID(t *testing.T) {
	kv := startBucket(t)
	ctx := context.Background()
	w, logs := startWatcher(t, kv, registry.WatcherConfig{})
	put := func(endpoint, instance string, blockSize int) {
		t.Helper()
		rec := registry.Worker{WorkerID: "w1", Endpoint: endpoint, Model: "m", Engine: "vllm", BlockSize: blockSize, Instance: instance}
		b, err := rec.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, "w1", b); err != nil {
			t.Fatal(err)
		}
	}
	is := func(endpoint string, blockSize int) func() bool {
		return func() bool {
			s := w.Snapshot()
			return len(s) == 1 && s[0].Endpoint == endpoint && s[0].BlockSize == blockSize
		}
	}
	changed := func() int { return logs.FilterMessage("worker record changed").Len() }
	warnings := func() []observer.LoggedEntry {
		return logs.FilterLevelExact(zapcore.WarnLevel).FilterField(zap.String("worker_id", "w1")).All()
	}

	put("127.0.0.1:9001", "proc-a", 16)
	wait.For(t, "a registered", is("127.0.0.1:9001", 16))
	put("127.0.0.1:9002", "proc-b", 16) // a new instance: taken as a restart
	wait.For(t, "b's record used", is("127.0.0.1:9002", 16))
	put("127.0.0.1:9001", "proc-a", 16) // a writes again: two live processes
	wait.For(t, "a's record used again", is("127.0.0.1:9001", 16))
	if ws := warnings(); len(ws) != 1 || w.Conflicts() != 1 ||
		ws[0].ContextMap()["endpoint"] != "127.0.0.1:9001" || ws[0].ContextMap()["ignored_endpoint"] != "127.0.0.1:9002" {
		t.Fatalf("conflict warnings %v (count %d): want one naming a's endpoint as used and b's as ignored", ws, w.Conflicts())
	}

	for range 3 { // b's heartbeats: ignored
		put("127.0.0.1:9002", "proc-b", 16)
	}
	put("127.0.0.1:9001", "proc-a", 32) // a's next record, after b's
	wait.For(t, "a's changed record", is("127.0.0.1:9001", 32))
	if n := changed(); n != 3 { // 9001→9002, 9002→9001, block size 16→32; none for b's ignored puts
		t.Fatalf("%d record changes logged, want 3: %v", n, logs.All())
	}
	if len(warnings()) != 1 || w.Conflicts() != 1 {
		t.Fatalf("the conflict was logged again within %s: %v", 5*time.Minute, warnings())
	}

	// a restart of a (a new instance; proc-a writes no more): a plain change, no warning
	put("127.0.0.1:9003", "proc-a2", 32)
	wait.For(t, "the restarted process's record", is("127.0.0.1:9003", 32))
	if len(warnings()) != 1 || changed() != 4 {
		t.Fatalf("restart: %d warnings, %d changes; want 1 and 4", len(warnings()), changed())
	}
	// records without an instance (older publishers) are used as they come
	put("127.0.0.1:9004", "", 32)
	wait.For(t, "a record without an instance", is("127.0.0.1:9004", 32))
}

// TestPublisherSetsInstance: each Publisher writes its own random instance, and Update keeps it.
func TestPublisherSetsInstance(t *testing.T) {
	kv := startBucket(t)
	ctx := context.Background()
	rec := registry.Worker{WorkerID: "w1", Endpoint: "127.0.0.1:9001", Model: "m", Engine: "vllm", BlockSize: 16}
	read := func() registry.Worker {
		t.Helper()
		e, err := kv.Get(ctx, "w1")
		if err != nil {
			t.Fatal(err)
		}
		got, err := registry.Decode("w1", e.Value())
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	var instances []string
	for range 2 {
		p, err := registry.NewPublisher(kv, rec, &registry.PublisherConfig{Interval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		first := read().Instance
		up := rec
		up.BlockSize = 32
		if err := p.Update(ctx, up); err != nil {
			t.Fatal(err)
		}
		if got := read(); got.BlockSize != 32 || got.Instance != first || len(first) != 16 {
			t.Fatalf("instance %q, after Update %q (block size %d)", first, got.Instance, got.BlockSize)
		}
		instances = append(instances, first)
		if err := p.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if instances[0] == instances[1] {
		t.Fatalf("two publishers wrote the same instance %q", instances[0])
	}
}

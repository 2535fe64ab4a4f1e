package registry_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/internal/testkit/natstest"
	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kvevents/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startBucket starts an embedded NATS server on a random loopback port and opens the bucket.
func startBucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	srv := natstest.Start(t)
	nc, err := natsutil.Connect(srv.ClientURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := registry.OpenBucket(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Bucket() != "kvroute_workers" || st.TTL() != 30*time.Second {
		t.Fatalf("bucket %s ttl %s", st.Bucket(), st.TTL())
	}
	// opening again reuses the bucket
	if _, err := registry.OpenBucket(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	return kv
}

// startWatcher starts a watcher of kv with cfg (its Logger replaced by an observer at info) and
// waits for its first listing; it stops at the test's end.
func startWatcher(t *testing.T, kv jetstream.KeyValue, cfg registry.WatcherConfig) (*registry.Watcher, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	cfg.Logger = zap.New(core)
	w := registry.NewWatcher(kv, &cfg)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	<-w.Ready()
	return w, logs
}

func TestPublisherWatcher(t *testing.T) {
	kv := startBucket(t)
	ctx := context.Background()
	w, logs := startWatcher(t, kv, registry.WatcherConfig{})
	changes, unsub := w.Subscribe()
	defer unsub()

	p, err := registry.NewPublisher(kv, registry.Worker{WorkerID: "w1", Endpoint: "http://127.0.0.1:9001", Model: "m", Engine: "vllm", BlockSize: 16}, &registry.PublisherConfig{Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-changes
	wait.For(t, "w1 registered", func() bool { s := w.Snapshot(); return len(s) == 1 && s[0].Endpoint == "127.0.0.1:9001" })
	// heartbeats rewrite the record: the revision grows
	e1, err := kv.Get(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "heartbeat", func() bool { e2, err := kv.Get(ctx, "w1"); return err == nil && e2.Revision() > e1.Revision() })
	// the join is logged once at info, heartbeats are not
	if joins := logs.FilterMessage("worker registered").FilterField(zap.String("worker_id", "w1")).All(); len(joins) != 1 ||
		joins[0].Level != zapcore.InfoLevel || joins[0].ContextMap()["endpoint"] != "127.0.0.1:9001" {
		t.Fatalf("join log lines %v", joins)
	}

	// an invalid record is dropped and counted
	if _, err := kv.Put(ctx, "bad", []byte(`{"worker_id":"bad"}`)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "invalid record counted", func() bool { return w.Invalid() == 1 })
	if len(w.Snapshot()) != 1 {
		t.Fatalf("snapshot = %+v", w.Snapshot())
	}

	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "w1 deregistered", func() bool { return len(w.Snapshot()) == 0 })
	if left := logs.FilterMessage("worker left").FilterField(zap.String("worker_id", "w1")).FilterField(zap.String("reason", "deregistered")).Len(); left != 1 {
		t.Fatalf("graceful deregistration logged %d times: %v", left, logs.All())
	}
	if err := p.Stop(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
}

func TestWatcherExpiresSilentRecords(t *testing.T) {
	kv := startBucket(t)
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	core, logs := observer.New(zapcore.InfoLevel)
	w := registry.NewWatcher(kv, &registry.WatcherConfig{SweepInterval: 5 * time.Millisecond, Now: clock, Logger: zap.New(core)})
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rec := registry.Worker{WorkerID: "w2", Endpoint: "127.0.0.1:9002", Model: "m", Engine: "vllm", BlockSize: 16}
	b, _ := rec.Encode()
	if _, err := kv.Put(ctx, "w2", b); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "w2 registered", func() bool { return len(w.Snapshot()) == 1 })
	mu.Lock()
	now = now.Add(registry.TTL - time.Second)
	mu.Unlock()
	time.Sleep(30 * time.Millisecond) // several sweeps: still inside TTL
	if len(w.Snapshot()) != 1 {
		t.Fatal("record dropped before TTL")
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	wait.For(t, "w2 expired", func() bool { return len(w.Snapshot()) == 0 })
	wait.For(t, "expiry logged", func() bool {
		return logs.FilterMessage("worker left").FilterField(zap.String("worker_id", "w2")).FilterField(zap.String("reason", "expired")).Len() == 1
	})
}

// TestWatcherLogsAcceptedRecordsOnly: with WatcherConfig.Accepted, a record the caller refuses
// is kept in the snapshot (the caller filters) but its join and leave are not logged; an
// accepted record's are.
func TestWatcherLogsAcceptedRecordsOnly(t *testing.T) {
	kv := startBucket(t)
	ctx := context.Background()
	accept := func(w registry.Worker) bool { return w.WorkerID != "refused" }
	w, logs := startWatcher(t, kv, registry.WatcherConfig{Accepted: accept})
	for _, id := range []string{"refused", "used"} {
		rec := registry.Worker{WorkerID: id, Endpoint: "127.0.0.1:9001", Model: "m", Engine: "vllm", BlockSize: 16}
		b, _ := rec.Encode()
		if _, err := kv.Put(ctx, id, b); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "both records seen", func() bool { return len(w.Snapshot()) == 2 })
	for _, id := range []string{"refused", "used"} {
		if err := kv.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "both records gone", func() bool { return len(w.Snapshot()) == 0 })
	for _, c := range []struct {
		msg, id string
		want    int
	}{{"worker registered", "refused", 0}, {"worker left", "refused", 0}, {"worker registered", "used", 1}, {"worker left", "used", 1}} {
		if n := logs.FilterMessage(c.msg).FilterField(zap.String("worker_id", c.id)).Len(); n != c.want {
			t.Errorf("%q for %s logged %d times, want %d", c.msg, c.id, n, c.want)
		}
	}
}

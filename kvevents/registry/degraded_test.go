package registry_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kvevents/registry"
)

// fakeClock is a watcher clock the test moves; calls counts the reads (each sweep reads it once
// first), so the test knows a sweep ran after a move.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	calls atomic.Int64
}

func (c *fakeClock) Now() time.Time {
	c.calls.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// sweeps waits until the clock was read n more times (n sweeps at least began after the call,
// each probing the bucket before it reads the clock again).
func (c *fakeClock) sweeps(t *testing.T, n int64) {
	t.Helper()
	from := c.calls.Load()
	wait.For(t, "watcher sweeps", func() bool { return c.calls.Load() >= from+n })
}

// TestWatcherKeepsRecordsWhileBucketUnavailable is DESIGN.md §2.1's "a registry that cannot be
// read is not a worker that left": with the server stopped (as when the server holding a one-replica
// bucket is gone) the watcher keeps the record past its TTL and says the
// registry is degraded; once the bucket is readable again and the grace period has passed, a
// record that was not rewritten expires.
func TestWatcherKeepsRecordsWhileBucketUnavailable(t *testing.T) {
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
	srv := startServer(t, opts)
	opts.Port = srv.Addr().(*net.TCPAddr).Port // the restart keeps the address
	nc, err := natsutil.Connect(srv.ClientURL(), &natsutil.ConnectConfig{ReconnectWait: 20 * time.Millisecond})
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
	rec := registry.Worker{WorkerID: "w1", Endpoint: "127.0.0.1:9001", Model: "m", Engine: "vllm", BlockSize: 16}
	b, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), "w1", b); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	const ttl = time.Minute
	w, logs := startWatcher(t, kv, registry.WatcherConfig{TTL: ttl, SweepInterval: 10 * time.Millisecond,
		ProbeTimeout: 200 * time.Millisecond, Grace: 2 * ttl, Now: clock.Now})
	wait.For(t, "w1 listed", func() bool { return len(w.Snapshot()) == 1 })

	srv.Shutdown()
	wait.For(t, "registry degraded", w.Degraded)
	clock.advance(10 * ttl) // far past the record's TTL
	clock.sweeps(t, 3)
	if got := w.Snapshot(); len(got) != 1 || got[0].WorkerID != "w1" {
		t.Fatalf("while the bucket cannot be read the watcher lists %v, want w1 kept", got)
	}
	if n := logs.FilterMessage("worker registry unavailable; keeping the last known workers until it can be read").Len(); n != 1 {
		t.Fatalf("degraded logged %d times, want 1", n)
	}
	if n := logs.FilterMessage("worker left").Len(); n != 0 {
		t.Fatalf("worker left logged %d times while the bucket was unavailable", n)
	}

	startServer(t, opts)
	wait.For(t, "registry readable", func() bool { return !w.Degraded() })
	clock.sweeps(t, 3)
	if len(w.Snapshot()) != 1 {
		t.Fatalf("within the grace period after the outage the watcher lists %v, want w1 kept", w.Snapshot())
	}
	// No rewrite of w1 within the grace period and its TTL: it expired while the bucket is readable.
	clock.advance(2*ttl + time.Second)
	wait.For(t, "w1 expired", func() bool { return len(w.Snapshot()) == 0 })
	if n := logs.FilterMessage("worker left").FilterFieldKey("reason").Len(); n != 1 {
		t.Fatalf("worker left logged %d times, want 1", n)
	}
	if w.Outages() != 1 {
		t.Fatalf("outages %d, want 1", w.Outages())
	}
}

func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	o := *opts
	srv, err := server.NewServer(&o)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

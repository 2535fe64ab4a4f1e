package respmap_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/kvevents/respmap"
	"github.com/kvroute/kvroute/kvevents/wire"
)

func bucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	srv, err := natsutil.StartEmbedded(&natsutil.EmbeddedConfig{Port: natsutil.RandomPort})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := respmap.OpenBucket(context.Background(), js, 1, 90*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// waitWrites waits (bounded) until m has written n records to the bucket: the writes are
// asynchronous by design (the response stream never waits for NATS).
func waitWrites(t *testing.T, m *respmap.Map, n uint64) {
	t.Helper()
	for i := 0; i < 500 && m.BucketWrites.Load() < n; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if got := m.BucketWrites.Load(); got != n {
		t.Fatalf("%d bucket writes, want %d (errors %d)", got, n, m.BucketWriteErrors.Load())
	}
}

// TestSharedAcrossReplicas: a response learned by one replica is found by a replica that starts
// later (empty local map) through the bucket, with the record's JSON shape of DESIGN.md §1.1.
func TestSharedAcrossReplicas(t *testing.T) {
	kv := bucket(t)
	st, err := kv.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Bucket() != wire.ResponsesBucket || st.TTL() != 90*time.Minute || st.History() != 1 {
		t.Fatalf("bucket %s ttl %v history %d", st.Bucket(), st.TTL(), st.History())
	}
	a := respmap.New(0, 0, nil)
	defer a.Close()
	a.Attach(kv)
	a.Learn("resp_abc123", "sim-2")
	a.Learn("weird id/with space", "sim-1") // not a NATS key: local only
	waitWrites(t, a, 1)
	e, err := kv.Get(context.Background(), "resp_abc123")
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Value()) != `{"worker_id":"sim-2"}` {
		t.Fatalf("record %s", e.Value())
	}
	b := respmap.New(0, 0, nil)
	defer b.Close()
	if _, _, ok, _ := b.Lookup(context.Background(), "resp_abc123"); ok {
		t.Fatal("found without the bucket")
	}
	b.Attach(kv)
	w, src, ok, err := b.Lookup(context.Background(), "resp_abc123")
	if err != nil || !ok || w != "sim-2" || src != respmap.SourceBucket {
		t.Fatalf("lookup: %q %q %v %v", w, src, ok, err)
	}
	if w, src, ok, _ := b.Lookup(context.Background(), "resp_abc123"); !ok || w != "sim-2" || src != respmap.SourceLocal {
		t.Fatalf("second lookup not local: %q %q %v", w, src, ok)
	}
	if _, _, ok, err := b.Lookup(context.Background(), "resp_unknown"); ok || err != nil {
		t.Fatalf("unknown id: %v %v", ok, err)
	}
	if w, _, ok, _ := a.Lookup(context.Background(), "weird id/with space"); !ok || w != "sim-1" {
		t.Fatal("local-only id lost")
	}
}

// TestLearnBeforeBucket: records learned before the bucket is attached (NATS not connected yet)
// are known locally at once and written once it is.
func TestLearnBeforeBucket(t *testing.T) {
	m := respmap.New(0, 0, nil)
	defer m.Close()
	m.Learn("resp_early", "sim-3")
	if w, _, ok, _ := m.Lookup(context.Background(), "resp_early"); !ok || w != "sim-3" {
		t.Fatal("not known locally")
	}
	kv := bucket(t)
	m.Attach(kv)
	waitWrites(t, m, 1)
	if e, err := kv.Get(context.Background(), "resp_early"); err != nil || string(e.Value()) != `{"worker_id":"sim-3"}` {
		t.Fatalf("record %v", err)
	}
}

// TestLocalBound: the local level keeps at most maxLocal entries, the most recent ones.
func TestLocalBound(t *testing.T) {
	m := respmap.New(100, 0, nil)
	defer m.Close()
	for i := range 10_000 {
		m.Learn(fmt.Sprintf("resp_%d", i), "w")
	}
	if m.Len() != 100 {
		t.Fatalf("%d local entries, want 100", m.Len())
	}
	if _, _, ok, _ := m.Lookup(context.Background(), "resp_9999"); !ok {
		t.Fatal("newest entry evicted")
	}
	if _, _, ok, _ := m.Lookup(context.Background(), "resp_0"); ok {
		t.Fatal("oldest entry kept")
	}
}

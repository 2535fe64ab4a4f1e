package loadsync_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kvroute/kvroute/internal/testkit/natstest"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/routing/loadsync"
	"github.com/kvroute/kvroute/routing/scheduler"
)

func embedded(t *testing.T) string {
	t.Helper()
	return natstest.Start(t).ClientURL()
}

func conn(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// waitLoad polls until tr shows want for worker w (bounded: 10 s), else fails with the last load.
func waitLoad(t *testing.T, tr *scheduler.Tracker, w string, want scheduler.Load) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := tr.Load(index.WorkerKey{ID: w})
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %s load %+v, want %+v", w, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReplicasShareLoad(t *testing.T) {
	url := embedded(t)
	workers := func() []string { return []string{"w1", "w2"} }
	trA, trB := scheduler.NewTracker(), scheduler.NewTracker()
	cfg := func(id string) loadsync.Config {
		return loadsync.Config{Replica: id, Interval: 20 * time.Millisecond, Expiry: 300 * time.Millisecond}
	}
	a, err := loadsync.New(cfg("a"), conn(t, url), trA, workers)
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadsync.New(cfg("b"), conn(t, url), trB, workers)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*loadsync.Sync{a, b} {
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer b.Stop()

	// A accounts a request on w1; B sees it, and A's own load is not echoed back to A.
	h := trA.Begin(index.WorkerKey{ID: "w1"}, 100, 5)
	waitLoad(t, trB, "w1", scheduler.Load{PrefillTokens: 100, DecodeBlocks: 5, Requests: 1})
	// B accounts its own request on w1 too: A sees B's, B keeps both.
	hb := trB.Begin(index.WorkerKey{ID: "w1"}, 10, 1)
	waitLoad(t, trA, "w1", scheduler.Load{PrefillTokens: 110, DecodeBlocks: 6, Requests: 2})
	waitLoad(t, trB, "w1", scheduler.Load{PrefillTokens: 110, DecodeBlocks: 6, Requests: 2})
	h.FirstByte()
	waitLoad(t, trB, "w1", scheduler.Load{PrefillTokens: 10, DecodeBlocks: 6, Requests: 2})
	h.Done()
	hb.Done()
	waitLoad(t, trB, "w1", scheduler.Load{})
	waitLoad(t, trA, "w1", scheduler.Load{})

	// A replica that goes silent with load outstanding is forgotten after the expiry.
	trA.Begin(index.WorkerKey{ID: "w2"}, 50, 2)
	waitLoad(t, trB, "w2", scheduler.Load{PrefillTokens: 50, DecodeBlocks: 2, Requests: 1})
	a.Stop()
	waitLoad(t, trB, "w2", scheduler.Load{})
	if r := b.Replicas(); len(r) != 0 {
		t.Fatalf("replicas still applied: %v", r)
	}
}

func TestMalformedSnapshotsIgnored(t *testing.T) {
	url := embedded(t)
	tr := scheduler.NewTracker()
	s, err := loadsync.New(loadsync.Config{Replica: "me", Interval: 20 * time.Millisecond}, conn(t, url), tr, func() []string { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	pub := conn(t, url)
	for _, m := range []string{`not json`, `{"replica":""}`, `{"replica":"x","loads":{"w":[-5,1,1]}}`, `{"replica":"me","loads":{"w":[9,9,9]}}`} {
		if err := pub.Publish(loadsync.Subject, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Publish(loadsync.Subject, []byte(`{"replica":"x","loads":{"w":[1,2,3]}}`)); err != nil {
		t.Fatal(err)
	}
	// Only the last, valid snapshot of another replica applies.
	waitLoad(t, tr, "w", scheduler.Load{PrefillTokens: 1, DecodeBlocks: 2, Requests: 3})
}

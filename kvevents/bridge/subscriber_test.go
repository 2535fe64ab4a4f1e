package bridge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/normalize"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/subscriber"
)

// TestWithRouterSubscriber runs the router's own consumer (kvevents/subscriber, the code the kvroute
// app runs) against the bridge: a two-rank worker registers through the bridge, the subscriber takes
// the record from the registry, batches dropped on the ZMQ wire are filled by the bridge from the
// engine's replay socket, and an engine restart is announced and rebuilt. After each phase the
// subscriber's index equals the index built from the same events applied directly.
func TestWithRouterSubscriber(t *testing.T) {
	env := newEnv(t)
	pubPort, replayPort := freeTCPPair(t), freeTCPPair(t)
	engines := []*fakeEngine{
		startEngine(t, env.zctx, tcpEP(pubPort), tcpEP(replayPort), true),
		startEngine(t, env.zctx, tcpEP(pubPort+1), tcpEP(replayPort+1), true),
	}
	cfg := oneWorker(pubPort, replayPort)
	cfg.Workers[0].DPSize = 2
	b := env.startBridge(cfg)
	for _, e := range engines {
		e.waitSubscribed()
	}
	wait.For(t, "registration", func() bool { return b.Registered("w1") })

	kv := env.registryBucket()
	rec := mustRecord(t, kv, "w1")
	idx, err := index.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := subscriber.New(&subscriber.Config{ReplayTimeout: 10 * time.Second}, env.rc, idx)
	if err != nil {
		t.Fatal(err)
	}
	sub.SetWorkers([]registry.Worker{rec})
	if err := sub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	// The registration replay requests (one per rank) are answered before any batch is published.
	wait.For(t, "registration replays answered", func() bool { return rankStats(b, 0).ReplayRequests == 1 && rankStats(b, 1).ReplayRequests == 1 })

	direct := newApplier(t)
	gens := []*eventGen{newEventGen(11, 16), newEventGen(12, 16)}
	send := func(dp, i int, drop bool) {
		p := gens[dp].batch(t, i, dp)
		engines[dp].publish(p, drop)
		direct.apply(index.WorkerKey{ID: "w1", DPRank: dp}, p)
	}
	waitApplied := func(dp int, last uint64) {
		t.Helper()
		wait.For(t, fmt.Sprintf("subscriber applied rank %d up to seq %d", dp, last), func() bool {
			ws, ok := sub.Worker("w1")
			if !ok || len(ws.Ranks) != 2 {
				return false
			}
			r := ws.Ranks[dp]
			return r.LastSeq != nil && *r.LastSeq == last && r.State == subscriber.StateLive
		})
	}

	const n = 30
	for i := range n {
		send(0, i, i == 7 || i == 8)
		send(1, i, i == 20)
	}
	waitApplied(0, n-1)
	waitApplied(1, n-1)
	sameIndexAs(t, direct, idx)
	checkStats(t, rankStats(b, 0), map[string]uint64{"gaps": 1, "filled": 2, "lost": 0, "resets": 0})
	checkStats(t, rankStats(b, 1), map[string]uint64{"gaps": 1, "filled": 1, "lost": 0, "resets": 0})

	// A new engine process on rank 1: its sequence starts at 0 and its cache is empty.
	engines[1].closeSockets()
	engines[1] = startEngine(t, env.zctx, tcpEP(pubPort+1), tcpEP(replayPort+1), true)
	direct.clear(index.WorkerKey{ID: "w1", DPRank: 1})
	gens[1] = newEventGen(13, 16)
	engines[1].waitSubscribed()
	for i := range 5 {
		send(1, i, false)
	}
	send(0, n, false)
	waitApplied(1, 4)
	waitApplied(0, n)
	sameIndexAs(t, direct, idx)
	checkStats(t, rankStats(b, 1), map[string]uint64{"restarts": 1, "resets": 1})
	if st := sub.Stats(); st.Events[subscriber.ResultReset] != 1 || st.Events[subscriber.ResultReplayFailed] != 0 {
		t.Errorf("subscriber events = %v, want 1 reset and no failed replay", st.Events)
	}
}

// sameIndexAs compares an index built through NATS (by the consumer or the subscriber) with the
// directly built one, on the blocks the direct side stored and the further ones given.
func sameIndexAs(t *testing.T, direct *applier, idx *index.Index, more ...map[kv.EngineHash]normalize.Stored) {
	t.Helper()
	known := append([]map[kv.EngineHash]normalize.Stored{direct.blocks}, more...)
	d, r := digest(direct.idx, known...), digest(idx, known...)
	if d != r {
		t.Fatalf("the index built through NATS differs from the index of the events applied directly:\ndirect:\n%s\nthrough NATS:\n%s", d, r)
	}
	if direct.idx.Stats().Entries == 0 {
		t.Fatal("empty index")
	}
}

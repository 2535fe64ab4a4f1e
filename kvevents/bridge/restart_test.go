package bridge_test

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/bridge"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// warmUp lets the goroutines that live as long as the connections start before a goroutine count is
// taken: the registry heartbeat (and the bridge connection's reply subscription), and the router
// connection's reply subscription started by its first request.
func warmUp(t *testing.T, env *testEnv, b *bridge.Bridge) {
	t.Helper()
	wait.For(t, "registration", func() bool { return b.Registered("w1") })
	if _, err := env.rc.Request(wire.ReplaySubject("w1"), []byte(`{"dp_rank":0,"from_seq":1000}`), 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

func oneWorker(pubPort, replayPort int) *bridge.Config {
	rep := ""
	if replayPort != 0 {
		rep = tcpEP(replayPort)
	}
	return &bridge.Config{
		Workers: []bridge.WorkerConfig{{
			WorkerID: "w1", Endpoint: "127.0.0.1:8000", Model: "m", Engine: "vllm", BlockSize: 16,
			ZMQEndpoint: tcpEP(pubPort), ReplayEndpoint: rep, Topic: "kv-events",
		}},
		Heartbeat:         50 * time.Millisecond,
		ReconnectInterval: 10 * time.Millisecond, ReconnectIntervalMax: 50 * time.Millisecond,
	}
}

// TestPublisherRestart kills and restarts the engine's sockets twice: first the same process
// rebinding (its sequence and buffer continue; batches sent while the bridge was disconnected are
// filled from the replay socket, no reset), then a new engine process (sequence from 0, cache empty;
// the bridge announces a reset and forwards the new process's history from its replay buffer). After
// each, the routed index equals the directly built one and no goroutine is left behind.
func TestPublisherRestart(t *testing.T) {
	env := newEnv(t)
	pubPort, replayPort := freeTCPPair(t), freeTCPPair(t)
	eng := startEngine(t, env.zctx, tcpEP(pubPort), tcpEP(replayPort), true)
	cons := newConsumer(t, env.rc, "w1")
	defer cons.close()
	b := env.startBridge(oneWorker(pubPort, replayPort))
	eng.waitSubscribed()
	k := index.WorkerKey{ID: "w1"}
	direct := newApplier(t)
	gen := newEventGen(3, 16)
	send := func(i int, drop bool) {
		p := gen.batch(t, i, 0)
		eng.publish(p, drop)
		direct.apply(k, p)
	}
	for i := range 10 {
		send(i, false)
	}
	cons.waitNext(0, 10)
	warmUp(t, env, b)
	before := runtime.NumGoroutine()

	// 1. The engine's sockets go away and come back; three batches are published meanwhile.
	eng.closeSockets()
	for i := 10; i < 13; i++ {
		send(i, false) // no subscriber: lost on the wire, kept in the engine's buffer
	}
	eng.reopen()
	eng.waitSubscribed()
	send(13, false)
	send(14, false)
	cons.waitNext(0, 15)
	cons.mu.Lock()
	sameIndex(t, direct, cons.ap)
	resets := len(cons.resets)
	cons.mu.Unlock()
	if resets != 0 {
		t.Errorf("resets after a reconnect = %d, want 0", resets)
	}
	checkStats(t, rankStats(b, 0), map[string]uint64{"forwarded": 15, "gaps": 1, "filled": 3, "lost": 0, "resets": 0, "restarts": 0})
	settleGoroutines(t, before)

	// 2. A new engine process: its sequence starts at 0 and its cache is empty. The bridge misses its
	// first two batches (it is not connected yet) and gets them from the replay buffer.
	eng.closeSockets()
	eng = startEngine(t, env.zctx, tcpEP(pubPort), tcpEP(replayPort), true)
	direct.clear(k)
	gen = newEventGen(4, 16)
	send(0, true)
	send(1, true)
	eng.waitSubscribed()
	for i := 2; i < 6; i++ {
		send(i, false)
	}
	wait.For(t, "reset announced", func() bool { cons.mu.Lock(); defer cons.mu.Unlock(); return len(cons.resets) == 1 })
	cons.waitNext(0, 6)
	cons.mu.Lock()
	sameIndex(t, direct, cons.ap)
	cons.mu.Unlock()
	checkStats(t, rankStats(b, 0), map[string]uint64{"forwarded": 21, "resets": 1, "restarts": 1, "last_seq": 5})
	settleGoroutines(t, before)

	// 3. A new engine process that numbers its batches on from a wall-clock epoch: the sequence jumps
	// forward, the engine's buffer does not hold the bridge's last batch, so the bridge announces a
	// reset at the new process's first buffered batch and forwards its whole buffer.
	const epoch = 1_000_000
	eng.closeSockets()
	eng = startEngine(t, env.zctx, tcpEP(pubPort), tcpEP(replayPort), true)
	eng.startAt(epoch)
	direct.clear(k)
	gen = newEventGen(8, 16)
	send(0, true)
	eng.waitSubscribed()
	for i := 1; i < 4; i++ {
		send(i, false)
	}
	wait.For(t, "second reset announced", func() bool { cons.mu.Lock(); defer cons.mu.Unlock(); return len(cons.resets) == 2 })
	cons.waitNext(0, epoch+4)
	cons.mu.Lock()
	sameIndex(t, direct, cons.ap)
	cons.mu.Unlock()
	checkStats(t, rankStats(b, 0), map[string]uint64{"forwarded": 25, "resets": 2, "restarts": 1, "lost": 0, "last_seq": epoch + 3})
	settleGoroutines(t, before)
}

// TestNATSRestart restarts the (embedded) NATS server while the engine keeps publishing: the bridge's
// client buffers, reconnects and flushes; what the router missed while it was disconnected is
// replayed from the bridge's ring; the worker record is written again by the heartbeat.
func TestNATSRestart(t *testing.T) {
	env := newEnv(t)
	pubPort, replayPort := freeTCPPair(t), freeTCPPair(t)
	eng := startEngine(t, env.zctx, tcpEP(pubPort), tcpEP(replayPort), false)
	cons := newConsumer(t, env.rc, "w1")
	defer cons.close()
	b := env.startBridge(oneWorker(pubPort, replayPort))
	eng.waitSubscribed()
	wait.For(t, "registration", func() bool { return b.Registered("w1") })
	k := index.WorkerKey{ID: "w1"}
	direct := newApplier(t)
	gen := newEventGen(5, 16)
	send := func(i int) {
		p := gen.batch(t, i, 0)
		eng.publish(p, false)
		direct.apply(k, p)
	}
	for i := range 10 {
		send(i)
	}
	cons.waitNext(0, 10)
	warmUp(t, env, b)
	before := runtime.NumGoroutine()

	env.srv.Shutdown()
	wait.For(t, "clients disconnected", func() bool { return !env.nc.IsConnected() && !env.rc.IsConnected() })
	for i := 10; i < 15; i++ {
		send(i)
	}
	wait.For(t, "bridge received the batches", func() bool { return rankStats(b, 0).Received == 15 })
	env.startNATS()
	wait.For(t, "clients reconnected", func() bool { return env.nc.IsConnected() && env.rc.IsConnected() })
	if err := env.rc.Flush(); err != nil { // the router's subscriptions are back on the server
		t.Fatal(err)
	}
	send(15)
	cons.waitNext(0, 16)
	cons.mu.Lock()
	sameIndex(t, direct, cons.ap)
	if len(cons.resets) != 0 || len(cons.replayErrs) != 0 {
		t.Errorf("resets %q, replay errors %q; want none", cons.resets, cons.replayErrs)
	}
	cons.mu.Unlock()
	checkStats(t, rankStats(b, 0), map[string]uint64{"forwarded": 16, "gaps": 0, "lost": 0, "resets": 0})
	t.Logf("router replay requests answered by the bridge: %d (%d batches)", rankStats(b, 0).ReplayRequests-1, rankStats(b, 0).Replayed)

	js, err := jetstream.New(env.rc)
	if err != nil {
		t.Fatal(err)
	}
	var kv jetstream.KeyValue
	wait.For(t, "bucket after restart", func() bool { kv, err = registry.OpenBucket(context.Background(), js); return err == nil })
	rev := uint64(0)
	wait.For(t, "heartbeat after restart", func() bool {
		e, err := kv.Get(context.Background(), "w1")
		if err != nil {
			return false
		}
		if rev == 0 {
			rev = e.Revision()
			return false
		}
		return e.Revision() > rev
	})
	settleGoroutines(t, before)

	// The embedded server of a restarted Caddy comes back with an empty store: the router creates the
	// bucket again and the bridge's heartbeat writes the record again; events flow on.
	env.srv.Shutdown()
	wait.For(t, "clients disconnected", func() bool { return !env.nc.IsConnected() && !env.rc.IsConnected() })
	env.store = t.TempDir()
	env.startNATS()
	wait.For(t, "clients reconnected", func() bool { return env.nc.IsConnected() && env.rc.IsConnected() })
	if err := env.rc.Flush(); err != nil {
		t.Fatal(err)
	}
	if kv, err = registry.OpenBucket(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "record written again", func() bool { _, err := kv.Get(context.Background(), "w1"); return err == nil })
	send(16)
	cons.waitNext(0, 17)
	cons.mu.Lock()
	sameIndex(t, direct, cons.ap)
	cons.mu.Unlock()
	settleGoroutines(t, before)
}

// TestGapWithoutReplaySocket: an engine without a replay socket loses a batch; the bridge announces a
// reset (next_seq = the first batch after the gap), the router clears the worker and applies from
// there, and replay requests are answered from the bridge's ring only.
func TestGapWithoutReplaySocket(t *testing.T) {
	env := newEnv(t)
	pubPort := freeTCPPair(t)
	eng := startEngine(t, env.zctx, tcpEP(pubPort), "", false)
	cons := newConsumer(t, env.rc, "w1")
	defer cons.close()
	cfg := oneWorker(pubPort, 0)
	cfg.RingBatches = 4
	cfg.Workers[0].Engine = "sglang" // same framing; the batches are forwarded with Kvroute-Encoding sglang
	b := env.startBridge(cfg)
	eng.waitSubscribed()
	k := index.WorkerKey{ID: "w1"}
	direct := newApplier(t)
	direct.enc = codec.SGLang
	cons.mu.Lock()
	cons.ap.enc = codec.SGLang
	cons.mu.Unlock()
	gen := newEventGen(6, 16)
	for i := range 10 {
		p := gen.batch(t, i, 0)
		eng.publish(p, i == 5)
		if i == 6 {
			direct.clear(k) // what the router holds after the reset
		}
		if i != 5 {
			direct.apply(k, p)
		}
	}
	cons.waitNext(0, 10)
	cons.mu.Lock()
	sameIndex(t, direct, cons.ap)
	if len(cons.resets) != 1 {
		t.Errorf("resets = %q, want 1", cons.resets)
	}
	if len(cons.encodings) != 1 || cons.encodings["sglang"] != 9 {
		t.Errorf("Kvroute-Encoding values = %v, want sglang on all 9 batches", cons.encodings)
	}
	cons.mu.Unlock()
	checkStats(t, rankStats(b, 0), map[string]uint64{"forwarded": 9, "gaps": 1, "lost": 1, "resets": 1, "restarts": 0, "last_seq": 9})

	ask := func(body string) bridge.ReplayReply {
		t.Helper()
		resp, err := env.rc.Request(wire.ReplaySubject("w1"), []byte(body), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var r bridge.ReplayReply
		if err := json.Unmarshal(resp.Data, &r); err != nil {
			t.Fatalf("reply %s: %v", resp.Data, err)
		}
		return r
	}
	if r := ask(`{"dp_rank":0,"from_seq":7}`); r.Replayed == nil || *r.Replayed != 3 || r.Error != "" {
		t.Errorf("replay from 7 = %+v, want 3 batches (7, 8, 9 from the ring)", r)
	}
	if r := ask(`{"dp_rank":0,"from_seq":10}`); r.Replayed == nil || *r.Replayed != 0 {
		t.Errorf("replay from 10 = %+v, want 0", r)
	}
	for _, bad := range []string{`{"dp_rank":0,"from_seq":2}`, `{"dp_rank":1,"from_seq":7}`, `{"dp_rank":-1}`, `not json`} {
		if r := ask(bad); r.Error == "" || r.Replayed != nil {
			t.Errorf("replay %s = %+v, want an error", bad, r)
		}
	}
	cons.waitNext(0, 10) // the replayed batches were duplicates for the router
}

// TestCatchUpOnStart: batches an engine published before the bridge connected are forwarded from the
// engine's replay buffer, ahead of the first live batch.
func TestCatchUpOnStart(t *testing.T) {
	env := newEnv(t)
	pubPort, replayPort := freeTCPPair(t), freeTCPPair(t)
	eng := startEngine(t, env.zctx, tcpEP(pubPort), tcpEP(replayPort), true)
	k := index.WorkerKey{ID: "w1"}
	direct := newApplier(t)
	gen := newEventGen(7, 16)
	for i := range 5 {
		p := gen.batch(t, i, 0)
		eng.publish(p, false) // nobody subscribed yet
		direct.apply(k, p)
	}
	cons := newConsumer(t, env.rc, "w1")
	defer cons.close()
	b := env.startBridge(oneWorker(pubPort, replayPort))
	eng.waitSubscribed()
	p := gen.batch(t, 5, 0)
	eng.publish(p, false)
	direct.apply(k, p)
	cons.waitNext(0, 6)
	cons.mu.Lock()
	sameIndex(t, direct, cons.ap)
	cons.mu.Unlock()
	checkStats(t, rankStats(b, 0), map[string]uint64{"received": 1, "forwarded": 6, "resets": 0})
}

// TestTwoWorkersOneProcess: one bridge serves two workers (as `kvroute-bridge --config` with an array
// does): each worker's batches go to its own subject, and replay requests reach the right worker.
func TestTwoWorkersOneProcess(t *testing.T) {
	env := newEnv(t)
	p1, r1, p2, r2 := freeTCPPair(t), freeTCPPair(t), freeTCPPair(t), freeTCPPair(t)
	e1 := startEngine(t, env.zctx, tcpEP(p1), tcpEP(r1), true)
	e2 := startEngine(t, env.zctx, tcpEP(p2), tcpEP(r2), false)
	c1, c2 := newConsumer(t, env.rc, "w1", 3), newConsumer(t, env.rc, "w2", 4)
	defer c1.close()
	defer c2.close()
	cfg := oneWorker(p1, r1)
	w2 := cfg.Workers[0]
	w2.WorkerID, w2.ZMQEndpoint, w2.ReplayEndpoint = "w2", tcpEP(p2), tcpEP(r2)
	cfg.Workers = append(cfg.Workers, w2)
	b := env.startBridge(cfg)
	e1.waitSubscribed()
	e2.waitSubscribed()
	d1, d2 := newApplier(t), newApplier(t)
	g1, g2 := newEventGen(21, 16), newEventGen(22, 16)
	for i := range 12 {
		p := g1.batch(t, i, 0)
		e1.publish(p, i == 6)
		d1.apply(index.WorkerKey{ID: "w1"}, p)
		p = g2.batch(t, i, 0)
		e2.publish(p, false)
		d2.apply(index.WorkerKey{ID: "w2"}, p)
	}
	c1.waitNext(0, 12)
	c2.waitNext(0, 12)
	c1.waitReplies()
	c2.waitReplies()
	for _, c := range []struct {
		cons   *consumer
		direct *applier
	}{{c1, d1}, {c2, d2}} {
		c.cons.mu.Lock()
		sameIndex(t, c.direct, c.cons.ap)
		// One request per dropped batch; this minimal consumer may ask again when a live batch arrives
		// between the answer and the replayed batches.
		if c.cons.replays < 1 || len(c.cons.replayErrs) != 0 {
			t.Errorf("%s: %d replay requests, errors %q; want >= 1, all answered", c.cons.workerID, c.cons.replays, c.cons.replayErrs)
		}
		c.cons.mu.Unlock()
	}
	st := b.Stats()
	if len(st) != 2 || st[0].WorkerID != "w1" || st[1].WorkerID != "w2" || st[0].Gaps != 1 || st[1].Gaps != 0 ||
		st[0].ReplayRequests < 1 || st[1].ReplayRequests < 1 || st[0].ReplayErrors+st[1].ReplayErrors != 0 ||
		st[0].Forwarded != 12 || st[1].Forwarded != 12 {
		t.Errorf("stats = %+v", st)
	}
}

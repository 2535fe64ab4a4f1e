package subscriber_test

import (
	"slices"
	"testing"
	"time"

	"github.com/kvroute/kvroute/kv"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/subscriber"
)

// TestMain checks that no goroutine outlives the tests (subscribers, replay requests, servers).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBufferBounded: behind a gap nobody fills, at most MaxBuffered batches are held; one more gives
// the replay up and asks for the worker's snapshot. The batches buffered before that request make
// room for the later ones (a snapshot holds their effect); with no snapshot either (this bridge
// answers none), the worker is cleared and resyncs at the lowest batch still buffered.
func TestBufferBounded(t *testing.T) {
	cfg := subscriber.DefaultConfig()
	cfg.MaxBuffered = 3
	cfg.ReplayTimeout = time.Hour // only the bound can end the replay
	e := newEnv(t, cfg)
	b := newBridge(t, e.pub, "w")
	b.listen()
	// The snapshot request is refused only once 5 and 6 are buffered behind it: answered at once
	// (no responder), 6 could arrive after the clear and be applied instead, which is right too
	// but not what this test counts.
	release := make(chan struct{})
	snapSub, err := e.pub.Subscribe("kvroute.ctl.w.snapshot", func(m *nats.Msg) {
		<-release
		_ = m.Respond([]byte(`{"error":"no snapshot"}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = snapSub.Unsubscribe() }()
	if err := e.pub.Flush(); err != nil {
		t.Fatal(err)
	}
	e.sub.SetWorkers([]registry.Worker{worker("w", 1)})
	e.waitState("w", subscriber.StateLive)
	b.setMode("mute")
	var g chainGen
	batches := longChain(t, &g, 7)
	for i, data := range batches {
		b.forward(uint64(i), data, i == 1)
		if i == 4 { // 2, 3, 4 are buffered behind the gap at 1
			wait.For(t, "3 buffered", func() bool { return e.events("w")[subscriber.ResultBuffered] == 3 })
			if r, _ := e.rank0("w"); r.State != subscriber.StateReplaying {
				t.Fatalf("state %s, want replaying", r.State)
			}
			b.setMode("error") // the gap's request stays unanswered; later ones are refused
		}
	}
	wait.For(t, "5 and 6 buffered behind the snapshot request", func() bool { return e.events("w")[subscriber.ResultBuffered] == 5 })
	close(release)
	e.waitSeq("w", 6)
	ev := e.events("w")
	// replay failures: the gap's (given up) and the rebuild try's (refused); 5 and 6 buffered behind
	// the snapshot request, 2..4 dropped for them.
	want := map[string]uint64{
		subscriber.ResultApplied: 3, subscriber.ResultBuffered: 5, subscriber.ResultBufferOverflow: 1,
		subscriber.ResultCleared: 1, subscriber.ResultGap: 1, subscriber.ResultReplayFailed: 2,
		subscriber.ResultReplayRequested: 3, subscriber.ResultSnapshotRequested: 1, subscriber.ResultSnapshotFailed: 1,
		subscriber.ResultUnknownParent: 2,
	}
	if !mapsEqual(ev, want) {
		t.Errorf("counters %v, want %v", ev, want)
	}
	// Resynced at 5: batches 5, 6 applied on a cleared index; 5 continues a chain it lost, so it and
	// what hangs from it are not credited (unknown parent), nothing from before the gap is.
	if n := e.ix.WorkerBlocks(index.WorkerKey{ID: "w"}); n != 0 {
		t.Errorf("w holds %d blocks, want 0", n)
	}
	if got := b.requestLog(); !slices.Equal(got, []uint64{0, 1, 0}) {
		t.Errorf("replay requests from %v, want [0 1 0] (registration, gap, one rebuild try)", got)
	}
}

// TestResetToZeroRebuilds: a bridge whose engine restarted announces next_seq 0 and forwards the new
// history; the old blocks are gone and the new ones apply.
func TestResetToZeroRebuilds(t *testing.T) {
	e := newEnv(t, nil)
	e.sub.SetWorkers([]registry.Worker{worker("w", 1)})
	e.waitState("w", subscriber.StateUnsynced)
	var g chainGen
	old := longChain(t, &g, 3)
	for i, data := range old {
		e.publish("w", uint64(i), 0, "vllm", data)
	}
	e.waitSeq("w", 2)
	if err := e.pub.Publish("kvroute.ctl.w.reset", []byte(`{"dp_rank":0,"next_seq":0,"reason":"publisher restarted"}`)); err != nil {
		t.Fatal(err)
	}
	fresh := longChain(t, &g, 2)
	for i, data := range fresh {
		e.publish("w", uint64(i), 0, "vllm", data)
	}
	wait.For(t, "reset", func() bool { return e.events("w")[subscriber.ResultReset] == 1 })
	e.waitSeq("w", 1)
	sameAsReference(t, e.ix, "w", fresh)
	if n := e.ix.WorkerBlocks(index.WorkerKey{ID: "w"}); n != 4 {
		t.Errorf("w holds %d blocks, want 4", n)
	}
	// an unparseable reset clears every rank and waits for the next batch
	if err := e.pub.Publish("kvroute.ctl.w.reset", []byte(`{"dp_rank":`)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "bad reset", func() bool { return e.events("w")[subscriber.ResultBadHeader] == 1 })
	if n := e.ix.WorkerBlocks(index.WorkerKey{ID: "w"}); n != 0 {
		t.Errorf("w holds %d blocks after a reset without a body", n)
	}
	e.waitState("w", subscriber.StateUnsynced)
	e.publish("w", 7, 0, "vllm", g.stored(t, 2, false, codec.MapForm))
	e.waitSeq("w", 7)
	if n := e.ix.WorkerBlocks(index.WorkerKey{ID: "w"}); n != 2 {
		t.Errorf("w holds %d blocks, want 2", n)
	}
}

// TestStopIsIdempotent: Stop twice, Start after Stop fails, Stats still works.
func TestStopIsIdempotent(t *testing.T) {
	e := newEnv(t, nil)
	e.sub.SetWorkers([]registry.Worker{worker("w", 1)})
	e.waitState("w", subscriber.StateUnsynced)
	e.sub.Stop()
	e.sub.Stop()
	if err := e.sub.Start(t.Context()); err == nil {
		t.Error("Start after Stop succeeded")
	}
	if st := e.sub.Stats(); len(st.Workers) != 1 || st.Workers[0].LastSeq != nil {
		t.Errorf("stats %+v", st)
	}
}

// TestOtherEncodings: Dynamo RouterEvent JSON batches apply with their own tokens_hash values, and a
// batch without Kvroute-Encoding is read in the worker's engine encoding (sglang here).
func TestOtherEncodings(t *testing.T) {
	e := newEnv(t, nil)
	sg := worker("sg", 1)
	sg.Engine = kv.EngineSGLang
	e.sub.SetWorkers([]registry.Worker{worker("dy", 1), sg})
	e.waitState("dy", subscriber.StateUnsynced)
	e.waitState("sg", subscriber.StateUnsynced)

	e.publish("dy", 0, 0, "dynamo-json", []byte(`[{"worker_id":7,"event":{"event_id":1,"data":{"stored":`+
		`{"parent_hash":null,"blocks":[{"block_hash":11,"tokens_hash":101},{"block_hash":12,"tokens_hash":102}]}}}}]`))
	e.publish("dy", 1, 0, "dynamo-json", []byte(`{"worker_id":7,"event":{"event_id":2,"data":{"stored":`+
		`{"parent_hash":12,"blocks":[{"block_hash":13,"tokens_hash":103}]}}}}`))
	e.waitSeq("dy", 1)
	if n := overlap(e.ix, "dy", []kv.BlockHash{101, 102, 103}); n != 3 {
		t.Errorf("dynamo chain overlap %d, want 3", n)
	}
	e.publish("dy", 2, 0, "dynamo-json", []byte(`{"worker_id":7,"event":{"event_id":3,"data":{"removed":{"block_hashes":[13]}}}}`))
	e.waitSeq("dy", 2)
	if n := overlap(e.ix, "dy", []kv.BlockHash{101, 102, 103}); n != 2 {
		t.Errorf("dynamo chain overlap after removal %d, want 2", n)
	}

	var g chainGen
	text := g.stored(t, 3, false, codec.ArrayForm)
	if err := e.pub.PublishMsg(&nats.Msg{Subject: "kvroute.events.sg", Data: text, Header: nats.Header{"Kvroute-Seq": []string{"0"}}}); err != nil {
		t.Fatal(err)
	}
	e.waitSeq("sg", 0)
	sameAsReference(t, e.ix, "sg", [][]byte{text}) // text blocks hash alike in both encodings
	if n := e.ix.WorkerBlocks(index.WorkerKey{ID: "sg"}); n != 3 {
		t.Errorf("sg holds %d blocks, want 3", n)
	}
}

package subscriber_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvroute/kvroute/kv"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/subscriber"
)

// TestBadInputDroppedAndCounted sends random bytes, an unknown event type, a malformed event,
// removals of unknown blocks, bad headers and events of an unknown worker between valid batches:
// each is dropped and counted, and the valid batches after them still apply.
func TestBadInputDroppedAndCounted(t *testing.T) {
	e := newEnv(t, nil)
	e.sub.SetWorkers([]registry.Worker{worker("w", 1)})
	e.waitState("w", subscriber.StateUnsynced)

	var g chainGen
	var batches [][]byte
	add := func(b []byte) []byte { batches = append(batches, b); return b }
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 64)
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	garbage[0] = 0xc1 // never used by msgpack: cannot start a batch
	unknownType, err := msgpack.Marshal([]any{1.5, []any{[]any{"BlockExploded", []int64{7}}}})
	if err != nil {
		t.Fatal(err)
	}
	shortTokens := codec.Event{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{999}, TokenIDs: []uint32{1, 2, 3}, BlockSize: 16}
	badKeys := codec.Event{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{998}, TokenIDs: make([]uint32, 16), BlockSize: 16, HasExtraKeys: true}
	otherSize := codec.Event{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{997}, TokenIDs: make([]uint32, 32), BlockSize: 32}
	// A hybrid model's Mamba group: its store (dense here) teaches group 1 "mamba"; its kind-less
	// removal of a block the attention group holds (same engine hash) must then remove nothing.
	mamba := codec.Event{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{996}, TokenIDs: make([]uint32, 16), BlockSize: 16,
		GroupIdx: 1, HasGroupIdx: true, SpecKind: "mamba", HasSpecKind: true}
	unknownRemoval := codec.Event{Type: codec.BlockRemoved, BlockHashes: []kv.EngineHash{12345, 67890}}

	e.publish("w", 0, 0, "vllm", add(g.stored(t, 2, false, codec.ArrayForm)))
	// Garbage does not move the stream: the batch that really is seq 1 follows and applies.
	e.publish("w", 1, 0, "vllm", add(garbage))
	e.publish("w", 1, 0, "vllm", add(unknownType))
	mambaRemoval := codec.Event{Type: codec.BlockRemoved, BlockHashes: []kv.EngineHash{g.last}, GroupIdx: 1, HasGroupIdx: true}
	e.publish("w", 2, 0, "vllm", add(encode(t, codec.MapForm, shortTokens, badKeys, otherSize, mamba, mambaRemoval)))
	e.publish("w", 3, 0, "vllm", add(encode(t, codec.ArrayForm, unknownRemoval)))
	// bad headers: no seq, an unknown encoding, a rank beyond dp_size
	for _, h := range []nats.Header{
		{"Kvroute-Encoding": []string{"vllm"}},
		{"Kvroute-Seq": []string{"5"}, "Kvroute-Encoding": []string{"protobuf"}},
		{"Kvroute-Seq": []string{"5"}, "Kvroute-Dp-Rank": []string{"3"}},
	} {
		if err := e.pub.PublishMsg(&nats.Msg{Subject: "kvroute.events.w", Header: h, Data: []byte{0x90}}); err != nil {
			t.Fatal(err)
		}
	}
	var gg chainGen
	e.publish("ghost", 0, 0, "vllm", gg.stored(t, 1, false, codec.ArrayForm)) // not registered
	e.publish("w", 4, 0, "vllm", add(g.stored(t, 2, true, codec.MapForm)))    // continues seq 0's chain
	e.waitSeq("w", 4)

	want := map[string]uint64{
		subscriber.ResultApplied:           5, // seqs 0 to 4 (the garbage sent as seq 1 does not decode)
		subscriber.ResultDecodeError:       1,
		subscriber.ResultUnknownType:       1,
		subscriber.ResultInvalidEvent:      1, // extra_keys of the wrong length
		subscriber.ResultNonDenseBlockSpan: 1,
		subscriber.ResultBlockSizeMismatch: 1,
		subscriber.ResultNonAttentionGroup: 2, // the Mamba group's store and removal
		subscriber.ResultUnknownRemoval:    1,
		subscriber.ResultBadHeader:         3,
		subscriber.ResultReplayFailed:      1, // the registration replay: no bridge answers
		subscriber.ResultReplayRequested:   1,
		// then the snapshot request: nobody answers it either
		subscriber.ResultSnapshotRequested: 1,
		subscriber.ResultSnapshotFailed:    1,
	}
	if got := e.events("w"); !mapsEqual(got, want) {
		t.Errorf("worker counters %v, want %v", got, want)
	}
	st := e.sub.Stats()
	if st.Events[subscriber.ResultDroppedUnregistered] != 1 {
		t.Errorf("dropped_unregistered = %d, want 1", st.Events[subscriber.ResultDroppedUnregistered])
	}
	e.mu.Lock()
	if got := e.counted[subscriber.UnregisteredWorker][subscriber.ResultDroppedUnregistered]; got != 1 {
		t.Errorf("OnCount(%s, dropped_unregistered) = %d, want 1", subscriber.UnregisteredWorker, got)
	}
	if !mapsEqual(e.counted["w"], want) {
		t.Errorf("OnCount for w %v, want %v", e.counted["w"], want)
	}
	e.mu.Unlock()
	ref, queries := reference(t, "w", batches)
	sameIndex(t, e.ix, "w", ref, "w", queries)
	if n := e.ix.WorkerBlocks(index.WorkerKey{ID: "w"}); n != 4 {
		t.Errorf("w holds %d blocks, want 4", n)
	}
	if q := queries[len(queries)-1]; len(q) != 4 || overlap(e.ix, "w", q) != 4 {
		t.Errorf("the 4-block chain across the bad batches: overlap %d of %d", overlap(e.ix, "w", q), len(q))
	}
	if e.ix.WorkerBlocks(index.WorkerKey{ID: "ghost"}) != 0 {
		t.Error("events of an unregistered worker reached the index")
	}
}

func mapsEqual(a, b map[string]uint64) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// longChain returns n batches of 2 blocks each, all one chain.
func longChain(t testing.TB, g *chainGen, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = g.stored(t, 2, i > 0, codec.Form(1+i%2))
	}
	return out
}

// TestGapReplay loses two batches on the way: the gap sends exactly one replay request (after the
// registration replay from seq 0), the bridge's replay fills it, and the index equals the gap-free
// one.
func TestGapReplay(t *testing.T) {
	e := newEnv(t, nil)
	b := newBridge(t, e.pub, "w")
	b.listen()
	e.sub.SetWorkers([]registry.Worker{worker("w", 1)})
	wait.For(t, "registration replay", func() bool { return len(b.requestLog()) == 1 })
	e.waitState("w", subscriber.StateLive)

	batches := b.forwardChain(t, 10, func(i int) bool { return i == 4 || i == 5 })
	e.waitSeq("w", 9)
	if got := b.requestLog(); !slices.Equal(got, []uint64{0, 4}) {
		t.Errorf("replay requests from %v, want [0 4]", got)
	}
	sameAsReference(t, e.ix, "w", batches)
	if n := e.ix.WorkerBlocks(index.WorkerKey{ID: "w"}); n != 20 {
		t.Errorf("w holds %d blocks, want 20", n)
	}
	ev := e.events("w")
	if ev[subscriber.ResultGap] != 1 || ev[subscriber.ResultReplayFailed] != 0 || ev[subscriber.ResultCleared] != 0 ||
		ev[subscriber.ResultApplied] != 10 || ev[subscriber.ResultReplayed] < 2 {
		t.Errorf("counters %v", ev)
	}
}

// TestUnknownParentReplay: the router missed the worker's first batches (the bridge was not up for
// the registration replay), so the first batch it sees continues a chain it does not hold. That sends
// exactly one replay request from seq 0, and once replayed the index equals the gap-free one.
func TestUnknownParentReplay(t *testing.T) {
	e := newEnv(t, nil)
	e.sub.SetWorkers([]registry.Worker{worker("w", 1)})
	e.waitRegistrationReplayFailed("w")
	b := newBridge(t, e.pub, "w")
	b.listen()
	batches := b.forwardChain(t, 6, func(i int) bool { return i < 3 }) // 0..2 went out before the router subscribed
	e.waitSeq("w", 5)
	wait.For(t, "rebuild", func() bool { return e.ix.WorkerBlocks(index.WorkerKey{ID: "w"}) == 12 })
	if got := b.requestLog(); !slices.Equal(got, []uint64{0}) {
		t.Errorf("replay requests from %v, want [0]", got)
	}
	sameAsReference(t, e.ix, "w", batches)
	if ev := e.events("w"); ev[subscriber.ResultUnknownParent] < 1 || ev[subscriber.ResultReplayRequested] != 2 {
		t.Errorf("counters %v", ev)
	}
}

// TestUnknownParentReplayShort: the rebuild's replay ends before batches the stream applied live
// meanwhile; those are applied again after the clear, in order, and the index equals the gap-free one.
func TestUnknownParentReplayShort(t *testing.T) {
	e := newEnv(t, nil)
	e.sub.SetWorkers([]registry.Worker{worker("w", 1)})
	e.waitRegistrationReplayFailed("w")
	b := newBridge(t, e.pub, "w")
	b.limit = 4
	b.listen()
	batches := b.forwardChain(t, 8, func(i int) bool { return i < 3 })
	e.waitSeq("w", 7)
	wait.For(t, "rebuild", func() bool { return e.ix.WorkerBlocks(index.WorkerKey{ID: "w"}) == 16 })
	sameAsReference(t, e.ix, "w", batches)
	if got := b.requestLog(); !slices.Equal(got, []uint64{0}) {
		t.Errorf("replay requests from %v, want [0]", got)
	}
}

// TestUnansweredReplayClears: a replay nobody answers clears that worker only; it resyncs at the
// next batch.
func TestUnansweredReplayClears(t *testing.T) {
	cfg := subscriber.DefaultConfig()
	cfg.ReplayTimeout = 100 * time.Millisecond
	e := newEnv(t, cfg)
	b := newBridge(t, e.pub, "w")
	b.listen()
	e.sub.SetWorkers([]registry.Worker{worker("w", 1), worker("v", 1)})
	e.waitState("w", subscriber.StateLive)
	e.waitState("v", subscriber.StateUnsynced)
	b.setMode("mute")

	var g, gv chainGen
	old := longChain(t, &g, 4)
	for i, data := range old {
		b.forward(uint64(i), data, false)
	}
	vb := longChain(t, &gv, 3)
	for i, data := range vb {
		e.publish("v", uint64(i), 0, "vllm", data)
	}
	e.waitSeq("w", 3)
	b.forward(4, g.stored(t, 1, true, codec.ArrayForm), true) // lost
	fresh := g.stored(t, 3, false, codec.MapForm)             // a new chain
	b.forward(5, fresh, false)
	wait.For(t, "replay failure", func() bool { return e.events("w")[subscriber.ResultReplayFailed] == 1 })
	e.waitSeq("w", 5)

	sameAsReference(t, e.ix, "w", [][]byte{fresh})
	if n := e.ix.WorkerBlocks(index.WorkerKey{ID: "w"}); n != 3 {
		t.Errorf("w holds %d blocks after the failed replay, want the 3 of the new chain", n)
	}
	_, oldQueries := reference(t, "w", old)
	for _, q := range oldQueries {
		if n := overlap(e.ix, "w", q); n != 0 {
			t.Errorf("w still credited %d blocks of a chain from before the failed replay", n)
		}
	}
	refV, qv := reference(t, "v", vb)
	sameIndex(t, e.ix, "v", refV, "v", qv)
	if ev := e.events("w"); ev[subscriber.ResultCleared] != 1 || ev[subscriber.ResultGap] != 1 {
		t.Errorf("counters %v", ev)
	}
	if got := b.requestLog(); !slices.Equal(got, []uint64{0, 4}) {
		t.Errorf("replay requests from %v, want [0 4]", got)
	}
}

// TestClearAndResetOnlyThatWorker: AllBlocksCleared and a bridge reset empty only their worker; after
// the reset, batches before next_seq are dropped and later ones apply.
func TestClearAndResetOnlyThatWorker(t *testing.T) {
	e := newEnv(t, nil)
	e.sub.SetWorkers([]registry.Worker{worker("a", 1), worker("b", 1)})
	e.waitState("a", subscriber.StateUnsynced)
	e.waitState("b", subscriber.StateUnsynced)
	var ga, gb chainGen
	x := ga.stored(t, 3, false, codec.ArrayForm)
	xb := gb.stored(t, 3, false, codec.ArrayForm)
	e.publish("a", 0, 0, "vllm", x)
	e.publish("b", 0, 0, "vllm", xb)
	e.publish("a", 1, 0, "vllm", encode(t, codec.ArrayForm, codec.Event{Type: codec.AllBlocksCleared}))
	e.waitSeq("a", 1)
	e.waitSeq("b", 0)
	if n := e.ix.WorkerBlocks(index.WorkerKey{ID: "a"}); n != 0 {
		t.Errorf("a holds %d blocks after AllBlocksCleared", n)
	}
	if n := e.ix.WorkerBlocks(index.WorkerKey{ID: "b"}); n != 3 {
		t.Errorf("b holds %d blocks after a's AllBlocksCleared, want 3", n)
	}

	y := ga.stored(t, 2, false, codec.MapForm)
	e.publish("a", 2, 0, "vllm", y)
	e.waitSeq("a", 2)
	if err := e.pub.Publish("kvroute.ctl.a.reset", []byte(`{"dp_rank":0,"next_seq":10,"reason":"test"}`)); err != nil {
		t.Fatal(err)
	}
	e.publish("a", 3, 0, "vllm", ga.stored(t, 1, true, codec.MapForm)) // old incarnation: dropped
	z := ga.stored(t, 4, false, codec.ArrayForm)
	e.publish("a", 10, 0, "vllm", z)
	e.waitSeq("a", 10)
	sameAsReference(t, e.ix, "a", [][]byte{z})
	if n := e.ix.WorkerBlocks(index.WorkerKey{ID: "a"}); n != 4 {
		t.Errorf("a holds %d blocks, want the 4 after the reset", n)
	}
	_, qy := reference(t, "a", [][]byte{y})
	if n := overlap(e.ix, "a", qy[len(qy)-1]); n != 0 {
		t.Errorf("a still credited %d blocks stored before the reset", n)
	}
	refB, qb := reference(t, "b", [][]byte{xb})
	sameIndex(t, e.ix, "b", refB, "b", qb)
	if ev := e.events("a"); ev[subscriber.ResultReset] != 1 || ev[subscriber.ResultDuplicate] != 1 || ev[subscriber.ResultCleared] != 2 {
		t.Errorf("counters %v", ev)
	}
}

// TestDeregistrationPurges: a worker that leaves the set is purged from the index; its later events
// are dropped; one that comes back asks for its history again.
func TestDeregistrationPurges(t *testing.T) {
	e := newEnv(t, nil)
	e.sub.SetWorkers([]registry.Worker{worker("a", 2), worker("b", 1)})
	e.waitState("a", subscriber.StateUnsynced)
	e.waitState("b", subscriber.StateUnsynced)
	var ga, gb chainGen
	e.publish("a", 0, 0, "vllm", ga.stored(t, 3, false, codec.ArrayForm))
	e.publish("a", 0, 1, "vllm", ga.stored(t, 2, false, codec.ArrayForm))
	xb := gb.stored(t, 2, false, codec.ArrayForm)
	e.publish("b", 0, 0, "vllm", xb)
	e.waitSeq("a", 0)
	e.waitSeq("b", 0)
	wait.For(t, "rank 1", func() bool { return e.ix.WorkerBlocks(index.WorkerKey{ID: "a", DPRank: 1}) == 2 })
	if _, ws := e.rank0("a"); ws.Blocks != 5 || len(ws.Ranks) != 2 {
		t.Errorf("a stats %+v, want 5 blocks over 2 ranks", ws)
	}

	e.sub.SetWorkers([]registry.Worker{worker("b", 1)})
	wait.For(t, "a removed", func() bool { _, ok := e.sub.Worker("a"); return !ok })
	for r := 0; r < 2; r++ {
		if n := e.ix.WorkerBlocks(index.WorkerKey{ID: "a", DPRank: r}); n != 0 {
			t.Errorf("a rank %d holds %d blocks after deregistration", r, n)
		}
	}
	refB, qb := reference(t, "b", [][]byte{xb})
	sameIndex(t, e.ix, "b", refB, "b", qb)
	e.publish("a", 1, 0, "vllm", ga.stored(t, 1, false, codec.ArrayForm))
	wait.For(t, "dropped", func() bool { return e.sub.Stats().Events[subscriber.ResultDroppedUnregistered] == 1 })

	ba := newBridge(t, e.pub, "a")
	ba.listen()
	e.sub.SetWorkers([]registry.Worker{worker("a", 2), worker("b", 1)})
	wait.For(t, "re-registration replays", func() bool { return len(ba.requestLog()) == 2 })
	if got := ba.requestLog(); !slices.Equal(got, []uint64{0, 0}) {
		t.Errorf("re-registration replays from %v, want [0 0] (one per rank)", got)
	}
}

// TestFloodWithConcurrentReads applies a flood of batches for two workers while other goroutines
// read the index and the stats (run with -race); the end state equals the in-order reference.
func TestFloodWithConcurrentReads(t *testing.T) {
	e := newEnv(t, nil)
	ids := []string{"f1", "f2"}
	var ws []registry.Worker
	for _, id := range ids {
		ws = append(ws, worker(id, 1))
	}
	e.sub.SetWorkers(ws)
	for _, id := range ids {
		e.waitState(id, subscriber.StateUnsynced)
	}
	const n = 400
	all := map[string][][]byte{}
	for k, id := range ids {
		g := chainGen{next: uint64(k) << 40}
		rng := rand.New(rand.NewPCG(uint64(k), 7))
		var removable []kv.EngineHash
		for i := 0; i < n; i++ {
			var data []byte
			switch {
			case i%10 == 9 && len(removable) > 0:
				h := removable[rng.IntN(len(removable))]
				data = encode(t, codec.ArrayForm, codec.Event{Type: codec.BlockRemoved, BlockHashes: []kv.EngineHash{h}})
			default:
				data = g.stored(t, 1+rng.IntN(3), i%4 != 0, codec.Form(1+i%2))
				removable = append(removable, g.last)
			}
			all[id] = append(all[id], data)
		}
	}
	stop := make(chan struct{})
	var reads atomic.Int64
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := []kv.BlockHash{1, 2, 3}
			for {
				select {
				case <-stop:
					return
				default:
				}
				e.ix.Match(context.Background(), q)
				_ = e.ix.Stats()
				_ = e.sub.Stats()
				reads.Add(1)
			}
		}()
	}
	for i := 0; i < n; i++ {
		for _, id := range ids {
			e.publish(id, uint64(i), 0, "vllm", all[id][i])
		}
	}
	for _, id := range ids {
		e.waitSeq(id, n-1)
	}
	close(stop)
	wg.Wait()
	if reads.Load() == 0 {
		t.Error("no concurrent reads ran")
	}
	for _, id := range ids {
		sameAsReference(t, e.ix, id, all[id])
		if ev := e.events(id); ev[subscriber.ResultApplied] != n || ev[subscriber.ResultGap] != 0 {
			t.Errorf("%s counters %v", id, ev)
		}
	}
}

// TestReplayAnswerOrder: the answer may overtake the replayed batches (the gap then closes when they
// arrive), and an answer whose batches never come gives the replay up one ReplayTimeout later.
func TestReplayAnswerOrder(t *testing.T) {
	cfg := subscriber.DefaultConfig()
	cfg.ReplayTimeout = 200 * time.Millisecond
	e := newEnv(t, cfg)
	b := newBridge(t, e.pub, "w")
	b.listen()
	e.sub.SetWorkers([]registry.Worker{worker("w", 1)})
	e.waitState("w", subscriber.StateLive)

	b.setMode("answer-first")
	var g chainGen
	batches := longChain(t, &g, 6)
	for i, data := range batches {
		b.forward(uint64(i), data, i == 2 || i == 3)
	}
	e.waitSeq("w", 5)
	sameAsReference(t, e.ix, "w", batches)

	b.setMode("liar")
	b.forward(6, g.stored(t, 1, true, codec.ArrayForm), true)
	fresh := g.stored(t, 2, false, codec.MapForm)
	b.forward(7, fresh, false)
	wait.For(t, "replay given up", func() bool { return e.events("w")[subscriber.ResultReplayFailed] == 1 })
	e.waitSeq("w", 7)
	if n := e.ix.WorkerBlocks(index.WorkerKey{ID: "w"}); n != 2 {
		t.Errorf("w holds %d blocks, want the 2 after the failed replay; counters %v; requests %v", n, e.events("w"), b.requestLog())
	}
	if got := b.requestLog(); !slices.Equal(got, []uint64{0, 2, 6}) {
		t.Errorf("replay requests from %v, want [0 2 6]", got)
	}
	if ev := e.events("w"); ev[subscriber.ResultGap] != 2 || ev[subscriber.ResultCleared] != 1 {
		t.Errorf("counters %v", ev)
	}
}

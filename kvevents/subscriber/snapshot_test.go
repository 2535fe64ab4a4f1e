package subscriber_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kvroute/kvroute/internal/testkit/kvhistory"
	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/kvevents/subscriber"
)

// snapPublisher is a worker's publisher as kvroute-bridge is one: it numbers batches from 0, keeps
// the newest ringMax for replay, keeps the block set and answers snapshot requests.
type snapPublisher struct {
	t       testing.TB
	nc      *nats.Conn
	id      string
	ringMax int

	mu      sync.Mutex
	next    uint64
	ring    [][]byte // batches next-len(ring) .. next-1
	all     [][]byte // every batch, for the reference
	set     *snapshot.Set
	dec     *codec.Decoder
	refuse  bool          // answer snapshot requests with an error
	release chan struct{} // when set, a snapshot answer waits for it after taking the blocks
	taken   chan uint64   // receives the seq of each snapshot taken (buffered)
	subs    []*nats.Subscription
}

func newSnapPublisher(t testing.TB, nc *nats.Conn, id string, ringMax int) *snapPublisher {
	t.Helper()
	p := &snapPublisher{t: t, nc: nc, id: id, ringMax: ringMax, set: snapshot.NewSet(0), dec: codec.NewDecoder(), taken: make(chan uint64, 16)}
	p.set.Reset(true)
	for subj, f := range map[string]nats.MsgHandler{"kvroute.ctl." + id + ".replay": p.onReplay, "kvroute.ctl." + id + ".snapshot": p.onSnapshot} {
		sub, err := nc.Subscribe(subj, f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
		p.subs = append(p.subs, sub)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return p
}

// heldSnapshotEnv is an env whose worker w publishes through a snapshot publisher (a 10-batch
// ring) that holds its snapshot chunks back until release is closed (the subscriber waits up to a
// minute for them).
func heldSnapshotEnv(t *testing.T) (e *env, p *snapPublisher, release chan struct{}) {
	t.Helper()
	cfg := subscriber.DefaultConfig()
	cfg.SnapshotTimeout = time.Minute // the publisher holds the chunks back until the test releases them
	e = newEnv(t, cfg)
	p = newSnapPublisher(t, e.pub, "w", 10)
	release = make(chan struct{})
	p.release = release
	return e, p, release
}

// registerIntoSnapshot registers worker w after its first n batches were dropped as unregistered:
// the registration replay cannot serve them (the ring holds 10), so the stream asks for the
// snapshot; it returns once the publisher took it (at seq n) and the stream waits for its chunks.
func registerIntoSnapshot(t *testing.T, e *env, p *snapPublisher, n uint64) {
	t.Helper()
	wait.For(t, fmt.Sprintf("%d batches dropped before registration", n), func() bool {
		return e.sub.Stats().Events[subscriber.ResultDroppedUnregistered] == n
	})
	e.sub.SetWorkers([]registry.Worker{worker("w", 1)})
	if seq := <-p.taken; seq != n {
		t.Fatalf("snapshot taken at seq %d, want %d", seq, n)
	}
	e.waitState("w", subscriber.StateSnapshot)
}

// stop ends the publisher (it answers no more requests), as a publisher process that exits.
func (p *snapPublisher) stop() {
	for _, sub := range p.subs {
		_ = sub.Unsubscribe()
	}
	if err := p.nc.Flush(); err != nil {
		p.t.Fatal(err)
	}
}

// publishN publishes the next n batches of h (lost: numbered and kept, not sent).
func (p *snapPublisher) publishN(t *testing.T, h *kvhistory.History, n int, lost bool) {
	t.Helper()
	for range n {
		p.publish(kvhistory.Encode(t, h.Batch()), lost)
	}
}

// publish numbers a batch, applies it to the set, keeps it, and sends it unless lost.
func (p *snapPublisher) publish(data []byte, lost bool) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	seq := p.next
	p.next++
	b, err := p.dec.Decode(codec.VLLM, data)
	if err != nil {
		p.t.Fatal(err)
	}
	p.set.Apply(b)
	p.all = append(p.all, data)
	p.ring = append(p.ring, data)
	if len(p.ring) > p.ringMax {
		p.ring = p.ring[1:]
	}
	if !lost {
		publishOn(p.t, p.nc, p.id, seq, 0, "vllm", data)
	}
	return seq
}

func (p *snapPublisher) onReplay(m *nats.Msg) {
	var req struct {
		FromSeq uint64 `json:"from_seq"`
	}
	_ = json.Unmarshal(m.Data, &req)
	p.mu.Lock()
	defer p.mu.Unlock()
	oldest := p.next - uint64(len(p.ring))
	if req.FromSeq < oldest {
		_ = m.Respond([]byte(`{"error":"no longer buffered"}`))
		return
	}
	n := 0
	for seq := req.FromSeq; seq < p.next; seq++ {
		publishOn(p.t, p.nc, p.id, seq, 0, "vllm", p.ring[seq-oldest])
		n++
	}
	body, _ := json.Marshal(map[string]int{"replayed": n})
	_ = m.Respond(body)
}

func (p *snapPublisher) onSnapshot(m *nats.Msg) {
	p.mu.Lock()
	if p.refuse {
		p.mu.Unlock()
		_ = snapshot.RespondError(p.nc, m.Reply, errors.New("engine gone"))
		return
	}
	a := snapshot.Answer{View: p.set.Order(), Seq: p.next, Complete: p.set.Complete(), Encoding: codec.VLLM, MaxChunkBytes: 8 << 10}
	release := p.release
	p.mu.Unlock()
	p.taken <- a.Seq
	if release != nil {
		<-release
	}
	if err := snapshot.Respond(p.nc, m.Reply, &a); err != nil {
		p.t.Error(err)
	}
}

// referenceIndex applies every batch published to a fresh index, as a gap-free replica would.
func (p *snapPublisher) referenceIndex(t testing.TB) *index.Index {
	ix, err := index.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := kvhistory.NewApplier(t, ix, p.id)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.all {
		a.Apply(b)
	}
	return ix
}

// sameBlocks checks that ix holds, block for block, what a replica that saw every batch holds.
func sameBlocks(t testing.TB, ix *index.Index, p *snapPublisher) {
	t.Helper()
	want := kvhistory.Dumped(p.referenceIndex(t), p.id)
	got := kvhistory.Dumped(ix, p.id)
	if len(want) < 100 {
		t.Fatalf("reference holds %d blocks: too few to test", len(want))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("index holds %d entries, a replica that saw every batch %d", len(got), len(want))
	}
}

// TestSnapshotLoadsLateReplica: a replica that registers the worker after its publisher's replay
// ring wrapped loads the worker's snapshot and ends with the same index as a replica that saw every
// batch; nothing is cleared.
func TestSnapshotLoadsLateReplica(t *testing.T) {
	e := newEnv(t, nil)
	p := newSnapPublisher(t, e.pub, "w", 10)
	h := kvhistory.New(11)
	p.publishN(t, h, 400, false)
	// The replica learns of the worker only after its 400 batches went by (dropped as
	// unregistered): registering while they are still arriving let the later ones through live
	// and the replay serve the rest (a flake under load: replayed 329, no snapshot).
	wait.For(t, "400 batches dropped before registration", func() bool {
		return e.sub.Stats().Events[subscriber.ResultDroppedUnregistered] == 400
	})
	e.sub.SetWorkers([]registry.Worker{worker("w", 1)})
	e.waitSeq("w", 399)
	p.publishN(t, h, 40, false)
	e.waitSeq("w", 439)
	sameBlocks(t, e.ix, p)
	ev := e.events("w")
	if ev[subscriber.ResultSnapshotLoaded] != 1 || ev[subscriber.ResultReplayFailed] != 1 || ev[subscriber.ResultCleared] != 0 || ev[subscriber.ResultSnapshotFailed] != 0 {
		t.Errorf("counters %v: want one failed registration replay, one snapshot loaded, nothing cleared", ev)
	}
}

// TestSnapshotBuffersLiveBatches: batches published while the snapshot is on its way (taken at seq
// S, sent later) are buffered and applied after it from S on; an older batch sent again meanwhile
// (seq < S, already in the snapshot) is dropped.
func TestSnapshotBuffersLiveBatches(t *testing.T) {
	e, p, release := heldSnapshotEnv(t)
	h := kvhistory.New(12)
	var batches [][]byte
	for range 300 {
		b := kvhistory.Encode(t, h.Batch())
		batches = append(batches, b)
		p.publish(b, false)
	}
	registerIntoSnapshot(t, e, p, 300)
	p.publishN(t, h, 30, false)
	publishOn(t, e.pub, "w", 299, 0, "vllm", batches[299]) // in the snapshot already
	wait.For(t, "31 buffered", func() bool { return e.events("w")[subscriber.ResultBuffered] == 31 })
	if r, _ := e.rank0("w"); r.LastSeq != nil {
		t.Fatalf("seq %d applied while the snapshot is outstanding", *r.LastSeq)
	}
	close(release)
	e.waitSeq("w", 329)
	sameBlocks(t, e.ix, p)
	ev := e.events("w")
	if ev[subscriber.ResultSnapshotLoaded] != 1 || ev[subscriber.ResultApplied] != 30 || ev[subscriber.ResultCleared] != 0 {
		t.Errorf("counters %v: want the snapshot then the 30 batches after it applied, nothing cleared", ev)
	}
}

// TestGapLoadsSnapshot: a gap the publisher's ring no longer holds loads the snapshot instead of
// clearing the worker; the index ends equal to a gap-free one.
func TestGapLoadsSnapshot(t *testing.T) {
	e := newEnv(t, nil)
	p := newSnapPublisher(t, e.pub, "w", 10)
	e.sub.SetWorkers([]registry.Worker{worker("w", 1)})
	e.waitState("w", subscriber.StateLive) // nothing published: the registration replay finds nothing
	h := kvhistory.New(13)
	p.publishN(t, h, 200, false)
	e.waitSeq("w", 199)
	p.publishN(t, h, 25, true) // lost, and more than the ring holds
	p.publishN(t, h, 20, false)
	e.waitSeq("w", 244)
	sameBlocks(t, e.ix, p)
	ev := e.events("w")
	if ev[subscriber.ResultGap] != 1 || ev[subscriber.ResultSnapshotLoaded] != 1 || ev[subscriber.ResultCleared] != 0 {
		t.Errorf("counters %v: want one gap, one snapshot loaded, nothing cleared", ev)
	}
}

// TestSnapshotRefusedClears: a worker that cannot answer the snapshot is handled as before
// snapshots: cleared, counted, and resynced at the batches after the gap.
func TestSnapshotRefusedClears(t *testing.T) {
	e := newEnv(t, nil)
	p := newSnapPublisher(t, e.pub, "w", 10)
	p.refuse = true
	e.sub.SetWorkers([]registry.Worker{worker("w", 1)})
	e.waitState("w", subscriber.StateLive)
	h := kvhistory.New(14)
	p.publishN(t, h, 50, false)
	e.waitSeq("w", 49)
	p.publishN(t, h, 25, true)
	p.publishN(t, h, 1, false)
	e.waitSeq("w", 75)
	ev := e.events("w")
	if ev[subscriber.ResultSnapshotFailed] != 1 || ev[subscriber.ResultCleared] != 1 || ev[subscriber.ResultSnapshotLoaded] != 0 {
		t.Errorf("counters %v: want one snapshot failed, one clear", ev)
	}
	// Only batch 75 was applied on the cleared index: the worker holds at most its blocks.
	ix := e.ix
	if n := ix.WorkerBlocks(index.WorkerKey{ID: "w"}); n > 12 {
		t.Errorf("w holds %d blocks after the clear, want only those of batch 75", n)
	}
}

// TestResetDuringSnapshot: a reset that arrives while a snapshot is on its way ends it (its fetch
// stops; chunks sent later change nothing): the stream restarts at next_seq and holds only what
// follows.
func TestResetDuringSnapshot(t *testing.T) {
	e, p, release := heldSnapshotEnv(t)
	h := kvhistory.New(15)
	p.publishN(t, h, 100, false)
	registerIntoSnapshot(t, e, p, 100)
	if err := e.pub.Publish("kvroute.ctl.w.reset", []byte(`{"dp_rank":0,"next_seq":0,"reason":"engine restarted"}`)); err != nil {
		t.Fatal(err)
	}
	fresh := kvhistory.New(16) // the restarted engine's history, numbered from 0
	var batches [][]byte
	for i := range 5 {
		b := kvhistory.Encode(t, fresh.Batch())
		batches = append(batches, b)
		publishOn(t, e.pub, "w", uint64(i), 0, "vllm", b)
	}
	e.waitSeq("w", 4)
	close(release) // the old snapshot's chunks go to an inbox nobody reads any more
	ref, err := index.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := kvhistory.NewApplier(t, ref, "w")
	for _, b := range batches {
		a.Apply(b)
	}
	if got, want := kvhistory.Dumped(e.ix, "w"), kvhistory.Dumped(ref, "w"); len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("index holds %d entries, the restarted engine's history %d", len(got), len(want))
	}
	time.Sleep(200 * time.Millisecond) // let the released chunks arrive, if anything still read them
	ev := e.events("w")
	if ev[subscriber.ResultSnapshotLoaded] != 0 || ev[subscriber.ResultReset] != 1 || ev[subscriber.ResultApplied] != 5 {
		t.Errorf("counters %v: want the reset, the 5 new batches, no snapshot loaded", ev)
	}
	if got := kvhistory.Dumped(e.ix, "w"); !slices.Equal(got, kvhistory.Dumped(ref, "w")) {
		t.Errorf("late chunks changed the index: %d entries", len(got))
	}
}

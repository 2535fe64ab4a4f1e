package subscriber_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/nats-io/nats.go"

	"github.com/kvroute/kvroute/internal/testkit/indextest"
	"github.com/kvroute/kvroute/internal/testkit/natstest"
	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/normalize"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/subscriber"
)

// env is one embedded NATS server on loopback, a subscriber over its own connection and index, and
// a second connection for publishers and fake bridges.
type env struct {
	t   testing.TB
	nc  *nats.Conn
	pub *nats.Conn
	ix  *index.Index
	sub *subscriber.Subscriber

	// counted sums every OnCount call by worker and result.
	mu      sync.Mutex
	counted map[string]map[string]uint64
}

func newEnv(t testing.TB, cfg *subscriber.Config) *env {
	t.Helper()
	srv := natstest.Start(t)
	e := &env{t: t, counted: map[string]map[string]uint64{}}
	var err error
	if e.nc, err = nats.Connect(srv.ClientURL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.nc.Close)
	if e.pub, err = nats.Connect(srv.ClientURL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.pub.Close)
	if e.ix, err = index.New(nil); err != nil {
		t.Fatal(err)
	}
	c := subscriber.DefaultConfig()
	if cfg != nil {
		c = cfg
	}
	c.OnCount = func(worker, result string, n uint64) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.counted[worker] == nil {
			e.counted[worker] = map[string]uint64{}
		}
		e.counted[worker][result] += n
	}
	if e.sub, err = subscriber.New(c, e.nc, e.ix); err != nil {
		t.Fatal(err)
	}
	if err := e.sub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.sub.Stop)
	return e
}

// worker is a registry record of a vLLM worker with block size 16.
func worker(id string, dp int) registry.Worker {
	return registry.Worker{WorkerID: id, Endpoint: "127.0.0.1:1", Model: "m", Engine: kv.EngineVLLM, BlockSize: 16, DPSize: dp}
}

// publish sends one batch on kvroute.events.<id>.
func (e *env) publish(id string, seq uint64, rank int, enc string, data []byte) {
	e.t.Helper()
	publishOn(e.t, e.pub, id, seq, rank, enc, data)
}

func publishOn(t testing.TB, nc *nats.Conn, id string, seq uint64, rank int, enc string, data []byte) {
	t.Helper()
	m := &nats.Msg{Subject: "kvroute.events." + id, Data: data, Header: nats.Header{
		"Kvroute-Seq":      []string{strconv.FormatUint(seq, 10)},
		"Kvroute-Encoding": []string{enc},
		"Kvroute-Dp-Rank":  []string{strconv.Itoa(rank)},
	}}
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
}

// rank0 returns worker id's rank-0 stats (zero value when not registered).
func (e *env) rank0(id string) (subscriber.RankStats, subscriber.WorkerStats) {
	ws, ok := e.sub.Worker(id)
	if !ok || len(ws.Ranks) == 0 {
		return subscriber.RankStats{}, ws
	}
	return ws.Ranks[0], ws
}

// waitSeq waits until worker id's rank 0 applied seq and has no replay outstanding.
func (e *env) waitSeq(id string, seq uint64) {
	e.t.Helper()
	wait.For(e.t, id+" at seq "+strconv.FormatUint(seq, 10), func() bool {
		r, _ := e.rank0(id)
		return r.LastSeq != nil && *r.LastSeq == seq && r.State == subscriber.StateLive
	})
}

// waitState waits until worker id's rank 0 is in state.
func (e *env) waitState(id, state string) {
	e.t.Helper()
	wait.For(e.t, id+" "+state, func() bool { r, _ := e.rank0(id); return r.State == state })
}

// waitRegistrationReplayFailed waits until worker id's registration replay failed once (no bridge
// answered) and its rank 0 is unsynced.
func (e *env) waitRegistrationReplayFailed(id string) {
	e.t.Helper()
	wait.For(e.t, "registration replay failure", func() bool {
		r, _ := e.rank0(id)
		return r.State == subscriber.StateUnsynced && e.events(id)[subscriber.ResultReplayFailed] == 1
	})
}

func (e *env) events(id string) map[string]uint64 {
	_, ws := e.rank0(id)
	return ws.Events
}

// fakeBridge answers replay requests for one worker from the batches it "forwarded" (DESIGN.md §2.2),
// publishing them again with their seqs before answering, like kvroute-bridge.
type fakeBridge struct {
	t  testing.TB
	nc *nats.Conn
	id string

	// mu serializes forwards and replays (one publisher, in order) and guards the fields below.
	mu       sync.Mutex
	held     map[uint64][]byte
	mode     string // "answer", "answer-first", "liar", "error" or "mute"
	requests []uint64
	sub      *nats.Subscription
	// limit, when not 0, ends every replay before that seq (the bridge's newest at the time).
	limit uint64
}

func newBridge(t testing.TB, nc *nats.Conn, id string) *fakeBridge {
	return &fakeBridge{t: t, nc: nc, id: id, held: map[uint64][]byte{}, mode: "answer"}
}

// listen subscribes to kvroute.ctl.<id>.replay.
func (b *fakeBridge) listen() {
	b.t.Helper()
	sub, err := b.nc.Subscribe("kvroute.ctl."+b.id+".replay", b.onReplay)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := b.nc.Flush(); err != nil {
		b.t.Fatal(err)
	}
	b.sub = sub
	b.t.Cleanup(func() { _ = sub.Unsubscribe() })
}

func (b *fakeBridge) setMode(m string) {
	b.mu.Lock()
	b.mode = m
	b.mu.Unlock()
}

func (b *fakeBridge) requestLog() []uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.requests)
}

// forwardChain forwards a chain of n batches (longChain) as seqs 0 to n-1, losing those lost
// names, and returns them.
func (b *fakeBridge) forwardChain(t testing.TB, n int, lost func(i int) bool) [][]byte {
	var g chainGen
	batches := longChain(t, &g, n)
	for i, data := range batches {
		b.forward(uint64(i), data, lost(i))
	}
	return batches
}

// forward keeps a batch for replay and publishes it unless lost.
func (b *fakeBridge) forward(seq uint64, data []byte, lost bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held[seq] = data
	if !lost {
		publishOn(b.t, b.nc, b.id, seq, 0, "vllm", data)
	}
}

func (b *fakeBridge) onReplay(m *nats.Msg) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var req struct {
		DPRank  int    `json:"dp_rank"`
		FromSeq uint64 `json:"from_seq"`
	}
	if err := json.Unmarshal(m.Data, &req); err != nil {
		b.t.Errorf("bad replay request %q: %v", m.Data, err)
		return
	}
	b.requests = append(b.requests, req.FromSeq)
	switch b.mode {
	case "mute":
		return
	case "error":
		_ = m.Respond([]byte(`{"error":"no longer buffered"}`))
		return
	}
	var run []uint64
	for seq := req.FromSeq; b.held[seq] != nil && (b.limit == 0 || seq < b.limit); seq++ {
		run = append(run, seq)
	}
	n := len(run)
	switch b.mode {
	case "liar": // claims the replay, publishes nothing
		_ = m.Respond([]byte(`{"replayed":` + strconv.Itoa(n) + `}`))
		return
	case "answer-first": // the answer overtakes the replayed batches
		_ = m.Respond([]byte(`{"replayed":` + strconv.Itoa(n) + `}`))
		_ = b.nc.Flush()
		for _, seq := range run {
			publishOn(b.t, b.nc, b.id, seq, 0, "vllm", b.held[seq])
		}
		return
	}
	for _, seq := range run {
		publishOn(b.t, b.nc, b.id, seq, 0, "vllm", b.held[seq])
	}
	if n == 0 && len(b.held) > 0 && b.held[req.FromSeq] == nil {
		newest := uint64(0)
		for s := range b.held {
			newest = max(newest, s)
		}
		if req.FromSeq <= newest {
			_ = m.Respond([]byte(`{"error":"no longer buffered"}`))
			return
		}
	}
	_ = m.Respond([]byte(`{"replayed":` + strconv.Itoa(n) + `}`))
}

// chainGen builds vLLM BlockStored batches of distinct, deterministic blocks.
type chainGen struct {
	next uint64        // next engine hash
	last kv.EngineHash // engine hash of the newest block (parent of a continued chain)
}

// stored returns a BlockStored batch of n blocks that starts a new chain (cont false) or continues
// the newest block (cont true), in the given encoding form.
func (g *chainGen) stored(t testing.TB, n int, cont bool, form codec.Form) []byte {
	t.Helper()
	ev := codec.Event{Type: codec.BlockStored, BlockSize: 16, Medium: "GPU", HasMedium: true}
	if cont {
		ev.Parent, ev.HasParent = g.last, true
	}
	for i := 0; i < n; i++ {
		g.next++
		h := kv.EngineHash(0x9e3779b97f4a7c15 * g.next) // spread over the u64 range, some ≥ 2^63
		ev.BlockHashes = append(ev.BlockHashes, h)
		for j := 0; j < 16; j++ {
			ev.TokenIDs = append(ev.TokenIDs, uint32((g.next*31+uint64(j)*7)%150000))
		}
		g.last = h
	}
	return encode(t, form, ev)
}

func encode(t testing.TB, form codec.Form, evs ...codec.Event) []byte {
	t.Helper()
	b, err := codec.EncodeVLLM(&codec.Batch{TS: 1764409200.5, Events: evs}, form, form)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reference applies batches in order to a fresh index (the gap-free state) and returns it with the
// root paths (LocalBlockHash prefixes) of every block stored, as lookup queries.
func reference(t testing.TB, id string, batches [][]byte) (*index.Index, [][]kv.BlockHash) {
	t.Helper()
	ix, err := index.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	norm, err := normalize.New(normalize.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	type node struct {
		parent    kv.EngineHash
		hasParent bool
		local     kv.BlockHash
	}
	nodes := map[kv.EngineHash]node{}
	var queries [][]kv.BlockHash
	key := index.WorkerKey{ID: id}
	ctx := context.Background()
	for _, data := range batches {
		b, err := codec.Decode(codec.VLLM, data)
		if err != nil {
			continue // undecodable batches change nothing
		}
		for _, op := range norm.Apply(b).Ops {
			switch op.Type {
			case codec.BlockStored:
				blocks := make([]index.StoredBlock, len(op.Stored))
				for i, s := range op.Stored {
					blocks[i] = index.StoredBlock{EngineHash: s.EngineHash, Parent: s.ParentEngineHash, HasParent: s.HasParent, LocalHash: s.LocalHash}
					nodes[s.EngineHash] = node{s.ParentEngineHash, s.HasParent, s.LocalHash}
				}
				_ = ix.Store(ctx, key, blocks)
				for _, s := range op.Stored {
					var path []kv.BlockHash
					h := s.EngineHash
					for steps := 0; steps <= len(nodes); steps++ {
						n, ok := nodes[h]
						if !ok {
							break
						}
						path = append(path, n.local)
						if !n.hasParent {
							break
						}
						h = n.parent
					}
					slices.Reverse(path)
					queries = append(queries, path)
				}
			case codec.BlockRemoved:
				ix.Remove(ctx, key, op.Removed)
			case codec.AllBlocksCleared:
				ix.Clear(ctx, key)
			}
		}
	}
	return ix, queries
}

// overlap is worker id's overlap for a query (0 when it holds nothing of it).
func overlap(ix *index.Index, id string, q []kv.BlockHash) int {
	for _, o := range ix.Match(context.Background(), q) {
		if o.Worker.ID == id && o.Worker.DPRank == 0 {
			return o.Blocks
		}
	}
	return 0
}

// sameAsReference checks that worker id's entries in ix equal those of an index built directly
// from batches (reference).
func sameAsReference(t testing.TB, ix *index.Index, id string, batches [][]byte) {
	t.Helper()
	ref, queries := reference(t, id, batches)
	sameIndex(t, ix, id, ref, id, queries)
}

// sameIndex checks that worker got in ix what refID got in ref: the same blocks
// (indextest.SameWorker), the same block count and the same overlap for every query.
func sameIndex(t testing.TB, ix *index.Index, id string, ref *index.Index, refID string, queries [][]kv.BlockHash) {
	t.Helper()
	indextest.SameWorker(t, ix, index.WorkerKey{ID: id}, ref, index.WorkerKey{ID: refID})
	got, want := ix.WorkerBlocks(index.WorkerKey{ID: id}), ref.WorkerBlocks(index.WorkerKey{ID: refID})
	if got != want {
		t.Errorf("worker %s holds %d blocks, reference %d", id, got, want)
	}
	for i, q := range queries {
		if g, w := overlap(ix, id, q), overlap(ref, refID, q); g != w {
			t.Errorf("query %d (%d blocks): worker %s overlap %d, reference %d", i, len(q), id, g, w)
		}
	}
}

// engineHashes lists the engine block hashes of a hand-written event.
func engineHashes(hs ...kv.EngineHash) []kv.EngineHash { return hs }

package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvroute/kvroute/kv"

	"github.com/nats-io/nats.go"

	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/bridge"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/normalize"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// testBlocks is the block rule of the golden test model (Qwen3-VL pad ids).
var testBlocks = blocks.Config{BlockSize: 16, ImagePad: 151655, VideoPad: 151656}

// applier is what the router does with one batch: decode, normalize (per worker rank, in order), and
// apply to the index. The test builds one index from the NATS subject and one from the events
// directly, with the same code.
type applier struct {
	t     testing.TB
	enc   codec.Encoding // the workers' encoding
	idx   *index.Index
	norms map[index.WorkerKey]*normalize.Normalizer
	// paths maps every stored engine hash to its block (for the root paths the indexes are compared on).
	blocks map[kv.EngineHash]normalize.Stored
	// decodeErrors counts batches that did not decode.
	decodeErrors int
}

func newApplier(t testing.TB) *applier {
	idx, err := index.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{t: t, enc: codec.VLLM, idx: idx, norms: map[index.WorkerKey]*normalize.Normalizer{}, blocks: map[kv.EngineHash]normalize.Stored{}}
}

func (a *applier) norm(k index.WorkerKey) *normalize.Normalizer {
	n := a.norms[k]
	if n == nil {
		var err error
		if n, err = normalize.New(normalize.Config{Blocks: testBlocks, Encoding: a.enc}); err != nil {
			a.t.Fatal(err)
		}
		a.norms[k] = n
	}
	return n
}

func (a *applier) apply(k index.WorkerKey, payload []byte) {
	bt, err := codec.Decode(a.enc, payload)
	if err != nil {
		a.decodeErrors++
		return
	}
	res := a.norm(k).Apply(bt)
	ctx := context.Background()
	for _, op := range res.Ops {
		switch op.Type {
		case codec.BlockStored:
			sb := make([]index.StoredBlock, len(op.Stored))
			for i, s := range op.Stored {
				sb[i] = index.StoredBlock{EngineHash: s.EngineHash, Parent: s.ParentEngineHash, HasParent: s.HasParent, LocalHash: s.LocalHash}
				a.blocks[s.EngineHash] = s
			}
			_ = a.idx.Store(ctx, k, sb) // an unknown parent leaves the same state on both sides
		case codec.BlockRemoved:
			a.idx.Remove(ctx, k, op.Removed)
		case codec.AllBlocksCleared:
			a.idx.Clear(ctx, k)
		}
	}
}

// clear is what a router does on a reset: the worker rank holds nothing and its chain state is new.
func (a *applier) clear(k index.WorkerKey) {
	a.idx.Clear(context.Background(), k)
	delete(a.norms, k)
}

// digest describes an index for comparison: sizes per worker, and the overlap every worker has with
// the root path of every block either side ever stored.
func digest(idx *index.Index, known ...map[kv.EngineHash]normalize.Stored) string {
	st := idx.Stats()
	ws := slices.Clone(st.Workers)
	slices.SortFunc(ws, func(a, b index.WorkerStats) int { return strings.Compare(a.Worker.String(), b.Worker.String()) })
	var sb strings.Builder
	fmt.Fprintf(&sb, "blocks=%d entries=%d\n", st.Blocks, st.Entries)
	for _, w := range ws {
		fmt.Fprintf(&sb, "worker %s blocks=%d entries=%d\n", w.Worker, w.Blocks, w.Entries)
	}
	all := map[kv.EngineHash]normalize.Stored{}
	for _, m := range known {
		for h, s := range m {
			all[h] = s
		}
	}
	hashes := make([]kv.EngineHash, 0, len(all))
	for h := range all {
		hashes = append(hashes, h)
	}
	slices.Sort(hashes)
	for _, h := range hashes {
		var path []kv.BlockHash
		for cur, ok := all[h], true; ok && len(path) <= len(all); {
			path = append(path, cur.LocalHash)
			if !cur.HasParent {
				break
			}
			cur, ok = all[cur.ParentEngineHash]
		}
		slices.Reverse(path)
		fmt.Fprintf(&sb, "%d:", h)
		for _, o := range idx.Match(context.Background(), path) {
			fmt.Fprintf(&sb, " %s=%d", o.Worker, o.Blocks)
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

// consumer is a minimal router: it applies kvroute.events.<id> in sequence order per rank, asks the
// bridge for a replay when it sees a gap, and clears a rank on kvroute.ctl.<id>.reset. Events and
// resets share one Go channel, so they are handled in the order the bridge published them.
type consumer struct {
	t        testing.TB
	nc       *nats.Conn
	workerID string
	ap       *applier
	ch       chan *nats.Msg
	subs     []*nats.Subscription
	quit     chan struct{}
	done     chan struct{}
	wg       sync.WaitGroup // replay requests in flight

	// mu protects the fields below.
	mu         sync.Mutex
	next       map[index.WorkerKey]uint64
	pending    map[index.WorkerKey]map[uint64][]byte
	inflight   map[index.WorkerKey]bool
	drop       map[uint64]bool // rank-0 seqs to drop once (a loss between NATS and the router)
	encodings  map[string]int
	replays    int
	replies    int // replay requests answered (or failed)
	replayErrs []string
	resets     []string
	badHeaders int
}

func newConsumer(t testing.TB, nc *nats.Conn, workerID string, drop ...uint64) *consumer {
	c := &consumer{
		t: t, nc: nc, workerID: workerID, ap: newApplier(t), ch: make(chan *nats.Msg, 4096),
		quit: make(chan struct{}), done: make(chan struct{}),
		next: map[index.WorkerKey]uint64{}, pending: map[index.WorkerKey]map[uint64][]byte{},
		inflight: map[index.WorkerKey]bool{}, drop: map[uint64]bool{}, encodings: map[string]int{},
	}
	for _, s := range drop {
		c.drop[s] = true
	}
	for _, subj := range []string{wire.EventsSubject(workerID), wire.ResetSubject(workerID)} {
		s, err := nc.ChanSubscribe(subj, c.ch)
		if err != nil {
			t.Fatal(err)
		}
		c.subs = append(c.subs, s)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	go c.loop()
	return c
}

func (c *consumer) close() {
	for _, s := range c.subs {
		_ = s.Unsubscribe()
	}
	close(c.quit)
	<-c.done
	c.wg.Wait()
}

func (c *consumer) loop() {
	defer close(c.done)
	for {
		select {
		case <-c.quit:
			return
		case m := <-c.ch:
			c.mu.Lock()
			if strings.HasSuffix(m.Subject, ".reset") {
				c.onReset(m)
			} else {
				c.onEvents(m)
			}
			c.mu.Unlock()
		}
	}
}

// onEvents handles one batch. Lock should be held on entry.
func (c *consumer) onEvents(m *nats.Msg) {
	seq, err1 := strconv.ParseUint(m.Header.Get("Kvroute-Seq"), 10, 64)
	dp, err2 := strconv.Atoi(m.Header.Get("Kvroute-Dp-Rank"))
	if err1 != nil || err2 != nil {
		c.badHeaders++
		return
	}
	c.encodings[m.Header.Get("Kvroute-Encoding")]++
	k := index.WorkerKey{ID: c.workerID, DPRank: dp}
	if dp == 0 && c.drop[seq] {
		delete(c.drop, seq)
		return
	}
	if seq < c.next[k] {
		return // duplicate
	}
	if c.pending[k] == nil {
		c.pending[k] = map[uint64][]byte{}
	}
	c.pending[k][seq] = m.Data
	c.drainLocked(k)
	if len(c.pending[k]) > 0 && !c.inflight[k] {
		c.inflight[k] = true
		c.replays++
		from := c.next[k]
		c.wg.Add(1)
		go c.requestReplay(k, from)
	}
}

// drainLocked applies the pending batches that are next in sequence. Lock should be held on entry.
func (c *consumer) drainLocked(k index.WorkerKey) {
	for {
		p, ok := c.pending[k][c.next[k]]
		if !ok {
			return
		}
		delete(c.pending[k], c.next[k])
		c.ap.apply(k, p)
		c.next[k]++
	}
}

func (c *consumer) requestReplay(k index.WorkerKey, from uint64) {
	defer c.wg.Done()
	body, _ := json.Marshal(bridge.ReplayRequest{DPRank: k.DPRank, FromSeq: from})
	resp, err := c.nc.Request(wire.ReplaySubject(c.workerID), body, 10*time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight[k] = false
	c.replies++
	if err != nil {
		c.replayErrs = append(c.replayErrs, err.Error())
		return
	}
	var r bridge.ReplayReply
	if err := json.Unmarshal(resp.Data, &r); err != nil || r.Error != "" || r.Replayed == nil {
		c.replayErrs = append(c.replayErrs, string(resp.Data))
	}
}

// onReset handles a reset. Lock should be held on entry.
func (c *consumer) onReset(m *nats.Msg) {
	var r struct {
		DPRank  int    `json:"dp_rank"`
		NextSeq uint64 `json:"next_seq"`
		Reason  string `json:"reason"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		c.badHeaders++
		return
	}
	c.resets = append(c.resets, r.Reason)
	k := index.WorkerKey{ID: c.workerID, DPRank: r.DPRank}
	c.ap.clear(k)
	c.next[k] = r.NextSeq
	for s := range c.pending[k] {
		if s < r.NextSeq {
			delete(c.pending[k], s)
		}
	}
	c.drainLocked(k)
}

// waitNext waits until rank dp applied every batch before seq want and nothing is pending.
func (c *consumer) waitNext(dp int, want uint64) {
	c.t.Helper()
	k := index.WorkerKey{ID: c.workerID, DPRank: dp}
	wait.For(c.t, fmt.Sprintf("rank %d caught up to seq %d", dp, want), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.next[k] == want && len(c.pending[k]) == 0
	})
}

// waitReplies waits until every replay request the consumer sent was answered.
func (c *consumer) waitReplies() {
	c.t.Helper()
	wait.For(c.t, "replay replies", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.replies == c.replays
	})
}

package subscriber

import (
	"context"
	"sort"
	"time"

	"github.com/kvroute/kvroute/kv"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/normalize"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/snapshot"
)

// maxDPSize bounds the ranks tracked per worker (worker records come from the network).
const maxDPSize = 1024

type itemKind uint8

const (
	itemEvent itemKind = iota + 1
	itemReset
	itemWorkers
	itemReplayAnswer
	itemReplayDeadline
	itemSnapshotChunk
	itemCatchUp
)

// item is one unit of work for a shard.
type item struct {
	kind    itemKind
	id      string            // worker id (all but itemWorkers)
	msg     *nats.Msg         // itemEvent, itemReset
	workers []registry.Worker // itemWorkers
	// itemReplayAnswer, itemReplayDeadline, itemSnapshotChunk, itemCatchUp
	rank     int
	gen      uint64
	replayed int
	err      error
	chunk    snapshot.Chunk // itemSnapshotChunk (err set instead when the snapshot failed)
}

// shard owns the stream state of the workers whose id hashes to it. Every field is owned by the
// shard's goroutine (run); nothing is shared except through the Subscriber's atomics and s.mu.
type shard struct {
	s       *Subscriber
	in      chan item
	dec     *codec.Decoder
	workers map[string]*wstate
	gen     uint64 // last replay generation handed out; never reused, so late answers cannot match

	// scratch
	one    codec.Batch
	blocks []index.StoredBlock
	keys   []kv.MediaKey
}

// wstate is one registered worker.
type wstate struct {
	rec   registry.Worker
	view  *workerView
	ranks []*stream
}

// stream is the sequence state of one worker rank (see the package doc).
type stream struct {
	w    *wstate
	key  index.WorkerKey
	view *rankView
	// norm is the stream's normalizer for encoding enc (nil until the first batch and after a clear).
	norm *normalize.Normalizer
	enc  codec.Encoding
	pads uint64 // the Subscriber.pads norm was built with

	// synced: next is the seq expected next; otherwise the next batch sets it.
	synced bool
	next   uint64
	// applied: a batch was applied since the stream was last cleared.
	applied bool
	// complete: the index holds the effect of every batch since the worker's cache was empty (the
	// stream applied seq 0 or an AllBlocksCleared since its last clear).
	complete bool
	// noRebuild: a rebuild was already tried since the stream last restarted (or the bridge
	// announced that it lost events): an unknown parent does not trigger another one.
	noRebuild bool

	// replay state: a request from seq from with generation gen is outstanding; once answered,
	// target is from + the replayed count. rebuilding: the request is a rebuild from seq 0 not
	// answered yet; the stream goes on live meanwhile and keeps the batches it applies or receives
	// again (seq < next) in buf, to apply them again in order after the clear.
	replaying, answered, rebuilding bool
	gen, from, target               uint64
	// snapshotting: the outstanding request (replaying is set too) is a snapshot; every batch is
	// buffered until its last chunk. snapFloor is the newest seq buffered when it was requested
	// (such batches are in the snapshot, so they may be dropped to make room); snapBlocks counts the
	// blocks of the chunks applied so far.
	snapshotting bool
	snapCancel   context.CancelFunc // ends the fetch of the outstanding snapshot
	snapFloor    uint64
	snapBlocks   int
	// restarting: the outstanding snapshot resyncs a sequence restart (seq_restart counted).
	restarting bool

	// catch-up back-off (catchup.go): no catch-up starts before catchUpAt; backoff is the wait
	// set after the last one started (at lastCatchUp). deferGen, when not 0, is the generation of
	// the catch-up item posted for catchUpAt; deferRestart: the deferred catch-up is a restart.
	catchUpAt, lastCatchUp time.Time
	backoff                time.Duration
	deferGen               uint64
	deferRestart           bool

	// buf holds batches after a gap (and, while rebuilding, already applied ones), by seq;
	// bufBytes is their payload total.
	buf      map[uint64]pending
	bufBytes int64
}

// pending is one batch not applied yet.
type pending struct {
	seq  uint64
	enc  codec.Encoding
	data []byte
	// beforeSnapshot: buffered before the stream's snapshot was requested. The publisher takes the
	// snapshot after it published such a batch, so unless it is below the snapshot's seq it is not
	// the publisher's: it is dropped after the snapshot, never the cause of another catch-up.
	beforeSnapshot bool
}

func newShard(s *Subscriber) *shard {
	return &shard{s: s, in: make(chan item, s.cfg.QueueLength), dec: codec.NewDecoder(), workers: map[string]*wstate{}}
}

// post queues an item; false when ctx ended first.
func (sh *shard) post(ctx context.Context, it item) bool {
	select {
	case sh.in <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

func (sh *shard) run() {
	ctx := sh.s.ctx
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-sh.in:
			sh.handle(it)
		}
	}
}

// handle processes one item; a panic is logged and the shard goes on with the next item.
func (sh *shard) handle(it item) {
	defer func() {
		if r := recover(); r != nil {
			sh.s.log.Error("kv event subscriber: handling message panicked", zap.String("worker_id", it.id),
				zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	switch it.kind {
	case itemEvent:
		sh.onEvent(it)
	case itemReset:
		sh.onReset(it)
	case itemWorkers:
		sh.onWorkers(it.workers)
	case itemReplayAnswer:
		sh.onAnswer(it)
	case itemReplayDeadline:
		sh.onDeadline(it)
	case itemSnapshotChunk:
		sh.onSnapshotChunk(it)
	case itemCatchUp:
		sh.onCatchUpDue(it)
	}
}

// onWorkers applies a new worker set: this shard's workers that left (or changed shape) are purged,
// new ones are added with registration replays.
func (sh *shard) onWorkers(list []registry.Worker) {
	mine := map[string]registry.Worker{}
	for _, w := range list {
		if registry.ValidWorkerID(w.WorkerID) && sh.s.shardFor(w.WorkerID) == sh {
			mine[w.WorkerID] = w
		}
	}
	for id, w := range sh.workers {
		nw, ok := mine[id]
		if ok && sameShape(w.rec, nw) {
			w.rec = nw
			continue
		}
		sh.removeWorker(w)
	}
	ids := make([]string, 0, len(mine))
	for id := range mine {
		if sh.workers[id] == nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		sh.addWorker(mine[id])
	}
}

// sameShape reports whether two records of one worker index alike (same engine, block size and
// data-parallel size), so the worker keeps its state.
func sameShape(a, b registry.Worker) bool {
	return a.Engine == b.Engine && a.BlockSize == b.BlockSize && dpSize(a) == dpSize(b)
}

func dpSize(w registry.Worker) int { return min(max(w.DPSize, 1), maxDPSize) }

func (sh *shard) addWorker(rec registry.Worker) {
	n := dpSize(rec)
	if rec.DPSize > maxDPSize {
		sh.s.log.Warn("kv event subscriber: dp_size capped", zap.String("worker_id", rec.WorkerID),
			zap.Int("dp_size", rec.DPSize), zap.Int("max", maxDPSize))
	}
	w := &wstate{rec: rec, view: &workerView{id: rec.WorkerID}}
	for r := 0; r < n; r++ {
		st := &stream{w: w, key: index.WorkerKey{ID: rec.WorkerID, DPRank: r}, buf: map[uint64]pending{}}
		st.view = &rankView{key: st.key}
		w.ranks = append(w.ranks, st)
		w.view.ranks = append(w.view.ranks, st.view)
	}
	sh.workers[rec.WorkerID] = w
	sh.s.mu.Lock()
	sh.s.views[rec.WorkerID] = w.view
	sh.s.mu.Unlock()
	for _, st := range w.ranks {
		// registration: rebuild from the worker's whole history (see the package doc)
		st.synced, st.next = true, 0
		sh.startReplay(st, 0)
	}
}

func (sh *shard) removeWorker(w *wstate) {
	ctx := sh.s.ctx
	for _, st := range w.ranks {
		st.replaying = false
		st.endSnapshot()
		sh.s.ix.RemoveWorker(ctx, st.key)
	}
	delete(sh.workers, w.rec.WorkerID)
	sh.s.mu.Lock()
	if sh.s.views[w.rec.WorkerID] == w.view {
		delete(sh.s.views, w.rec.WorkerID)
	}
	sh.s.mu.Unlock()
	sh.s.log.Debug("kv event subscriber: worker removed, blocks purged", zap.String("worker_id", w.rec.WorkerID))
}

// stream returns the worker's stream for an answer or deadline item, nil when it is gone or the
// item is stale.
func (sh *shard) replayStream(it item) *stream {
	w := sh.workers[it.id]
	if w == nil || it.rank < 0 || it.rank >= len(w.ranks) {
		return nil
	}
	st := w.ranks[it.rank]
	if !st.replaying || st.gen != it.gen {
		return nil
	}
	return st
}

// endSnapshot marks the stream's snapshot over and stops its fetch (a stale one would otherwise go
// on receiving chunks nobody applies).
func (st *stream) endSnapshot() {
	st.snapshotting, st.restarting = false, false
	if st.snapCancel != nil {
		st.snapCancel()
		st.snapCancel = nil
	}
}

func (st *stream) setState() {
	switch {
	case st.snapshotting:
		st.view.state.Store(stSnapshot)
	case st.replaying:
		st.view.state.Store(stReplaying)
	case st.synced:
		st.view.state.Store(stLive)
	default:
		st.view.state.Store(stUnsynced)
	}
}

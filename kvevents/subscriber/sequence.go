package subscriber

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// maxControlBytes bounds a reset body or a replay answer.
const maxControlBytes = 4 << 10

var errHeader = errors.New("invalid kv event headers")

// parseHeaders reads seq, encoding and dp rank; the encoding defaults to the worker's engine.
func parseHeaders(m *nats.Msg, engine string) (pending, int, error) {
	h := m.Header
	seq, err := strconv.ParseUint(h.Get(wire.HeaderSeq), 10, 64)
	if err != nil {
		return pending{}, 0, fmt.Errorf("parsing %s %q: %w", wire.HeaderSeq, h.Get(wire.HeaderSeq), errHeader)
	}
	enc := codec.Encoding(engine)
	if v := h.Get(wire.HeaderEncoding); v != "" {
		if enc, err = codec.ParseEncoding(v); err != nil {
			return pending{}, 0, fmt.Errorf("parsing %s: %w: %w", wire.HeaderEncoding, errHeader, err)
		}
	}
	rank := 0
	if v := h.Get(wire.HeaderDPRank); v != "" {
		if rank, err = strconv.Atoi(v); err != nil || rank < 0 {
			return pending{}, 0, fmt.Errorf("parsing %s %q: %w", wire.HeaderDPRank, v, errHeader)
		}
	}
	return pending{seq: seq, enc: enc, data: m.Data}, rank, nil
}

// onEvent routes one batch to its stream.
func (sh *shard) onEvent(it item) {
	s := sh.s
	w := sh.workers[it.id]
	if w == nil {
		if n := s.count(nil, it.id, rDroppedUnregistered, 1); logWorthy(n) {
			s.log.Info("kv event subscriber: dropping events of an unregistered worker",
				zap.String("worker_id", it.id), zap.Uint64("dropped_total", n))
		}
		return
	}
	p, rank, err := parseHeaders(it.msg, w.rec.Engine)
	if err == nil && rank >= len(w.ranks) {
		err = fmt.Errorf("checking %s %d: dp_size is %d: %w", wire.HeaderDPRank, rank, len(w.ranks), errHeader)
	}
	if err != nil {
		if n := s.count(w.view, it.id, rBadHeader, 1); logWorthy(n) {
			s.log.Warn("kv event subscriber: dropping batch", zap.String("worker_id", it.id), zap.Error(err), zap.Uint64("count", n))
		}
		return
	}
	sh.offer(w.ranks[rank], p)
}

// offer takes one batch of the stream in sequence order (see the package doc).
func (sh *shard) offer(st *stream, p pending) {
	s := sh.s
	for {
		if st.snapshotting {
			sh.holdForSnapshot(st, p)
			return
		}
		if !st.synced {
			if !sh.decodes(st, p) {
				return // garbage does not set the stream's position
			}
			st.synced, st.next = true, p.seq
			st.setState()
		}
		if p.seq == st.next {
			sh.runFrom(st, p)
			return
		}
		behind := !st.rebuilding && sh.farBehind(st, p.seq)
		_, dup := st.buf[p.seq]
		if dup || (p.seq < st.next && !st.rebuilding && !behind) {
			s.count(st.w.view, st.key.ID, rDuplicate, 1)
			return
		}
		if !sh.decodes(st, p) {
			return // garbage opens no gap, restarts nothing and takes no buffer slot
		}
		if behind {
			// Not a replay of this stream: the publisher restarted its numbering, or next came
			// from a jump. Its snapshot says where its stream is.
			sh.catchUp(st, true)
			if st.snapshotting {
				continue // buffered like every batch during the snapshot (a failed one resyncs at it)
			}
			s.count(st.w.view, st.key.ID, rOutOfStream, 1) // the deferred snapshot comes after it
			return
		}
		if sh.fits(st, p) {
			sh.hold(st, p)
			if p.seq < st.next {
				return // applied already; kept in case the rebuild needs it
			}
			s.count(st.w.view, st.key.ID, rBuffered, 1)
			if !st.replaying {
				sh.catchUp(st, false)
			}
			return
		}
		if p.seq < st.next { // a rebuild without this batch is found incomplete at its deadline
			s.count(st.w.view, st.key.ID, rDuplicate, 1)
			return
		}
		if st.rebuilding && sh.dropStale(st) > 0 {
			continue // the rebuild's copies go first; the rebuild then ends at its deadline
		}
		s.count(st.w.view, st.key.ID, rBufferOverflow, 1)
		if !st.replaying {
			// No request outstanding: the stream's catch-up waits for its back-off (or starts
			// now). Its replay from next, or its snapshot, brings this batch again.
			sh.catchUp(st, false)
			return
		}
		sh.giveUp(st, "replay buffer full") // frees at least one slot, or unsyncs the stream
	}
}

func (sh *shard) fits(st *stream, p pending) bool {
	return len(st.buf) < sh.s.cfg.MaxBuffered && st.bufBytes+int64(len(p.data)) <= sh.s.cfg.MaxBufferedBytes
}

func (sh *shard) hold(st *stream, p pending) {
	if _, ok := st.buf[p.seq]; ok {
		return
	}
	st.buf[p.seq] = p
	st.bufBytes += int64(len(p.data))
}

func (sh *shard) take(st *stream, seq uint64) (pending, bool) {
	p, ok := st.buf[seq]
	if ok {
		delete(st.buf, seq)
		st.bufBytes -= int64(len(p.data))
	}
	return p, ok
}

// runFrom applies p (seq == st.next) and the buffered batches that follow it; a gap left among
// the buffered batches starts a catch-up.
func (sh *shard) runFrom(st *stream, p pending) {
	sh.runContiguous(st, p)
	if st.replaying {
		if !st.rebuilding && len(st.buf) == 0 && st.answered && st.next >= st.target {
			sh.finishReplay(st)
		}
		return
	}
	if len(st.buf) > 0 && st.deferGen == 0 { // a later gap among the buffered batches
		sh.catchUp(st, false)
	}
}

// runContiguous applies p (seq == st.next) and the buffered batches that continue it, up to the
// first missing seq or undecodable batch.
func (sh *shard) runContiguous(st *stream, p pending) {
	for {
		unknownParent, ok := sh.apply(st, p)
		if !ok {
			return
		}
		if unknownParent && !st.replaying && !st.noRebuild {
			sh.startRebuild(st, p.seq)
		}
		if st.rebuilding && sh.fits(st, p) {
			// Keep it for the rebuild: the bridge's replay may end before it.
			sh.hold(st, p)
		}
		q, ok := sh.take(st, st.next)
		if !ok {
			return
		}
		p = q
	}
}

// startReplay sends one replay request from seq from for the stream.
func (sh *shard) startReplay(st *stream, from uint64) {
	sh.gen++
	st.replaying, st.answered = true, false
	st.gen, st.from, st.target = sh.gen, from, 0
	st.setState()
	sh.s.count(st.w.view, st.key.ID, rReplayRequested, 1)
	s, id, rank, gen := sh.s, st.key.ID, st.key.DPRank, sh.gen
	s.goTracked(func() { s.replay(sh, id, rank, gen, from) })
}

func (sh *shard) finishReplay(st *stream) {
	st.replaying = false
	st.setState()
}

// startRebuild asks for the stream's history from seq 0 after an unknown parent in batch seq. The
// stream goes on live; only a positive answer clears it and applies the history in order (see
// onAnswer), so a bridge that cannot reach back costs nothing but the request. Until the answer,
// every batch applied (from seq on) is kept in buf too: the replay may end before the newest.
func (sh *shard) startRebuild(st *stream, seq uint64) {
	sh.s.log.Info("kv event subscriber: unknown parent block; asking for the worker's history",
		zap.String("worker_id", st.key.ID), zap.Int("dp_rank", st.key.DPRank), zap.Uint64("seq", seq))
	st.noRebuild = true
	sh.startReplay(st, 0)
	st.rebuilding = true
}

// dropStale removes the buffered batches below st.next (kept for a rebuild) and returns how many.
func (sh *shard) dropStale(st *stream) int {
	n := 0
	for seq := range st.buf {
		if seq < st.next {
			sh.take(st, seq)
			n++
		}
	}
	return n
}

func (sh *shard) onAnswer(it item) {
	st := sh.replayStream(it)
	if st == nil {
		return
	}
	if st.rebuilding {
		sh.onRebuildAnswer(st, it)
		return
	}
	if it.err != nil {
		if len(st.buf) == 0 && st.next > st.from { // the gap closed anyway
			sh.finishReplay(st)
			return
		}
		sh.giveUp(st, it.err.Error())
		return
	}
	st.answered, st.target = true, st.from+uint64(it.replayed)
	switch {
	case len(st.buf) == 0 && st.next >= st.target:
		sh.finishReplay(st)
	case it.replayed == 0:
		// Batches are buffered that the publisher has nothing before: a gap it no longer
		// holds, or seqs that do not continue its stream (a jump, a restart). Its snapshot
		// says which (even from seq 0: adopting the lowest buffered seq instead would follow
		// a jump and count the real stream as duplicates).
		sh.giveUp(st, fmt.Sprintf("bridge has no batches from seq %d", st.from))
	}
	// else: the replayed batches are on their way; the deadline item follows
}

// onRebuildAnswer completes a rebuild request: on success the stream is cleared and re-applied from
// seq 0 (buffered batches first, the rest as the replay delivers them); on failure the stream just
// goes on, and a gap seen meanwhile gets its own replay.
func (sh *shard) onRebuildAnswer(st *stream, it item) {
	s := sh.s
	st.rebuilding = false
	if it.err != nil || it.replayed == 0 {
		s.count(st.w.view, st.key.ID, rReplayFailed, 1)
		reason := "bridge has no batches from seq 0"
		if it.err != nil {
			reason = it.err.Error()
		}
		s.log.Info("kv event subscriber: worker history unavailable; keeping the stream as it is",
			zap.String("worker_id", st.key.ID), zap.Int("dp_rank", st.key.DPRank), zap.String("reason", reason))
		st.replaying = false
		sh.dropStale(st)
		st.setState()
		if len(st.buf) > 0 {
			sh.catchUp(st, false)
		}
		return
	}
	sh.clearStream(st)
	st.answered, st.target = true, uint64(it.replayed)
	st.synced, st.next = true, 0
	if p, ok := sh.take(st, 0); ok {
		sh.runFrom(st, p)
	}
	// else: the replayed batches are on their way; the deadline item follows
}

func (sh *shard) onDeadline(it item) {
	st := sh.replayStream(it)
	if st == nil {
		return
	}
	if len(st.buf) == 0 {
		sh.finishReplay(st)
		return
	}
	sh.giveUp(st, "replayed batches did not close the gap")
}

// giveUp ends an outstanding replay that cannot complete: the stream loads the publisher's snapshot
// instead (startSnapshot); when that fails too, or the snapshot itself was the request, it is
// cleared and resyncs (resync).
func (sh *shard) giveUp(st *stream, reason string) {
	if st.replaying && !st.snapshotting {
		sh.s.count(st.w.view, st.key.ID, rReplayFailed, 1)
		sh.startSnapshot(st, reason)
		return
	}
	sh.resync(st, reason)
}

// resync clears the stream and resyncs it at its lowest buffered batch (or at the next batch to
// arrive).
func (sh *shard) resync(st *stream, reason string) {
	s := sh.s
	if st.replaying {
		msg, lvl := "kv event subscriber: cannot rebuild the stream; clearing the worker", zap.WarnLevel
		if !st.applied { // nothing to lose, e.g. a registration replay the bridge cannot serve
			msg, lvl = "kv event subscriber: cannot rebuild the stream; starting at the next batch", zap.InfoLevel
		}
		if c := s.log.Check(lvl, msg); c != nil {
			c.Write(zap.String("worker_id", st.key.ID), zap.Int("dp_rank", st.key.DPRank), zap.Uint64("from_seq", st.from),
				zap.String("reason", reason), zap.Int("buffered", len(st.buf)))
		}
	}
	st.replaying, st.rebuilding = false, false
	st.endSnapshot()
	sh.dropStale(st)
	sh.clearStream(st)
	st.noRebuild = false // a new start: one rebuild may be tried again
	if len(st.buf) == 0 {
		st.synced = false
		st.setState()
		return
	}
	low := ^uint64(0)
	for seq := range st.buf {
		low = min(low, seq)
	}
	st.synced, st.next = true, low
	st.setState()
	p, _ := sh.take(st, low)
	sh.runFrom(st, p)
}

// clearStream empties the stream's index entries and normalizer state.
func (sh *shard) clearStream(st *stream) {
	if st.applied {
		sh.s.count(st.w.view, st.key.ID, rCleared, 1)
	}
	sh.s.ix.Clear(sh.s.ctx, st.key)
	st.norm = nil
	st.applied, st.complete = false, false
}

// resetBody is the body of kvroute.ctl.<worker_id>.reset.
type resetBody struct {
	DPRank  *int    `json:"dp_rank"`
	NextSeq *uint64 `json:"next_seq"`
	Reason  string  `json:"reason"`
}

// onReset clears the announced stream and continues at next_seq.
func (sh *shard) onReset(it item) {
	s := sh.s
	w := sh.workers[it.id]
	if w == nil {
		s.count(nil, it.id, rDroppedUnregistered, 1)
		return
	}
	var b resetBody
	err := errors.New("body too large")
	if len(it.msg.Data) <= maxControlBytes {
		err = json.Unmarshal(it.msg.Data, &b)
	}
	if err == nil && (b.DPRank == nil || *b.DPRank < 0 || *b.DPRank >= len(w.ranks)) {
		err = errors.New("dp_rank missing or out of range")
	}
	if err != nil {
		s.count(w.view, it.id, rBadHeader, 1)
		s.log.Warn("kv event subscriber: reset without a valid body; clearing every rank", zap.String("worker_id", it.id), zap.Error(err))
		for _, st := range w.ranks {
			sh.restart(st, false, 0)
		}
		return
	}
	s.count(w.view, it.id, rReset, 1)
	next := uint64(0)
	if b.NextSeq != nil {
		next = *b.NextSeq
	}
	s.log.Info("kv event subscriber: reset", zap.String("worker_id", it.id), zap.Int("dp_rank", *b.DPRank),
		zap.Bool("has_next_seq", b.NextSeq != nil), zap.Uint64("next_seq", next), zap.String("reason", b.Reason))
	sh.restart(w.ranks[*b.DPRank], b.NextSeq != nil, next)
}

// restart clears a stream, drops its buffer and any outstanding replay, and sets its position.
func (sh *shard) restart(st *stream, synced bool, next uint64) {
	st.replaying, st.rebuilding = false, false
	st.endSnapshot()
	st.cancelCatchUp()
	clear(st.buf)
	st.bufBytes = 0
	sh.clearStream(st)
	st.synced, st.next = synced, next
	// From seq 0 the bridge forwards the whole history: a later unknown parent is worth a replay.
	st.noRebuild = !(synced && next == 0)
	st.setState()
}

package subscriber

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/normalize"
	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// startSnapshot asks the worker's publisher for its block set (kvroute.ctl.<worker_id>.snapshot,
// DESIGN.md §9) after a replay could not rebuild the stream. Until the last chunk every batch is
// buffered; the chunks replace the stream's entries, and the buffered batches from the snapshot's
// seq on are applied after them (onSnapshotChunk).
func (sh *shard) startSnapshot(st *stream, reason string) {
	s := sh.s
	s.log.Info("kv event subscriber: replay cannot rebuild the stream; loading the worker's snapshot",
		zap.String("worker_id", st.key.ID), zap.Int("dp_rank", st.key.DPRank), zap.String("reason", reason))
	sh.gen++
	st.endSnapshot()
	st.replaying, st.answered, st.rebuilding, st.snapshotting = true, false, false, true
	st.gen, st.snapBlocks = sh.gen, 0
	st.snapFloor = 0
	for seq, p := range st.buf {
		st.snapFloor = max(st.snapFloor, seq)
		p.beforeSnapshot = true
		st.buf[seq] = p
	}
	st.setState()
	s.count(st.w.view, st.key.ID, rSnapshotRequested, 1)
	id, rank, gen := st.key.ID, st.key.DPRank, sh.gen
	ctx, cancel := context.WithCancel(s.ctx)
	st.snapCancel = cancel
	if !s.goTracked(func() { s.fetchSnapshot(ctx, sh, id, rank, gen) }) {
		cancel()
	}
}

// fetchSnapshot runs one snapshot request and posts its chunks (or its error) to the shard, until ctx
// (the stream's snapshot) ends. It runs in its own tracked goroutine.
func (s *Subscriber) fetchSnapshot(ctx context.Context, sh *shard, id string, rank int, gen uint64) {
	cfg := snapshot.FetchConfig{Idle: s.cfg.SnapshotTimeout, MaxBytes: s.cfg.MaxSnapshotBytes}
	err := snapshot.Fetch(ctx, s.nc, wire.SnapshotSubject(id), rank, cfg, func(c snapshot.Chunk) error {
		if !sh.post(s.ctx, item{kind: itemSnapshotChunk, id: id, rank: rank, gen: gen, chunk: c}) {
			return s.ctx.Err()
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		sh.post(s.ctx, item{kind: itemSnapshotChunk, id: id, rank: rank, gen: gen, err: err})
	}
}

// holdForSnapshot buffers a batch that arrives while the stream loads a snapshot. When the buffer
// is full, the batches buffered before the request go first (the snapshot holds their effect); when
// none are left, the snapshot is given up.
func (sh *shard) holdForSnapshot(st *stream, p pending) {
	s := sh.s
	if _, dup := st.buf[p.seq]; dup {
		s.count(st.w.view, st.key.ID, rDuplicate, 1)
		return
	}
	if !sh.decodes(st, p) {
		return // it must not take the slot of the seq's real batch
	}
	if !sh.fits(st, p) {
		for seq := range st.buf {
			if seq <= st.snapFloor {
				sh.take(st, seq)
			}
		}
	}
	if sh.fits(st, p) {
		sh.hold(st, p)
		s.count(st.w.view, st.key.ID, rBuffered, 1)
		return
	}
	s.count(st.w.view, st.key.ID, rBufferOverflow, 1)
	sh.failSnapshot(st, "buffer full while loading the snapshot")
	sh.offer(st, p)
}

// onSnapshotChunk applies one chunk of the stream's outstanding snapshot; the last one ends it.
func (sh *shard) onSnapshotChunk(it item) {
	st := sh.replayStream(it)
	if st == nil || !st.snapshotting {
		return
	}
	if it.err != nil {
		sh.failSnapshot(st, it.err.Error())
		return
	}
	c := &it.chunk
	s := sh.s
	if c.Index == 0 {
		// The snapshot replaces what the stream held; this is not counted as a clear, since the
		// worker is credited its blocks again by the end of the snapshot.
		s.ix.Clear(s.ctx, st.key)
		st.norm = nil
		st.applied, st.complete = true, false
	}
	n, err := sh.applySnapshotChunk(st, c)
	if err != nil {
		sh.failSnapshot(st, err.Error())
		return
	}
	st.snapBlocks += n
	if !c.Last {
		return
	}
	if st.snapBlocks != c.Blocks {
		sh.failSnapshot(st, fmt.Sprintf("snapshot of %d blocks delivered %d", c.Blocks, st.snapBlocks))
		return
	}
	if st.synced && c.Seq < st.next && !st.restarting {
		// The publisher is behind the position the stream adopted: it restarted its numbering, or
		// the position came from a jump. The snapshot replaced the entries; its seq is the truth.
		s.count(st.w.view, st.key.ID, rSeqRestart, 1)
		s.log.Warn("kv event subscriber: the worker's snapshot is behind the stream's position; going on from the snapshot",
			zap.String("worker_id", st.key.ID), zap.Int("dp_rank", st.key.DPRank), zap.Uint64("next_seq", st.next), zap.Uint64("snapshot_seq", c.Seq))
	}
	st.replaying = false
	st.endSnapshot()
	st.synced, st.next = true, c.Seq
	st.complete = c.Complete
	st.noRebuild = true // the snapshot is all the publisher knows: a replay from seq 0 adds nothing
	if c.Seq > 0 {
		st.view.lastSeq.Store(c.Seq - 1)
		st.view.hasSeq.Store(true)
	} else {
		st.view.hasSeq.Store(false) // nothing published yet (a seq adopted before is forgotten)
	}
	s.count(st.w.view, st.key.ID, rSnapshotLoaded, 1)
	s.log.Info("kv event subscriber: snapshot loaded", zap.String("worker_id", st.key.ID), zap.Int("dp_rank", st.key.DPRank),
		zap.Int("blocks", c.Blocks), zap.Uint64("next_seq", c.Seq), zap.Bool("complete", c.Complete))
	sh.dropStale(st) // batches before the snapshot's seq are in it
	st.setState()
	if p, ok := sh.take(st, st.next); ok {
		sh.runContiguous(st, p)
	}
	// Batches buffered before the request that are left do not continue from the snapshot's seq
	// (a jump ahead): they caused this catch-up and start no other. Batches that arrived during
	// the snapshot and do not continue from its seq left a gap of their own (a batch lost after
	// the snapshot was taken): one catch-up, under the stream's back-off.
	sh.dropOutOfStream(st)
	if len(st.buf) > 0 {
		sh.catchUp(st, false)
	}
}

// applySnapshotChunk stores the blocks of one chunk and returns how many its events named.
func (sh *shard) applySnapshotChunk(st *stream, c *snapshot.Chunk) (int, error) {
	s := sh.s
	b, err := sh.dec.Decode(c.Encoding, c.Payload)
	if err != nil {
		return 0, fmt.Errorf("decoding snapshot chunk %d: %w", c.Index, err)
	}
	if b.Unknown > 0 || b.Malformed > 0 {
		return 0, fmt.Errorf("snapshot chunk %d: %d malformed events", c.Index, b.Unknown+b.Malformed)
	}
	norm, err := sh.normalizer(st, c.Encoding)
	if err != nil {
		return 0, err
	}
	defer func() { sh.one.Events = nil }()
	n := 0
	for i := range b.Events {
		ev := &b.Events[i]
		switch ev.Type {
		case codec.BlockStored:
			n += len(ev.BlockHashes)
		case codec.BlockRemoved: // placeholders: removed blocks with blocks under them
		default:
			return n, fmt.Errorf("snapshot chunk %d: event %d is %s, want BlockStored or BlockRemoved", c.Index, i, ev.Type)
		}
		sh.one.Events = b.Events[i : i+1]
		res := norm.Apply(&sh.one)
		s.count(st.w.view, st.key.ID, rInvalidEvent, uint64(res.Skipped)) // skipped live too
		for j := range res.Ops {
			op := &res.Ops[j]
			if op.Type == codec.BlockRemoved {
				s.ix.Remove(s.ctx, st.key, op.Removed)
				continue
			}
			if err := sh.storeSnapshot(st, op.Stored); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// storeSnapshot stores one event's blocks. An unknown parent is counted as live (the index's caps
// evicted it); any other index error fails the snapshot.
func (sh *shard) storeSnapshot(st *stream, stored []normalize.Stored) error {
	if len(stored) == 0 {
		return nil
	}
	s := sh.s
	err := sh.indexBlocks(st, stored)
	var upe *index.UnknownParentError
	switch {
	case err == nil:
	case errors.As(err, &upe):
		s.count(st.w.view, st.key.ID, rUnknownParent, 1)
	default:
		s.count(st.w.view, st.key.ID, rIndexError, 1)
		return fmt.Errorf("storing snapshot blocks: %w", err)
	}
	return nil
}

// failSnapshot ends the stream's snapshot: the stream is cleared and resyncs, as after a failed
// replay before snapshots existed.
func (sh *shard) failSnapshot(st *stream, reason string) {
	sh.s.count(st.w.view, st.key.ID, rSnapshotFailed, 1)
	sh.resync(st, "snapshot: "+reason)
}

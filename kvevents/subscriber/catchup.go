package subscriber

import (
	"time"

	"go.uber.org/zap"
)

// A catch-up is what a stream does when its publisher's seqs do not continue it: a replay from
// the stream's next seq for a gap (then the publisher's snapshot when the replay cannot fill it),
// or the publisher's snapshot straight away for a sequence restart (a batch more than
// Config.DuplicateWindow behind). Every catch-up passes through catchUp, which spaces them per
// stream (exponential back-off between Config.CatchUpInterval and MaxCatchUpInterval): whatever
// seqs arrive, a stream starts at most one catch-up per wait, so forged or broken numbering costs
// bounded work. Registration replays, rebuilds and resets are not catch-ups: they come from the
// worker set, an unknown parent (once per stream start) and the bridge's own announcement.

// catchUp starts the stream's catch-up (restart: a sequence restart, else a gap at st.next), or
// defers it to the end of the stream's back-off wait.
func (sh *shard) catchUp(st *stream, restart bool) {
	now := time.Now()
	if now.Before(st.catchUpAt) {
		sh.deferCatchUp(st, restart)
		return
	}
	sh.startCatchUp(st, restart, now)
}

// startCatchUp starts a catch-up now and sets the wait before the next one: CatchUpInterval after
// a quiet spell (more than twice the last wait since the last catch-up), else twice the last wait,
// at most MaxCatchUpInterval.
func (sh *shard) startCatchUp(st *stream, restart bool, now time.Time) {
	s := sh.s
	if st.backoff == 0 || now.Sub(st.lastCatchUp) > 2*st.backoff {
		st.backoff = s.cfg.CatchUpInterval
	} else {
		st.backoff = min(2*st.backoff, s.cfg.MaxCatchUpInterval)
	}
	st.lastCatchUp, st.catchUpAt = now, now.Add(st.backoff)
	st.deferGen, st.deferRestart = 0, false
	if !restart {
		s.count(st.w.view, st.key.ID, rGap, 1)
		sh.startReplay(st, st.next)
		return
	}
	s.count(st.w.view, st.key.ID, rSeqRestart, 1)
	s.log.Warn("kv event subscriber: the worker's seqs restarted (or the stream's position was a jump); loading its snapshot",
		zap.String("worker_id", st.key.ID), zap.Int("dp_rank", st.key.DPRank), zap.Uint64("next_seq", st.next))
	sh.startSnapshot(st, "sequence restart")
	// The adopted position is wrong: forget it, so that a failed snapshot resyncs at the lowest
	// batch buffered (resync drops those below next as applied already).
	st.restarting, st.next = true, 0
}

// deferCatchUp marks the stream's catch-up due at st.catchUpAt and posts one itemCatchUp for that
// time (one per wait: later calls only widen it to a restart).
func (sh *shard) deferCatchUp(st *stream, restart bool) {
	st.deferRestart = st.deferRestart || restart
	if st.deferGen != 0 {
		return
	}
	s := sh.s
	sh.gen++
	st.deferGen = sh.gen
	s.count(st.w.view, st.key.ID, rCatchUpDeferred, 1)
	it := item{kind: itemCatchUp, id: st.key.ID, rank: st.key.DPRank, gen: sh.gen}
	d := time.Until(st.catchUpAt)
	s.goTracked(func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			sh.post(s.ctx, it)
		case <-s.ctx.Done():
		}
	})
}

// onCatchUpDue starts a deferred catch-up, unless a reset or another request took over meanwhile
// (the request outstanding then covers it) or the gap closed.
func (sh *shard) onCatchUpDue(it item) {
	w := sh.workers[it.id]
	if w == nil || it.rank < 0 || it.rank >= len(w.ranks) {
		return
	}
	st := w.ranks[it.rank]
	if st.deferGen != it.gen {
		return
	}
	restart := st.deferRestart
	st.deferGen, st.deferRestart = 0, false
	switch {
	case st.replaying:
	case restart:
		sh.startCatchUp(st, true, time.Now())
	case !st.synced || len(st.buf) == 0:
	default:
		if p, ok := sh.take(st, st.next); ok {
			sh.runFrom(st, p)
			return
		}
		sh.startCatchUp(st, false, time.Now())
	}
}

// cancelCatchUp forgets a deferred catch-up (its item finds no match).
func (st *stream) cancelCatchUp() { st.deferGen, st.deferRestart = 0, false }

// dropOutOfStream drops the batches buffered before the stream's snapshot was requested that are
// still buffered after its run from the snapshot's seq: they do not continue the publisher's stream
// (a jump ahead no catch-up could fill) and start no further catch-up.
func (sh *shard) dropOutOfStream(st *stream) {
	n := 0
	lo, hi := ^uint64(0), uint64(0)
	for seq, p := range st.buf {
		if p.beforeSnapshot {
			sh.take(st, seq)
			n++
			lo, hi = min(lo, seq), max(hi, seq)
		}
	}
	if n == 0 {
		return
	}
	s := sh.s
	s.count(st.w.view, st.key.ID, rOutOfStream, uint64(n))
	s.log.Warn("kv event subscriber: dropping buffered batches that do not continue the worker's stream",
		zap.String("worker_id", st.key.ID), zap.Int("dp_rank", st.key.DPRank), zap.Uint64("next_seq", st.next),
		zap.Int("batches", n), zap.Uint64("lowest_seq", lo), zap.Uint64("highest_seq", hi))
}

// farBehind reports whether batch seq is more than Config.DuplicateWindow behind the stream's next
// seq: no replay of the stream the subscriber follows reaches back that far.
func (sh *shard) farBehind(st *stream, seq uint64) bool {
	return seq < st.next && st.next-seq > uint64(sh.s.cfg.DuplicateWindow)
}

// decodes reports whether p decodes; an undecodable batch is counted (decode_error) and must not
// move the stream: it neither sets its position nor opens a gap.
func (sh *shard) decodes(st *stream, p pending) bool {
	_, err := sh.dec.Decode(p.enc, p.data)
	if err != nil {
		sh.decodeError(st, p.seq, err)
	}
	return err == nil
}

func (sh *shard) decodeError(st *stream, seq uint64, err error) {
	s := sh.s
	if n := s.count(st.w.view, st.key.ID, rDecodeError, 1); logWorthy(n) {
		s.log.Warn("kv event subscriber: dropping undecodable batch", zap.String("worker_id", st.key.ID),
			zap.Uint64("seq", seq), zap.Error(err), zap.Uint64("count", n))
	}
}

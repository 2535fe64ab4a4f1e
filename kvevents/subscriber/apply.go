package subscriber

import (
	"errors"

	"github.com/kvroute/kvroute/kv"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/normalize"
)

// apply decodes, normalizes and applies batch p, the stream's next. ok is false when p does not
// decode: it is dropped and counted, and the stream does not move (next and last_seq stay, so
// garbage never advances a stream). unknownParent is true when a stored block named a parent the
// index lacks while the stream's history is incomplete (a rebuild from seq 0 could supply it); the
// rest of the batch is applied all the same.
func (sh *shard) apply(st *stream, p pending) (unknownParent, ok bool) {
	s := sh.s
	v, id := st.w.view, st.key.ID
	b, err := sh.dec.Decode(p.enc, p.data)
	if err != nil {
		sh.decodeError(st, p.seq, err)
		return false, false
	}
	st.next = p.seq + 1
	defer func() { // published last: once a reader sees the seq, its effects are in the index
		st.view.lastSeq.Store(p.seq)
		st.view.hasSeq.Store(true)
	}()
	if p.seq == 0 {
		st.complete = true // the worker's whole history follows
	}
	st.applied = true
	s.count(v, id, rApplied, 1)
	if st.replaying && !st.rebuilding {
		s.count(v, id, rReplayed, 1)
	}
	s.count(v, id, rUnknownType, uint64(b.Unknown))
	if b.Malformed > 0 {
		if n := s.count(v, id, rInvalidEvent, uint64(b.Malformed)); logWorthy(n) {
			s.log.Warn("kv event subscriber: skipping malformed events", zap.String("worker_id", id),
				zap.Uint64("seq", p.seq), zap.Error(b.FirstErr), zap.Uint64("count", n))
		}
	}
	norm, err := sh.normalizer(st, p.enc)
	if err != nil {
		if n := s.count(v, id, rInvalidEvent, uint64(len(b.Events))); logWorthy(n) {
			s.log.Warn("kv event subscriber: cannot normalize the worker's events", zap.String("worker_id", id), zap.Error(err))
		}
		return false, true
	}
	defer func() { sh.one.Events = nil }()
	for i := range b.Events {
		ev := &b.Events[i]
		sh.one.Events = b.Events[i : i+1]
		res := norm.Apply(&sh.one)
		if res.Skipped > 0 {
			if n := s.count(v, id, rInvalidEvent, uint64(res.Skipped)); logWorthy(n) {
				s.log.Warn("kv event subscriber: skipping event", zap.String("worker_id", id),
					zap.Uint64("seq", p.seq), zap.Error(res.FirstErr), zap.Uint64("count", n))
			}
		}
		for _, f := range res.Filtered {
			r := filteredResult(f.Reason)
			if n := s.count(v, id, r, 1); r == rBlockSizeMismatch && logWorthy(n) {
				s.log.Warn("kv event subscriber: skipping stored event of another block size than the worker record's",
					zap.String("worker_id", id), zap.Uint64("seq", p.seq), zap.Int("block_size", ev.BlockSize),
					zap.Int("worker_block_size", st.w.rec.BlockSize), zap.Uint64("count", n))
			}
		}
		for j := range res.Ops {
			op := &res.Ops[j]
			switch op.Type {
			case codec.BlockStored:
				if sh.store(st, ev, op.Stored) {
					unknownParent = true
				}
			case codec.BlockRemoved:
				if n := s.ix.Remove(s.ctx, st.key, op.Removed); n < len(op.Removed) {
					s.count(v, id, rUnknownRemoval, 1)
				}
			case codec.AllBlocksCleared:
				s.ix.Clear(s.ctx, st.key)
				s.count(v, id, rCleared, 1)
				st.complete = true // the engine's cache is empty: everything after is known
			}
		}
	}
	return unknownParent, true
}

// normalizer returns the stream's normalizer for enc, creating it on first use (and when the
// encoding or the pad ids (SetPads) change, which restarts the salt memory).
func (sh *shard) normalizer(st *stream, enc codec.Encoding) (*normalize.Normalizer, error) {
	pads := sh.s.pads.Load()
	if st.norm != nil && st.enc == enc && st.pads == pads {
		return st.norm, nil
	}
	cfg := sh.s.cfg
	n, err := normalize.New(normalize.Config{
		Blocks:          blocks.Config{BlockSize: st.w.rec.BlockSize, ImagePad: uint32(pads >> 32), VideoPad: uint32(pads)},
		Encoding:        enc,
		MaxSaltedBlocks: cfg.MaxSaltedBlocks,
	})
	if err != nil {
		return nil, err
	}
	st.norm, st.enc, st.pads = n, enc, pads
	return n, nil
}

// store applies one BlockStored event's blocks and reports them to the verification hook. It
// returns true for an unknown parent in a stream whose history is incomplete (see apply).
func (sh *shard) store(st *stream, ev *codec.Event, stored []normalize.Stored) bool {
	if len(stored) == 0 {
		return false
	}
	s := sh.s
	err := sh.indexBlocks(st, stored)
	n := len(stored)
	var upe *index.UnknownParentError
	if err != nil {
		if !errors.As(err, &upe) {
			if c := s.count(st.w.view, st.key.ID, rIndexError, 1); logWorthy(c) {
				s.log.Error("kv event subscriber: index refused blocks", zap.String("worker_id", st.key.ID), zap.Error(err))
			}
			return false
		}
		n = upe.Position
	}
	sh.verify(st, ev, n)
	if upe == nil {
		return false
	}
	s.count(st.w.view, st.key.ID, rUnknownParent, 1)
	return !st.complete
}

// indexBlocks stores one event's normalized blocks in the index under the stream's worker key (the
// index.Store error as is), through the shard's reused block slice.
func (sh *shard) indexBlocks(st *stream, stored []normalize.Stored) error {
	sh.blocks = sh.blocks[:0]
	for _, b := range stored {
		sh.blocks = append(sh.blocks, index.StoredBlock{EngineHash: b.EngineHash, Parent: b.ParentEngineHash, HasParent: b.HasParent, LocalHash: b.LocalHash})
	}
	return sh.s.ix.Store(sh.s.ctx, st.key, sh.blocks)
}

// verify reports the first n blocks of a stored event that name media identities to the OnStored
// hook.
func (sh *shard) verify(st *stream, ev *codec.Event, n int) {
	fp := sh.s.onStored.Load()
	if fp == nil || !ev.HasExtraKeys || len(ev.ExtraKeys) < n {
		return
	}
	bs := ev.BlockSize
	if bs <= 0 || len(ev.TokenIDs) < n*bs {
		return
	}
	for i := 0; i < n; i++ {
		keys := sh.keys[:0]
		for _, k := range ev.ExtraKeys[i] {
			switch k.Kind {
			case codec.KeyString:
				if idn, ok := kv.ParseUUID(k.Str); ok {
					keys = append(keys, kv.MediaKey{Identity: idn})
				}
			case codec.KeyPair:
				if idn, ok := kv.ParseUUID(k.Str); ok {
					keys = append(keys, kv.MediaKey{Identity: idn, Offset: k.Offset, HasOffset: true})
				}
			}
		}
		sh.keys = keys
		if len(keys) > 0 {
			(*fp)(st.key.ID, ev.TokenIDs[i*bs:(i+1)*bs:(i+1)*bs], keys)
		}
	}
}

package subscriber

import (
	"time"

	"github.com/kvroute/kvroute/kv"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/defaults"
	"github.com/kvroute/kvroute/kvevents/normalize"
)

// Defaults of Config.
const (
	DefaultReplayTimeout    = 2 * time.Second
	DefaultMaxBuffered      = 1024
	DefaultMaxBufferedBytes = 64 << 20
	DefaultMaxSnapshotBytes = 1 << 30
	DefaultSnapshotTimeout  = 10 * time.Second
	DefaultShards           = 2
	DefaultQueueLength      = 8192
	// DefaultDuplicateWindow is the default of Config.DuplicateWindow: kvroute-bridge's default
	// replay ring (--ring-batches 10000), the farthest back a replay of the live stream reaches.
	DefaultDuplicateWindow = 10000
	// DefaultCatchUpInterval and DefaultMaxCatchUpInterval are the defaults of Config's catch-up
	// back-off.
	DefaultCatchUpInterval    = 100 * time.Millisecond
	DefaultMaxCatchUpInterval = 10 * time.Second
	// DefaultImagePad and DefaultVideoPad are the Qwen3-VL placeholder ids (config.json
	// image_token_id, video_token_id).
	DefaultImagePad uint32 = 151655
	DefaultVideoPad uint32 = 151656
)

// StoredFunc receives, for the layout verification of DESIGN.md §2.3 (router.Router.VerifyStored),
// every stored block that names at least one media identity in its extra_keys: the worker id, the
// block's worker tokens (block_size ids) and its media items in extra_keys order. Identities are
// parsed with kv.ParseUUID; Offset/HasOffset come from the `[identifier, offset]` form
// (HasOffset false for a bare identifier). Only blocks the index accepted are reported. The slices
// are valid only during the call (copy to keep them). It runs on a shard goroutine: it must be quick
// and safe for concurrent use.
type StoredFunc func(workerID string, tokens []uint32, keys []kv.MediaKey)

// CountFunc receives every counter increment: worker is the worker id (UnregisteredWorker for
// events of workers not in the set), result one of the Result* names, n > 0. It runs on the
// subscriber's goroutines and must be quick; the kvroute app adds n to
// caddy_kvroute_events_total{worker,result}.
type CountFunc func(worker, result string, n uint64)

// Config configures a Subscriber; nil means DefaultConfig. Zero fields take their defaults.
type Config struct {
	// ReplayTimeout bounds the wait for a replay answer, and after a positive answer the wait for the
	// replayed batches to close the gap. Default: 2 s.
	ReplayTimeout time.Duration
	// MaxBuffered and MaxBufferedBytes bound the batches one stream buffers while a replay is
	// outstanding; beyond them the replay is given up (the stream is cleared and resyncs). Defaults:
	// 1024 batches, 64 MiB.
	MaxBuffered      int
	MaxBufferedBytes int64
	// SnapshotTimeout bounds the wait for each chunk of a snapshot (the first one included: the
	// publisher walks its whole block set before it). Default: 10 s.
	SnapshotTimeout time.Duration
	// MaxSnapshotBytes bounds the chunk bytes of one snapshot (kvevents/snapshot) that a stream
	// loads, held by the NATS client until applied; beyond it the snapshot fails (the stream is
	// cleared and resyncs). Chunks are applied as they arrive. Default: 1 GiB.
	MaxSnapshotBytes int64
	// DuplicateWindow is how far behind the stream's next seq a batch may be and still be a
	// duplicate (a replay, ours or another replica's, sends applied batches again). A batch farther
	// behind does not belong to the stream as the subscriber follows it: the publisher restarted its
	// numbering without a reset, or the position adopted was wrong (a jump); the stream loads the
	// publisher's snapshot and goes on from its seq (result seq_restart). Set it to at least the
	// publishers' replay depth (kvroute-bridge --ring-batches, or the engine's replay buffer when
	// the bridge replays from it). Default: 10000.
	DuplicateWindow int
	// CatchUpInterval and MaxCatchUpInterval bound how often one stream starts a catch-up (a gap's
	// replay, a sequence restart's snapshot): after a catch-up starts, the next waits
	// CatchUpInterval, doubling with every catch-up that follows within twice the current wait, up to
	// MaxCatchUpInterval; a quiet stream starts again at CatchUpInterval. A catch-up due sooner is
	// deferred (result catch_up_deferred) and starts when the wait ends, so no input can make a
	// stream replay or load snapshots in a loop. Defaults: 100 ms and 10 s.
	CatchUpInterval    time.Duration
	MaxCatchUpInterval time.Duration
	// Shards is the number of goroutines that decode and apply batches. Default: 2.
	Shards int
	// QueueLength is the capacity of the subscription channel and of each shard's queue. A full
	// subscription channel makes the NATS client drop messages (counted in Stats.Dropped); the gaps
	// they leave are filled by replays. Default: 8192.
	QueueLength int
	// ImagePad and VideoPad are the model's placeholder token ids (kv/blocks.Config); replace
	// them later with SetPads. Defaults: the Qwen3-VL ids 151655 and 151656.
	ImagePad, VideoPad uint32
	// MaxSaltedBlocks bounds each stream's normalizer salt memory (normalize.Config). Default:
	// normalize.DefaultMaxSaltedBlocks.
	MaxSaltedBlocks int
	// OnStored, if set, receives the blocks for layout verification (see StoredFunc). It can be
	// replaced later with SetOnStored.
	OnStored StoredFunc
	// OnCount, if set, receives every counter increment (see CountFunc).
	OnCount CountFunc
	// Logger receives warnings (replays given up, resets) and rate-limited drop reports. Default:
	// a no-op logger.
	Logger *zap.Logger
}

// DefaultConfig returns the defaults.
func DefaultConfig() *Config {
	return &Config{
		ReplayTimeout:      DefaultReplayTimeout,
		MaxBuffered:        DefaultMaxBuffered,
		MaxBufferedBytes:   DefaultMaxBufferedBytes,
		SnapshotTimeout:    DefaultSnapshotTimeout,
		MaxSnapshotBytes:   DefaultMaxSnapshotBytes,
		Shards:             DefaultShards,
		QueueLength:        DefaultQueueLength,
		DuplicateWindow:    DefaultDuplicateWindow,
		CatchUpInterval:    DefaultCatchUpInterval,
		MaxCatchUpInterval: DefaultMaxCatchUpInterval,
		ImagePad:           DefaultImagePad,
		VideoPad:           DefaultVideoPad,
		MaxSaltedBlocks:    normalize.DefaultMaxSaltedBlocks,
		Logger:             zap.NewNop(),
	}
}

// withDefaults returns a copy of cfg (nil allowed) with zero fields set to their defaults.
func withDefaults(cfg *Config) Config {
	d := *DefaultConfig()
	if cfg == nil {
		return d
	}
	c := *cfg
	defaults.Positive(&c.ReplayTimeout, d.ReplayTimeout)
	defaults.Positive(&c.MaxBuffered, d.MaxBuffered)
	defaults.Positive(&c.MaxBufferedBytes, d.MaxBufferedBytes)
	defaults.Positive(&c.SnapshotTimeout, d.SnapshotTimeout)
	defaults.Positive(&c.MaxSnapshotBytes, d.MaxSnapshotBytes)
	defaults.Positive(&c.Shards, d.Shards)
	defaults.Positive(&c.QueueLength, d.QueueLength)
	defaults.Positive(&c.DuplicateWindow, d.DuplicateWindow)
	defaults.Positive(&c.CatchUpInterval, d.CatchUpInterval)
	defaults.Positive(&c.MaxCatchUpInterval, d.MaxCatchUpInterval)
	c.MaxCatchUpInterval = max(c.MaxCatchUpInterval, c.CatchUpInterval)
	if c.ImagePad == 0 && c.VideoPad == 0 {
		c.ImagePad, c.VideoPad = d.ImagePad, d.VideoPad
	}
	defaults.Positive(&c.MaxSaltedBlocks, d.MaxSaltedBlocks)
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c
}

// UnregisteredWorker is the worker label of events whose subject names a worker not in the set.
const UnregisteredWorker = "(unregistered)"

// Result names, the `result` label of caddy_kvroute_events_total and the keys of Stats.Events.
// Units: one per NATS message (batch) for the message-level results, one per event inside a
// batch for unknown_type, invalid_event, unknown_parent, unknown_removal, non_attention_group,
// non_dense_block_span and block_size_mismatch.
const (
	// ResultApplied: a batch applied in sequence order (replayed ones included).
	ResultApplied = "applied"
	// ResultReplayed: a batch applied while a replay of its stream was outstanding (it filled a gap).
	ResultReplayed = "replayed"
	// ResultDuplicate: a batch whose seq was already applied, dropped.
	ResultDuplicate = "duplicate"
	// ResultGap: a sequence gap detected (one per replay it starts).
	ResultGap = "gap"
	// ResultBuffered: a batch held back behind a gap.
	ResultBuffered = "buffered"
	// ResultReplayRequested: a replay request sent (gap, unknown parent, registration).
	ResultReplayRequested = "replay_requested"
	// ResultReplayFailed: a replay unanswered, answered with an error, or not filling its gap.
	ResultReplayFailed = "replay_failed"
	// ResultBufferOverflow: a replay given up because the stream's buffer was full, or a batch
	// dropped because the buffer was full while a catch-up waited for its back-off.
	ResultBufferOverflow = "buffer_overflow"
	// ResultCleared: a stream cleared by a failed replay, a reset, a rebuild or AllBlocksCleared.
	ResultCleared = "cleared"
	// ResultReset: a reset message applied.
	ResultReset = "reset"
	// ResultUnknownParent: a BlockStored event whose chain continues a block the index lacks.
	ResultUnknownParent = "unknown_parent"
	// ResultUnknownRemoval: a BlockRemoved event naming at least one block the index lacks.
	ResultUnknownRemoval = "unknown_removal"
	// ResultUnknownType: an event of an unknown type, skipped.
	ResultUnknownType = "unknown_type"
	// ResultInvalidEvent: an event of a known type with wrongly shaped fields, or that cannot be
	// normalized (extra_keys length, tokens_hash count), skipped.
	ResultInvalidEvent = "invalid_event"
	// ResultDecodeError: a message that is not one well-formed batch, dropped (it never moves a
	// stream: it sets no position, opens no gap and takes no buffer slot).
	ResultDecodeError = "decode_error"
	// ResultBadHeader: a message with a missing or invalid Kvroute-Seq, Kvroute-Encoding or
	// Kvroute-Dp-Rank (rank ≥ the worker's dp_size included), or a reset that does not parse.
	ResultBadHeader = "bad_header"
	// ResultDroppedUnregistered: a message of a worker not in the set, dropped.
	ResultDroppedUnregistered = "dropped_unregistered"
	// ResultIndexError: a batch the index refused (too many workers), dropped.
	ResultIndexError = "index_error"
	// ResultNonAttentionGroup: a BlockStored or BlockRemoved event of a KV cache group whose blocks do
	// not line up with the prompt (Mamba, sliding window, …: kvevents/normalize KindNotAdmitted,
	// GroupKindNotAdmitted, GroupUnlearnedNonzero), skipped.
	ResultNonAttentionGroup = "non_attention_group"
	// ResultNonDenseBlockSpan: a used BlockStored whose token_ids are not block_size per block hash,
	// skipped.
	ResultNonDenseBlockSpan = "non_dense_block_span"
	// ResultBlockSizeMismatch: a used, dense BlockStored whose block_size is not the worker record's,
	// skipped (its blocks would not match the request side's).
	ResultBlockSizeMismatch = "block_size_mismatch"
	// ResultSnapshotRequested: a snapshot request sent (a replay that could not rebuild the stream:
	// registration after the publisher's ring wrapped, or a gap it no longer holds).
	ResultSnapshotRequested = "snapshot_requested"
	// ResultSnapshotLoaded: a snapshot loaded; the stream went on from its seq.
	ResultSnapshotLoaded = "snapshot_loaded"
	// ResultSnapshotFailed: a snapshot not answered, answered with an error, incomplete or
	// overflowing the buffer; the stream is then cleared and resyncs (as before snapshots).
	ResultSnapshotFailed = "snapshot_failed"
	// ResultOutOfStream: a batch whose seq does not continue the publisher's stream, dropped: one
	// more than Config.DuplicateWindow behind the stream's next seq (it triggers a seq_restart),
	// or buffered before a snapshot at seq S was requested and not continuing from S (a jump
	// ahead that no catch-up could fill; it starts no further one).
	ResultOutOfStream = "out_of_stream"
	// ResultSeqRestart: the publisher's numbering does not continue the position the stream
	// adopted (a batch too far behind it, or a snapshot whose seq is below it): the publisher
	// restarted without a reset, or the position came from a jump. The stream's entries are
	// replaced by the publisher's snapshot and it goes on from the snapshot's seq.
	ResultSeqRestart = "seq_restart"
	// ResultCatchUpDeferred: a catch-up (gap replay or sequence-restart snapshot) postponed by the
	// stream's back-off (Config.CatchUpInterval); it starts when the wait ends.
	ResultCatchUpDeferred = "catch_up_deferred"
)

// result indexes the counters.
type result uint8

const (
	rApplied result = iota
	rReplayed
	rDuplicate
	rGap
	rBuffered
	rReplayRequested
	rReplayFailed
	rBufferOverflow
	rCleared
	rReset
	rUnknownParent
	rUnknownRemoval
	rUnknownType
	rInvalidEvent
	rDecodeError
	rBadHeader
	rDroppedUnregistered
	rIndexError
	rNonAttentionGroup
	rNonDenseBlockSpan
	rBlockSizeMismatch
	rSnapshotRequested
	rSnapshotLoaded
	rSnapshotFailed
	rOutOfStream
	rSeqRestart
	rCatchUpDeferred
	numResults
)

var resultNames = [numResults]string{
	rApplied:             ResultApplied,
	rReplayed:            ResultReplayed,
	rDuplicate:           ResultDuplicate,
	rGap:                 ResultGap,
	rBuffered:            ResultBuffered,
	rReplayRequested:     ResultReplayRequested,
	rReplayFailed:        ResultReplayFailed,
	rBufferOverflow:      ResultBufferOverflow,
	rCleared:             ResultCleared,
	rReset:               ResultReset,
	rUnknownParent:       ResultUnknownParent,
	rUnknownRemoval:      ResultUnknownRemoval,
	rUnknownType:         ResultUnknownType,
	rInvalidEvent:        ResultInvalidEvent,
	rDecodeError:         ResultDecodeError,
	rBadHeader:           ResultBadHeader,
	rDroppedUnregistered: ResultDroppedUnregistered,
	rIndexError:          ResultIndexError,
	rNonAttentionGroup:   ResultNonAttentionGroup,
	rNonDenseBlockSpan:   ResultNonDenseBlockSpan,
	rBlockSizeMismatch:   ResultBlockSizeMismatch,
	rSnapshotRequested:   ResultSnapshotRequested,
	rSnapshotLoaded:      ResultSnapshotLoaded,
	rSnapshotFailed:      ResultSnapshotFailed,
	rOutOfStream:         ResultOutOfStream,
	rSeqRestart:          ResultSeqRestart,
	rCatchUpDeferred:     ResultCatchUpDeferred,
}

// filteredResult is the result a normalize.SkipReason is counted under.
func filteredResult(r normalize.SkipReason) result {
	switch r {
	case normalize.NonDenseBlockSpan:
		return rNonDenseBlockSpan
	case normalize.BlockSizeMismatch:
		return rBlockSizeMismatch
	}
	return rNonAttentionGroup
}

// Results lists every result name, in a fixed order.
func Results() []string { return append([]string(nil), resultNames[:]...) }

package bridge

import "sync/atomic"

// rankCounters are one rank's counters, updated by its goroutine and read by Stats.
type rankCounters struct {
	received       atomic.Uint64
	forwarded      atomic.Uint64
	badFrames      atomic.Uint64
	duplicates     atomic.Uint64
	gaps           atomic.Uint64
	filled         atomic.Uint64
	lost           atomic.Uint64
	resets         atomic.Uint64
	restarts       atomic.Uint64
	replayRequests atomic.Uint64
	replayed       atomic.Uint64
	replayErrors   atomic.Uint64
	publishErrors  atomic.Uint64
	lastSeq        atomic.Uint64
	haveSeq        atomic.Bool
	setBlocks      atomic.Int64
	setEvicted     atomic.Uint64
	setUndecodable atomic.Uint64
	snapshots      atomic.Uint64
	snapshotErrors atomic.Uint64
}

// RankStats are the counters of one worker rank since the bridge started.
type RankStats struct {
	WorkerID string `json:"worker_id"`
	DPRank   int    `json:"dp_rank"`
	// Received counts well-formed ZMQ messages received live.
	Received uint64 `json:"received"`
	// Forwarded counts batches published on the events subject for the first time (live or filled).
	Forwarded uint64 `json:"forwarded"`
	// BadFrames counts ZMQ messages (live or replay replies) that are not KV event messages.
	BadFrames uint64 `json:"bad_frames"`
	// Duplicates counts live messages already forwarded from an engine replay.
	Duplicates uint64 `json:"duplicates"`
	// Gaps counts sequence gaps seen; Filled counts batches recovered from the engine for them;
	// Lost counts batches known to be lost (a gap without a replay socket, or one the replay socket
	// did not answer); a gap the engine's buffer no longer covers is announced as a reset but not
	// counted here, since it may be a restarted engine numbering on from a higher seq.
	Gaps   uint64 `json:"gaps"`
	Filled uint64 `json:"filled"`
	Lost   uint64 `json:"lost"`
	// Resets counts resets published; Restarts counts engine restarts detected.
	Resets   uint64 `json:"resets"`
	Restarts uint64 `json:"restarts"`
	// ReplayRequests counts routers' replay requests; Replayed counts batches republished for them;
	// ReplayErrors counts requests answered with an error.
	ReplayRequests uint64 `json:"replay_requests"`
	Replayed       uint64 `json:"replayed"`
	ReplayErrors   uint64 `json:"replay_errors"`
	// PublishErrors counts NATS publishes that failed (the batch stays in the ring for replay).
	PublishErrors uint64 `json:"publish_errors"`
	// LastSeq is the newest sequence forwarded; HasLastSeq is false before the first.
	LastSeq    uint64 `json:"last_seq"`
	HasLastSeq bool   `json:"has_last_seq"`
	// SetBlocks is the number of blocks in the rank's block set (what a snapshot carries, before
	// blocks under a removed parent are left out); SetEvicted counts blocks dropped by max_blocks;
	// SetUndecodable counts forwarded batches the set could not read (forwarded all the same).
	SetBlocks      int64  `json:"set_blocks"`
	SetEvicted     uint64 `json:"set_evicted"`
	SetUndecodable uint64 `json:"set_undecodable"`
	// Snapshots counts snapshot requests answered; SnapshotErrors those answered with an error.
	Snapshots      uint64 `json:"snapshots"`
	SnapshotErrors uint64 `json:"snapshot_errors"`
}

func (c *rankCounters) snapshot(id string, r int) RankStats {
	return RankStats{
		WorkerID: id, DPRank: r,
		Received: c.received.Load(), Forwarded: c.forwarded.Load(), BadFrames: c.badFrames.Load(),
		Duplicates: c.duplicates.Load(), Gaps: c.gaps.Load(), Filled: c.filled.Load(), Lost: c.lost.Load(),
		Resets: c.resets.Load(), Restarts: c.restarts.Load(),
		ReplayRequests: c.replayRequests.Load(), Replayed: c.replayed.Load(), ReplayErrors: c.replayErrors.Load(),
		PublishErrors: c.publishErrors.Load(), LastSeq: c.lastSeq.Load(), HasLastSeq: c.haveSeq.Load(),
		SetBlocks: c.setBlocks.Load(), SetEvicted: c.setEvicted.Load(), SetUndecodable: c.setUndecodable.Load(),
		Snapshots: c.snapshots.Load(), SnapshotErrors: c.snapshotErrors.Load(),
	}
}

package wire

import "strings"

// NATS subjects of DESIGN.md §2.2 (version 1). A worker id is `[A-Za-z0-9_-]{1,64}` (§2.1), so it
// is one subject token.
const (
	// EventsPrefix starts kvroute.events.<worker_id>: one engine batch, bytes unchanged, with the
	// Header* headers below.
	EventsPrefix = "kvroute.events."
	// ControlPrefix starts the per-worker control subjects kvroute.ctl.<worker_id>.<verb>.
	ControlPrefix = "kvroute.ctl."
	// ReplaySuffix, ResetSuffix and SnapshotSuffix end the control subjects: replay requests
	// ({"dp_rank", "from_seq"} → {"replayed"} or {"error"}), reset announcements, snapshot requests.
	ReplaySuffix   = ".replay"
	ResetSuffix    = ".reset"
	SnapshotSuffix = ".snapshot"

	// AllEvents and AllResets are the wildcards a router subscribes to.
	AllEvents = EventsPrefix + "*"
	AllResets = ControlPrefix + "*" + ResetSuffix

	// LoadSyncSubject carries the replica sync of load deltas (DESIGN.md §9).
	LoadSyncSubject = "kvroute.sync.load"

	// WorkersBucket is the NATS KV bucket of worker records, keyed by worker id (DESIGN.md §2.1).
	WorkersBucket = "kvroute_workers"

	// ResponsesBucket is the NATS KV bucket of stored responses, keyed by response id, value
	// {"worker_id"}: the worker that holds the response (DESIGN.md §1.1).
	ResponsesBucket = "kvroute_responses"
)

// EventsSubject is kvroute.events.<workerID>.
func EventsSubject(workerID string) string { return EventsPrefix + workerID }

// ReplaySubject is kvroute.ctl.<workerID>.replay, where the worker's bridge answers replay requests.
func ReplaySubject(workerID string) string { return ControlPrefix + workerID + ReplaySuffix }

// ResetSubject is kvroute.ctl.<workerID>.reset, where the bridge announces lost event history.
func ResetSubject(workerID string) string { return ControlPrefix + workerID + ResetSuffix }

// SnapshotSubject is kvroute.ctl.<workerID>.snapshot, where the bridge answers snapshot requests
// (DESIGN.md §9).
func SnapshotSubject(workerID string) string { return ControlPrefix + workerID + SnapshotSuffix }

// EventsWorker returns the worker id of an events subject; ok is false for any other subject.
func EventsWorker(subject string) (workerID string, ok bool) {
	if id, ok := strings.CutPrefix(subject, EventsPrefix); ok {
		return id, true
	}
	return "", false
}

// ResetWorker returns the worker id of a reset subject; ok is false for any other subject.
func ResetWorker(subject string) (workerID string, ok bool) {
	if !strings.HasPrefix(subject, ControlPrefix) || !strings.HasSuffix(subject, ResetSuffix) ||
		len(subject) < len(ControlPrefix)+len(ResetSuffix) {
		return "", false
	}
	return subject[len(ControlPrefix) : len(subject)-len(ResetSuffix)], true
}

// Headers of kvroute.events.<worker_id> (DESIGN.md §2.2); snapshot chunks carry the last two too.
const (
	// HeaderSeq is the batch's sequence number (decimal u64).
	HeaderSeq = "Kvroute-Seq"
	// HeaderEncoding is the payload's encoding: vllm, sglang, dynamo-json or dynamo-msgpack.
	HeaderEncoding = "Kvroute-Encoding"
	// HeaderDPRank is the data-parallel rank (decimal, default 0).
	HeaderDPRank = "Kvroute-Dp-Rank"
)

// Headers of a snapshot chunk, the reply to a kvroute.ctl.<worker_id>.snapshot request
// (kvevents/snapshot; DESIGN.md §9).
const (
	HeaderSnapshotSeq      = "Kvroute-Snapshot-Seq"
	HeaderSnapshotChunk    = "Kvroute-Snapshot-Chunk"
	HeaderSnapshotLast     = "Kvroute-Snapshot-Last"
	HeaderSnapshotBlocks   = "Kvroute-Snapshot-Blocks"
	HeaderSnapshotComplete = "Kvroute-Snapshot-Complete"
	HeaderSnapshotError    = "Kvroute-Snapshot-Error"
)

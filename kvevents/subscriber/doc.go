// Package subscriber consumes the workers' KV events from NATS and applies them to the router's
// KV block index (DESIGN.md §2, §2.2). It is Caddy-free: the kvroute app creates one Subscriber over
// its NATS connection and index, feeds it the worker set, and reads its Stats for the admin API and
// the caddy_kvroute_events_total metric.
//
// Subjects (DESIGN.md §2.2): batches arrive on kvroute.events.<worker_id> with the headers
// Kvroute-Seq (decimal u64, required), Kvroute-Encoding (vllm, sglang, dynamo-json, dynamo-msgpack;
// default: the worker's engine) and Kvroute-Dp-Rank (decimal, default 0). Bridges announce lost
// events on kvroute.ctl.<worker_id>.reset ({"dp_rank": r, "next_seq": n, "reason": "..."}). Both
// subjects are read through one channel, so a reset is handled in the order the bridge published it
// relative to its batches.
//
// Ordering, per worker and data-parallel rank (a "stream"; each rank is its own KV cache and its own
// index.WorkerKey):
//
//   - batches apply in sequence order; a batch whose seq was already applied is a duplicate and is
//     dropped;
//   - a gap (seq > next expected) sends ONE replay request on kvroute.ctl.<worker_id>.replay
//     ({"dp_rank": r, "from_seq": next} → {"replayed": k} or {"error": "..."}) and buffers later
//     batches (bounded by Config.MaxBuffered and MaxBufferedBytes); the bridge publishes the missing
//     batches again on the events subject with their seqs, and they fill the gap. Gaps seen while a
//     replay is outstanding join it;
//   - a stored block whose parent the index does not hold (index.ErrUnknownParent) in a stream whose
//     history is incomplete (it did not start at seq 0 or at an AllBlocksCleared, e.g. the router
//     subscribed late) sends ONE replay request from seq 0. The stream goes on live meanwhile; a
//     positive answer clears it and re-applies the history in order (the batches it already had
//     are kept while the request is outstanding, since the replayed copies can arrive before the
//     answer), so the index ends equal to a gap-free one. A negative answer leaves the stream as it
//     was. Such a rebuild is tried once per stream start (registration, reset, or a clear after a
//     failed replay); when the history is complete the parent was evicted by the index caps and no
//     replay is sent. In every case the unknown block and the rest of its chain in that event are
//     dropped and counted (unknown_parent);
//   - a replay that is not answered within Config.ReplayTimeout (default 2 s), that is answered with
//     an error, whose replayed batches do not close the gap within one more ReplayTimeout after the
//     answer, or whose buffer overflows, is followed by a snapshot request on
//     kvroute.ctl.<worker_id>.snapshot ({"dp_rank": r}, kvevents/snapshot; DESIGN.md §9): the
//     publisher's block set as of a seq S, in chunks. Meanwhile every batch of the stream is buffered
//     (the batches buffered before the request may be dropped to make room: the snapshot holds their
//     effect). The chunks replace the stream's entries as they arrive (through the same decoder and
//     normalizer as live batches); after the last one the buffered batches below S are dropped and
//     the stream goes on from S. Only a snapshot that fails too (no answer within
//     Config.SnapshotTimeout per chunk, an error answer, a missing chunk, a wrong block count, more
//     than MaxSnapshotBytes, a full buffer) clears the stream (it is credited nothing until new
//     events) and resyncs at the lowest buffered seq (or at the next batch that arrives). A
//     registration replay that finds nothing published (replayed 0 from seq 0) needs no snapshot unless
//     batches are buffered (the snapshot then says whether they continue the publisher's stream);
//   - seqs that do not continue the publisher's stream cost bounded work (catchup.go). A batch that
//     does not decode never moves a stream: it sets no position, opens no gap and takes no buffer
//     slot (decode_error). After a snapshot at S, the batches buffered before it was requested that do
//     not continue from S are dropped (out_of_stream: the publisher took S after publishing
//     them, so they are not its) and start no further catch-up; a gap among those that arrived
//     during the snapshot is a replay from S. A batch more than
//     Config.DuplicateWindow behind the stream's next seq, or a snapshot whose seq is below it,
//     means the publisher restarted its numbering without a reset or the position adopted came
//     from a jump: the stream loads the publisher's snapshot and goes on from its seq
//     (seq_restart). A stream's catch-ups (a gap's replay, a restart's snapshot) are spaced by an
//     exponential back-off (Config.CatchUpInterval to MaxCatchUpInterval; a deferred one is counted
//     catch_up_deferred and starts when its wait ends), so no input makes the router spin;
//   - a reset clears the stream and continues at next_seq; a reset body that does not parse clears
//     every rank of the worker and resyncs at the next batch;
//   - AllBlocksCleared clears the stream (an engine event like any other).
//
// Worker set (SetWorkers, from the registry watcher merged with static workers): events of workers
// not in the set are dropped and counted (under the worker label UnregisteredWorker, so untrusted
// subjects cannot grow the metric's label set). A worker that appears (new, or back after a removal)
// gets a replay request from seq 0 for each rank: its blocks were purged at removal, so only its whole
// history rebuilds it; when the bridge no longer holds seq 0 the request fails and the worker's
// snapshot is loaded instead (when that fails too, nothing is cleared that was not already empty,
// and the stream starts at the next batch). (Asking from "last applied+1"
// would only help a worker that kept its state, and a removed worker keeps none.) A record update
// that changes engine, block_size or dp_size restarts the worker the same way; other updates
// (endpoint, contract, features) keep its state. A removed worker (deregistered or expired) is purged
// from the index.
//
// Untrusted input: undecodable batches, unknown event types, malformed events and removals of unknown
// blocks are dropped and counted, never fatal; decode errors are logged at most at counts 1, 2, 4,
// 8, … per worker. Per-stream normalizer state (the cache salt of salted chains, kvevents/normalize)
// lives here and is reset whenever the stream is cleared.
//
// Concurrency: one dispatcher goroutine reads the subscription channel and hands each message to one
// of Config.Shards shard goroutines chosen by the worker id (FNV-1a), so a worker's batches stay in
// order while different workers decode and normalize in parallel. Each shard owns its workers'
// stream state; replay requests run in their own goroutines (at most one per stream) and post their
// answers back to the shard. Stats and the counters are atomics, read lock-free.
package subscriber

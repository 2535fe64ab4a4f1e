// Package bridge forwards an inference engine's KV events from ZMQ to NATS (DESIGN.md §2, §2.2) and
// registers the worker (DESIGN.md §2.1). It is Caddy-free; cmd/kvroute-bridge is its command line.
//
// For every worker and data-parallel rank r the bridge connects a ZMQ SUB socket to the engine's
// publisher (vLLM and SGLang bind rank r on the configured port + r; vllm/distributed/kv_events.py
// ZmqEventPublisher.offset_endpoint_port). Each message is three frames, [topic, seq (u64 big-endian),
// msgpack batch]; the batch is published unchanged on kvroute.events.<worker_id> with the headers
// Kvroute-Seq (decimal), Kvroute-Encoding (vllm|sglang) and Kvroute-Dp-Rank (decimal). Messages of
// another shape are counted and skipped; payloads are forwarded unchanged (the router's decoder
// handles them) and decoded once more here for the block set (below).
//
// Ordering and gaps. ZMQ PUB drops messages for a slow or reconnecting subscriber, so the bridge
// checks the sequence numbers:
//
//   - a gap (seq > last+1) is filled from the engine's ROUTER replay socket when one is configured:
//     the bridge sends [b"", start (u64 big-endian)] from a DEALER socket and reads [b"", seq,
//     payload] (SGLang, older vLLM) or [b"", topic, seq, payload] (newer vLLM) replies up to the
//     seq = -1 sentinel (ZmqEventPublisher._service_replay). It asks from the last batch it already
//     forwarded and checks that the engine still returns the same bytes for it, so a restarted
//     engine is never mistaken for a continuation;
//   - a sequence that goes back (or a replay that no longer matches) means the engine restarted:
//     its cache is gone, so the bridge announces a reset and forwards the new process's batches from
//     its first buffered one (an engine that numbers from a wall-clock epoch jumps forward instead;
//     its buffer then does not hold the bridge's last batch, which is handled the same way);
//   - a gap that cannot be filled (no replay socket, the engine's buffer moved on, no answer) is
//     announced on kvroute.ctl.<worker_id>.reset with the body {"dp_rank": r, "next_seq": n,
//     "reason": "..."}: routers clear that worker rank and continue at seq n. When the engine still
//     buffers a run of batches up to the live one, n is its first and the run is forwarded after the
//     reset.
//
// The bridge keeps a bounded ring of the batches it forwarded and answers the routers' replay
// requests on kvroute.ctl.<worker_id>.replay ({"dp_rank": r, "from_seq": n} → {"replayed": k} or
// {"error": "..."}) from the ring, else from the engine's replay socket, by publishing the batches
// again on the events subject with their original sequence numbers.
//
// Block set and snapshots (DESIGN.md §9, kvevents/snapshot). Each rank applies every batch it forwards
// to a set of the blocks its engine holds (bounded by WorkerConfig.MaxBlocks, the engine's GPU block
// count); a reset empties it (after a reset at seq 0 it is complete again). A router that cannot
// rebuild a worker from the replay ring (it started after the ring wrapped, or meets a gap the ring
// and the engine no longer hold) asks on kvroute.ctl.<worker_id>.snapshot ({"dp_rank": r}); the rank
// goroutine takes the set's blocks between two batches (as of the seq after the newest forwarded),
// and the chunks are written from the NATS callback goroutine, so forwarding goes on meanwhile (see
// kvevents/snapshot for the chunk format). Before the first forwarded batch the answer is an error.
//
// Concurrency: each rank is served by one goroutine that owns its ZMQ sockets, its ring, its block set
// and its sequence state; replay and snapshot requests from NATS are handed to it over channels, so
// batches of one rank are published in order. NATS reconnects are handled by the NATS client (publishes are buffered);
// batches lost on the way are recovered by the routers' replay requests.
package bridge

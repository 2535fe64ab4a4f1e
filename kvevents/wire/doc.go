// Package wire is the one home of kvroute's wire vocabulary: the names and forms that cross a process
// boundary and that several packages must spell the same way.
//
//   - subjects.go: the NATS subjects of DESIGN.md §2.2 (kvroute.events.<worker_id>,
//     kvroute.ctl.<worker_id>.{replay,reset,snapshot}, kvroute.sync.load), the kvroute_workers bucket
//     (§2.1), the event headers (Kvroute-Seq, Kvroute-Encoding, Kvroute-Dp-Rank) and the snapshot
//     chunk headers (§9).
//   - engine.go: engine and feature names of a worker record and a contract (vllm, sglang, mm_hashes).
//   - identity.go: a media item's Identity (DESIGN.md §3) in its two text forms, Hex (16 lowercase
//     hex digits) and UUID (16 hex digits and 48 zeros, what kvroute forwards and a worker's
//     extra_keys names), and MediaKey, one media item named by a stored block.
//   - hash.go: the two block hashes, EngineHash (the engine's, from its KV events) and BlockHash
//     (kvroute's LocalBlockHash, routing/blocks), as distinct types.
//
// It imports nothing of kvroute (internal/importrules checks it), so every layer (kvevents, media,
// routing, caddymodule, cmd) can depend on it without an edge back into the router.
package wire

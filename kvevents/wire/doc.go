// Package wire holds the names of kvroute's event transport: the forms that cross a process
// boundary on NATS and that several packages must spell the same way.
//
//   - subjects.go: the NATS subjects of DESIGN.md §2.2 (kvroute.events.<worker_id>,
//     kvroute.ctl.<worker_id>.{replay,reset,snapshot}, kvroute.sync.load), the kvroute_workers bucket
//     (§2.1), the event headers (Kvroute-Seq, Kvroute-Encoding, Kvroute-Dp-Rank) and the snapshot
//     chunk headers (§9).
//
// The hash types, identities and engine names every layer shares are in package kv (the root
// vocabulary); wire imports nothing of kvroute (internal/importrules checks it).
package wire

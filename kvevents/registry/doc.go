// Package registry holds kvroute's worker registry (DESIGN.md §2.1): the worker record, its
// validation, the NATS JetStream key-value bucket `kvroute_workers` the records live in (30 s TTL),
// a Publisher that keeps one worker's record alive (heartbeat every 10 s, key deleted on shutdown),
// and a Watcher that keeps the live set of records in memory and notifies on change.
//
// The package is Caddy-free: the kvroute Caddy app, kvroute-bridge and kvroute-sim all use it.
// Static records (declared in a Caddyfile) are merged with the live set by Merge.
package registry

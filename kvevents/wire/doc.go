// Package wire is the one home of kvroute's wire vocabulary: the names and forms that cross a
// process boundary and that several packages must spell the same way. It holds the media identity
// in its two text forms (identity.go), the media key a stored block's extra_keys names
// (identity.go), and — as they move here — the NATS subjects and headers of DESIGN.md §2.2 and the
// engine and feature names.
//
// It imports nothing of kvroute, so every layer (kvevents, media, routing, caddymodule, cmd) can
// depend on it without an edge back into the router.
package wire

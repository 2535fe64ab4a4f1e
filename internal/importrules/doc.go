// Package importrules holds the test that keeps kvroute's layering true (issues 17 and 30). The
// shared core is at the root: `kv` (hash types, identity, engine names), `kv/blocks`, `kv/index`
// and `reason` import nothing above them. The request side (`routing/...`) and the event side
// (`kvevents/...`) both depend on the core and not on each other (routing may read the transport's
// names in the leaf `kvevents/wire`, nothing else of kvevents); `media/...` depends on nothing of
// either; nothing of the Caddy-free core imports Caddy. The rules, each with its reason, are the
// `rules` table of importrules_test.go. It has no code of its own.
package importrules

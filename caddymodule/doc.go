// Package caddymodule is kvroute's Caddy glue (DESIGN.md §11): the `kvroute` app (NATS connection,
// embedded NATS server, worker registry), the `http.handlers.kvroute` handler that reads and
// checks the chat request and stores a routing Decision in the request context, the
// `http.reverse_proxy.selection_policies.kvroute` policy that turns the Decision into an upstream,
// the `http.reverse_proxy.upstreams.kvroute` source that lists registered workers, the
// `admin.api.kvroute` admin routes, metrics and Caddyfile parsing.
//
// The App's methods are filed by lifecycle stage, as Caddy's own modules are: the type and its
// JSON in app.go, then app_provision.go (Provision, Validate: no network), app_start.go,
// app_stop.go (Stop, Cleanup), and the request-time methods in app_request.go and
// app_upstreams.go; concerns with their own files (health.go, allowlist.go, memlimit.go,
// readings.go) keep their App methods there.
//
// State comes in three kinds, each with its own name:
//
//   - shared: what survives config reloads, in a caddy.UsagePool and never in a package variable
//     (TestNoPackageStateOutsidePools). natsPool holds the sharedNATS (connection, embedded server,
//     registry watcher, event core, worker health; a config holds it from Start to Stop);
//     sharedPool holds the message and segment caches, the stored-response map and the media
//     budget (shared.go; a config holds them from Provision to Cleanup).
//   - the config's run: what one loaded config builds for itself between Start and Stop (App.mu:
//     its reference to the sharedNATS, its routingCore, its worker list).
//   - per request: the Decision in the request context and the bookkeeping of its proxy attempts
//     (attempts.go), which the handler and the selection policy report to; the policy itself only
//     chooses (Selection.choose).
//
// What the router reads of itself and its workers for /metrics and the admin API are readings
// (readings.go), not state.
//
// Importing the package registers every module. Lock order: docs/LOCKS.md.
package caddymodule

// Package caddymodule is kvroute's Caddy glue (DESIGN.md §11): the `kvroute` app (NATS connection,
// embedded NATS server, worker registry), the `http.handlers.kvroute` handler that reads and
// checks the chat request and stores a routing Decision in the request context, the
// `http.reverse_proxy.selection_policies.kvroute` policy that turns the Decision into an upstream,
// the `http.reverse_proxy.upstreams.kvroute` source that lists registered workers, the
// `admin.api.kvroute` admin routes, metrics and Caddyfile parsing.
//
// Importing the package registers every module. Lock order: docs/LOCKS.md.
package caddymodule

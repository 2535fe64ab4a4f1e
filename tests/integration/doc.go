// Package integration runs kvroute inside an in-process Caddy (embedded NATS on a random loopback
// port) in front of fake OpenAI-style workers, and checks the proxy path end to end: both workers
// get traffic, bodies arrive byte-identical with an exact Content-Length (also on a retry), SSE
// events are not buffered, a client disconnect cancels the upstream, client errors are answered
// with kvroute's JSON error body and not forwarded, and a reload keeps the NATS connection.
//
// Harnesses: startHarness (options harnessOpts and modelFolder; newHarness for a Caddy started
// another way) puts simulators behind the TLS site of Caddyfile.example; startEdge puts static
// workers, usually fakeWorker (one fake upstream: recording, gated, killable), behind an edge
// Caddy. Under -short the slow tests skip, each saying why; the rest (TestTextRouting among them:
// text routed exactly through the whole chain) are the fast tier.
package integration

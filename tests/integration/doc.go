// Package integration runs kvroute inside an in-process Caddy (embedded NATS on a random loopback
// port) in front of fake OpenAI-style workers, and checks the proxy path end to end: both workers
// get traffic, bodies arrive byte-identical with an exact Content-Length (also on a retry), SSE
// events are not buffered, a client disconnect cancels the upstream, client errors are answered
// with kvroute's JSON error body and not forwarded, and a reload keeps the NATS connection.
package integration
